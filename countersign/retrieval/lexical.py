"""The lexical arm: BM25 (bm25s, Lucene variant) over stemmed words, clause numbers and defined terms.

A clause is indexed as its title (TITLE_REPEATS times: a title is a short, dense statement of what the clause
governs), its text, its number token (`§4.2`) and a token for each defined term either contains
(`countersign.retrieval.analysis`). A query goes through the same analysis, plus the clause numbers it names and the
defined
terms its capitalised abbreviations stand for; terms added by query expansion (`countersign.retrieval.expansion`) score
at
EXPANSION_WEIGHT of a term the asker wrote.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import bm25s
import numpy as np
import numpy.typing as npt

from countersign.retrieval.analysis import (
    TERM_SEPARATOR,
    DefinedTerms,
    clause_number_token,
    clause_references,
    without_clause_references,
    words,
)
from countersign.retrieval.corpus import Clause

# bm25s sets its own logger to DEBUG on import, so its debug lines would reach a host's handlers whatever the root
# logger's level; hold it at WARNING.
logging.getLogger("bm25s").setLevel(logging.WARNING)

TITLE_REPEATS: Final = 1
EXPANSION_WEIGHT: Final = 0.5


@dataclass(frozen=True)
class LexicalQuery:
    """A query's tokens: those from the asker's words, and those a query expansion added (scored lower)."""

    tokens: tuple[str, ...]
    expansion: tuple[str, ...] = ()


@dataclass(frozen=True)
class LexicalIndex:
    """BM25 scores for every document at once; read-only after build, so safe to query from many threads."""

    _bm25: bm25s.BM25
    _vocabulary: dict[str, int]
    defined_terms: DefinedTerms
    documents: int
    expansion_weight: float

    @classmethod
    def build(
        cls,
        clauses: Sequence[Clause],
        *,
        title_repeats: int = TITLE_REPEATS,
        expansion_weight: float = EXPANSION_WEIGHT,
    ) -> LexicalIndex:
        if not clauses:
            raise ValueError("cannot index an empty list of documents")
        defined_terms = DefinedTerms.find(text for clause in clauses for text in (clause.title, clause.text))
        bm25 = bm25s.BM25(method="lucene")
        documents = [document_tokens(clause, defined_terms, title_repeats) for clause in clauses]
        bm25.index(documents, show_progress=False)
        return cls(bm25, dict(bm25.vocab_dict), defined_terms, len(clauses), expansion_weight)

    def analyse(self, query: str, expansion: Sequence[str] = ()) -> LexicalQuery:
        """The query's tokens; `expansion` is extra text (synonyms) whose tokens score at the expansion weight."""
        stems = words(without_clause_references(query))
        tokens = [*stems, *self.defined_terms.tokens_in(stems), *clause_references(query)]
        added: list[str] = []
        for term in self.defined_terms.expand_abbreviations(query):
            added.extend([*term, TERM_SEPARATOR.join(term)])
        for text in expansion:
            expanded = words(text)
            added.extend([*expanded, *self.defined_terms.tokens_in(expanded)])
        return LexicalQuery(tuple(tokens), tuple(token for token in added if token not in tokens))

    def scores(self, query: str | LexicalQuery) -> npt.NDArray[np.float32]:
        """One BM25 score per document, in build order; zero where the document shares no term with the query."""
        analysed = self.analyse(query) if isinstance(query, str) else query
        total = self._scores(analysed.tokens)
        if analysed.expansion and self.expansion_weight > 0:
            total = total + np.float32(self.expansion_weight) * self._scores(analysed.expansion)
        return total

    def _scores(self, tokens: Sequence[str]) -> npt.NDArray[np.float32]:
        token_ids = list(dict.fromkeys(self._vocabulary[token] for token in tokens if token in self._vocabulary))
        if not token_ids:
            return np.zeros(self.documents, dtype=np.float32)
        scores: npt.NDArray[np.float32] = np.asarray(self._bm25.get_scores_from_ids(token_ids), dtype=np.float32)
        return scores


def document_tokens(clause: Clause, defined_terms: DefinedTerms, title_repeats: int = TITLE_REPEATS) -> list[str]:
    """What the index holds for one clause: title, text, their defined terms, and the clause number."""
    title, text = words(clause.title), words(clause.text)
    terms = [*defined_terms.tokens_in(title), *defined_terms.tokens_in(text)]
    return [*title * title_repeats, *text, *terms, clause_number_token(clause.number)]
