"""What the lexical index sees: stemmed words, clause numbers, the corpus's defined terms and their initials."""

from __future__ import annotations

import sys
import threading

import pytest

from countersign.retrieval.analysis import DefinedTerms, clause_references, stem, without_clause_references, words


def test_words_are_stemmed_so_tested_meets_test() -> None:
    assert words("tested") == words("test") == words("testing") == ["test"]
    assert words("Valuations") == words("valuation")
    assert words("retentions withheld") == ["retent", "withheld"]


def test_question_words_and_stop_words_are_dropped() -> None:
    assert words("What does the Contractor get when we pay late?") == ["contractor", "pay", "late"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("clause 4.2", ["§4.2"]),
        ("cl. 13.2 retention", ["§13.2"]),
        ("what does 6.1 say", ["§6.1"]),
        ("11.4 final date for payment", ["§11.4"]),
        ("see CSB-12.6 and 5.1", ["§12.6", "§5.1"]),
        ("cl 4.2 then clause 4.2 again", ["§4.2"]),
        ("a 2.5% retention limit", []),
        ("2.5 per cent of the sum", []),
        ("£10.50 an hour", []),
        ("retention GBP 13.10 over the limit of GBP 1,312.50 (CSB-13.2)", ["§13.2"]),
        ("EUR 4.5 then cl 4.5", ["§4.5"]),
        ("113.2 or 1.2.3", []),
        ("13.25", ["§13.25"]),
        ("retention limit", []),
    ],
)
def test_clause_numbers_are_read_from_a_query_but_amounts_are_not(text: str, expected: list[str]) -> None:
    assert clause_references(text) == expected
    blanked = without_clause_references(text)
    assert clause_references(blanked) == []


CORPUS_TEXTS = [
    "Practical Completion is certified by the Architect. Until Practical Completion the Contractor insures.",
    "Each Interim Certificate states the sum. The Final Date for Payment follows the Due Date.",
    "The Final Date for Payment is 14 days after the Due Date. An Interim Certificate is issued monthly.",
    "A Pay Less Notice is served once. Retention Bond terms apply.",
]


def test_defined_terms_are_capitalised_runs_seen_twice_without_a_sentences_first_word() -> None:
    terms = DefinedTerms.find(CORPUS_TEXTS)

    assert terms.terms == {
        ("practic", "complet"),
        ("interim", "certif"),
        ("final", "date", "payment"),
        ("due", "date"),
    }  # not "Until Practical Completion", "Each Interim Certificate"; "Pay Less Notice" appears only once


def test_a_defined_term_in_a_text_becomes_one_token_in_any_case() -> None:
    terms = DefinedTerms.find(CORPUS_TEXTS)

    assert terms.tokens_in(words("release at practical completion")) == ["practic_complet"]
    assert terms.tokens_in(words("the final date for payment and the Due Date")) == ["final_date_payment", "due_date"]
    assert terms.tokens_in(words("practical help on completion")) == []


def test_capitalised_initials_stand_for_a_defined_term_and_lower_case_does_not() -> None:
    terms = DefinedTerms.find(CORPUS_TEXTS)

    assert terms.expand_abbreviations("half the ret back at PC?") == [("practic", "complet")]
    assert terms.expand_abbreviations("FDP and ICs") == [("final", "date", "payment"), ("interim", "certif")]
    assert terms.expand_abbreviations("pc fdp") == []
    assert terms.expand_abbreviations("XYZ") == []


def test_initials_shared_by_two_terms_stand_for_the_more_frequent() -> None:
    texts = ["Practical Completion and Practical Completion.", "Previously Certified and Previously Certified."]
    texts.append("Practical Completion again.")

    assert DefinedTerms.find(texts).expand_abbreviations("PC") == [("practic", "complet")]


def test_stemming_from_many_threads_at_once_gives_each_word_its_own_stem() -> None:
    # A Snowball stemmer holds the word it is working on; shared between threads, one thread's word leaks into
    # another's stem. Switching threads every microsecond makes that interleaving near certain. The stemmer is
    # called past `stem`'s cache, which would otherwise answer every repeat without stemming.
    uncached = stem.__wrapped__
    vocabulary = ["retentions", "valuations", "certified", "incorporated", "mobilisation", "testing", "quantities"]
    expected = {word: stem(word) for word in vocabulary}
    mismatches: list[tuple[str, str]] = []

    def worker(offset: int) -> None:
        for round_ in range(3000):
            word = vocabulary[(round_ + offset) % len(vocabulary)]
            got = uncached(word)
            if got != expected[word]:
                mismatches.append((word, got))

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(previous)

    assert mismatches == []
