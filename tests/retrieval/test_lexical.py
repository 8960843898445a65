"""The lexical arm answers what issue 22 found it missing: inflections, clause numbers, defined terms, shorthand."""

from __future__ import annotations

import pytest

from countersign.retrieval import Clause, ClauseCorpus, Retriever
from countersign.retrieval.corpus import ContractForm
from countersign.retrieval.expansion import Expansion, QueryExpander
from countersign.retrieval.lexical import LexicalIndex, document_tokens
from tests.retrieval.corpus_files import real_retriever

FORM = ContractForm("CSB", "Countersign Standard Building Contract", "2024", "Employer", "Architect", "Bill")


def clause(number: str, title: str, text: str) -> Clause:
    return Clause.create(id=f"CSB-{number}", form="CSB", topic="t", number=number, title=title, text=text)


def top(index: LexicalIndex, corpus: ClauseCorpus, query: str) -> list[str]:
    scores = index.scores(query)
    ranked = sorted(range(len(corpus.clauses)), key=lambda i: (-scores[i], corpus.clauses[i].id))
    return [corpus.clauses[i].id for i in ranked if scores[i] > 0]


def test_a_query_about_testing_finds_the_clause_that_says_tested() -> None:
    found = real_retriever().search("is untested work left out of the valuation test", 5, form="CSB", arm="bm25")

    assert found.hits[0].clause_id == "CSB-9.1"  # "...not tested where testing is required..."
    assert "test" in LexicalIndex.build([clause("1.1", "Tests", "Work is tested.")]).analyse("testing").tokens


@pytest.mark.parametrize(
    ("query", "form", "expected"),
    [("clause 12.6", "CSB", "CSB-12.6"), ("cl 11.6", "CSI", "CSI-11.6"), ("what does 6.1 say", "CSM", "CSM-6.1")],
)
def test_a_clause_number_finds_its_clause_first_in_bm25_and_in_the_fusion(query: str, form: str, expected: str) -> None:
    for arm in ("bm25", "fused"):
        assert real_retriever().search(query, 5, form=form, arm=arm).hits[0].clause_id == expected, arm


def test_a_number_that_is_an_amount_does_not_pull_in_the_clause_with_that_number() -> None:
    corpus = ClauseCorpus.create(
        [FORM],
        [
            clause("2.5", "Insurance", "The works are insured in joint names."),
            clause("3.1", "Retention limit", "Retention stops at 2.5 per cent of the Contract Sum."),
        ],
    )
    index = LexicalIndex.build(corpus.clauses)

    assert top(index, corpus, "retention of 2.5 per cent") == ["CSB-3.1"]
    assert top(index, corpus, "clause 2.5")[0] == "CSB-2.5"


def test_a_defined_term_outscores_a_clause_with_the_same_words_apart() -> None:
    corpus = ClauseCorpus.create(
        [FORM],
        [
            clause("1.1", "Completion", "Practical Completion is certified when the works are complete."),
            clause("1.2", "Release", "Half the retention is released at Practical Completion."),
            clause("1.3", "Practice", "Completion of paperwork is a practical matter for the site office."),
        ],
    )
    index = LexicalIndex.build(corpus.clauses)

    assert "practic_complet" in document_tokens(corpus.clauses[1], index.defined_terms)
    assert "practic_complet" not in document_tokens(corpus.clauses[2], index.defined_terms)
    assert top(index, corpus, "practical completion")[-1] == "CSB-1.3"
    assert top(index, corpus, "retention at PC")[0] == "CSB-1.2"  # the initials stand for the defined term


def test_titles_and_clause_numbers_are_indexed() -> None:
    index = LexicalIndex.build([clause("4.2", "Dayworks", "Paid when instructed.")])

    tokens = document_tokens(clause("4.2", "Dayworks", "Paid when instructed."), index.defined_terms)

    assert tokens == ["daywork", "paid", "instruct", "§4.2"]


def test_the_glossary_turns_shorthand_into_the_contracts_words() -> None:
    expander = QueryExpander.for_expansion(Expansion.GLOSSARY)

    assert expander.expansions("ret % on interims") == ("retention",)
    assert expander.expansions("MOS now built in") == ("materials on site unfixed", "incorporated")
    assert expander.expansions("how much is held back") == ("retention",)
    assert expander.expansions("retention at practical completion") == ()
    assert QueryExpander.for_expansion(Expansion.NONE).expansions("ret % on interims") == ()
    assert QueryExpander.for_expansion(Expansion.ABBREVIATIONS).expansions("how much is held back") == ()


def test_expansion_terms_score_below_the_askers_own_words() -> None:
    index = LexicalIndex.build(
        [clause("1.1", "Retention", "Retention is five per cent."), clause("1.2", "Holding", "Holding is held.")]
    )

    plain = index.scores(index.analyse("held back"))
    expanded = index.analyse("held back", ("retention",))

    assert expanded.tokens == ("held", "back") and expanded.expansion == ("retent",)
    assert index.scores(expanded)[1] == pytest.approx(plain[1])  # the asker's words score as before
    assert 0 < index.scores(expanded)[0] < index.scores(index.analyse("retention"))[0]


def test_a_shorthand_question_is_answered_by_the_fusion() -> None:
    retriever: Retriever = real_retriever()

    assert "CSB-10.1" in retriever.search("MOS - what can go in the valn", 5, form="CSB").ids()
    assert "CSB-13.3" in retriever.search("half ret back at PC?", 5, form="CSB").ids()
