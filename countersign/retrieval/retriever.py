"""Hybrid retrieval over one clause corpus: BM25 and dense arms, each over-fetching 3k, fused by weighted RRF.

`Retriever.build(corpus)` indexes every clause once (BM25: title, text, clause number and defined terms; dense: title
then text). `search` validates its input, expands the query with the trade glossary
(`countersign.retrieval.expansion`), scores
every clause in both arms, keeps each arm's best `3 * k` within the contract's form (BM25 keeps only clauses sharing
a term with the query), and fuses the two rankings, keeping each arm's first hit; a clause the query names by its
number ("cl 4.2") comes first in the fusion, whatever the arms say. `Tuning` holds the choices the
eval's sweep made; the defaults are the ones recorded in docs/benchmarks.md. Every ordering breaks ties by clause id,
so the same corpus and query always give the same hits. The index is read-only after build; searching from many
threads is safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from countersign.retrieval.analysis import clause_number_token, clause_references
from countersign.retrieval.corpus import ClauseCorpus
from countersign.retrieval.dense import DenseIndex
from countersign.retrieval.expansion import Expansion, QueryExpander
from countersign.retrieval.fusion import DENSE_WEIGHT, LEXICAL_WEIGHT, RRF_K, reciprocal_rank_fusion
from countersign.retrieval.lexical import EXPANSION_WEIGHT, TITLE_REPEATS, LexicalIndex

Arm = Literal["bm25", "dense", "fused"]
ARMS: tuple[Arm, ...] = ("bm25", "dense", "fused")
OVERFETCH = 3
MAX_K = 100
MAX_QUERY_CHARS = 2_000


@dataclass(frozen=True)
class Tuning:
    """The retriever's tuned choices (docs/benchmarks.md records the sweep that chose the defaults)."""

    rrf_k: int = RRF_K
    lexical_weight: float = LEXICAL_WEIGHT
    dense_weight: float = DENSE_WEIGHT
    keep_first: bool = True  # each arm's first hit stays in the fused top k
    expansion: Expansion = Expansion.GLOSSARY  # which glossary adds the contract's words to a query
    expand_dense: bool = True  # whether the dense arm embeds them too (the lexical arm always scores them)
    expansion_weight: float = EXPANSION_WEIGHT
    title_repeats: int = TITLE_REPEATS


DEFAULT_TUNING = Tuning()


@dataclass(frozen=True)
class Hit:
    clause_id: str
    title: str
    sha256: str
    score: float  # the RRF score when fused (0 for a named clause neither arm found); the arm's own for one arm
    lexical_rank: int | None  # 1-based rank in the BM25 arm's over-fetched list; None when not in it
    dense_rank: int | None


@dataclass(frozen=True)
class Retrieval:
    query: str
    k: int
    form: str | None
    arm: str
    corpus_version: str
    hits: tuple[Hit, ...]

    def ids(self) -> frozenset[str]:
        return frozenset(hit.clause_id for hit in self.hits)


class Retriever:
    """Built once from a ClauseCorpus; thread-safe to query."""

    def __init__(
        self, corpus: ClauseCorpus, lexical: LexicalIndex, dense: DenseIndex, tuning: Tuning = DEFAULT_TUNING
    ) -> None:
        self.corpus = corpus
        self.tuning = tuning
        self._lexical = lexical
        self._dense = dense
        self._expander = QueryExpander.for_expansion(tuning.expansion)
        self._ids = [clause.id for clause in corpus.clauses]
        self._position = {clause_id: index for index, clause_id in enumerate(self._ids)}
        if len(self._position) != len(self._ids):
            raise ValueError("the corpus lists a clause id twice")
        order = sorted(range(len(self._ids)), key=self._ids.__getitem__)
        self._id_order = np.empty(len(order), dtype=np.int64)  # position of each clause in clause-id order
        self._id_order[order] = np.arange(len(order))
        forms = np.array([clause.form for clause in corpus.clauses])
        self._form_members = {code: np.flatnonzero(forms == code) for code in sorted(corpus.form_codes)}
        self._everything = np.arange(len(self._ids))
        self._by_number: dict[str, list[int]] = {}
        for index, clause in enumerate(corpus.clauses):
            self._by_number.setdefault(clause_number_token(clause.number), []).append(index)

    @classmethod
    def build(cls, corpus: ClauseCorpus, tuning: Tuning = DEFAULT_TUNING) -> Retriever:
        lexical = LexicalIndex.build(
            corpus.clauses, title_repeats=tuning.title_repeats, expansion_weight=tuning.expansion_weight
        )
        dense = DenseIndex.build([clause.searchable_text for clause in corpus.clauses])
        return cls(corpus, lexical, dense, tuning)

    def retuned(self, tuning: Tuning) -> Retriever:
        """The same dense index under other choices (the eval's sweep); the lexical index is rebuilt only when its
        own choices change."""
        lexical = self._lexical
        if (tuning.title_repeats, tuning.expansion_weight) != (self.tuning.title_repeats, self.tuning.expansion_weight):
            lexical = LexicalIndex.build(
                self.corpus.clauses, title_repeats=tuning.title_repeats, expansion_weight=tuning.expansion_weight
            )
        return Retriever(self.corpus, lexical, self._dense, tuning)

    def search(self, query: str, k: int = 5, *, form: str | None = None, arm: str = "fused") -> Retrieval:
        """The best k clauses for the query, within `form` when given; ValueError names a bad argument."""
        self._check(query, k, form, arm)
        candidates = self._everything if form is None else self._form_members[form]
        depth = OVERFETCH * k
        lexical: list[int] = []
        dense: list[int] = []
        lexical_scores = dense_scores = None
        expansions = self._expander.expansions(query)
        if arm in ("bm25", "fused"):
            analysed = self._lexical.analyse(query, expansions)
            lexical_scores = self._lexical.scores(analysed)
            lexical = self._ranked(lexical_scores, candidates, depth, positive_only=True)
        if arm in ("dense", "fused"):
            dense_text = " ".join([query, *expansions]) if self.tuning.expand_dense and expansions else query
            dense_scores = self._dense.scores(dense_text)
            dense = self._ranked(dense_scores, candidates, depth, positive_only=False)
        lexical_ranks = {index: rank for rank, index in enumerate(lexical, start=1)}
        dense_ranks = {index: rank for rank, index in enumerate(dense, start=1)}

        chosen: list[tuple[int, float]]
        if arm == "bm25":
            assert lexical_scores is not None
            chosen = [(index, float(lexical_scores[index])) for index in lexical[:k]]
        elif arm == "dense":
            assert dense_scores is not None
            chosen = [(index, float(dense_scores[index])) for index in dense[:k]]
        else:
            tuning = self.tuning
            fused = reciprocal_rank_fusion(
                [[self._ids[i] for i in lexical], [self._ids[i] for i in dense]],
                k=tuning.rrf_k,
                weights=(tuning.lexical_weight, tuning.dense_weight),
                keep_first=tuning.keep_first,
                depth=k,
            )
            named = self._named(query, candidates)
            scores = dict(fused)
            ordered = [*named, *(clause_id for clause_id, _ in fused if clause_id not in named)]
            chosen = [(self._position[clause_id], scores.get(clause_id, 0.0)) for clause_id in ordered[:k]]

        clauses = self.corpus.clauses
        hits = tuple(
            Hit(
                clause_id=clauses[index].id,
                title=clauses[index].title,
                sha256=clauses[index].sha256,
                score=score,
                lexical_rank=lexical_ranks.get(index),
                dense_rank=dense_ranks.get(index),
            )
            for index, score in chosen
        )
        return Retrieval(query, k, form, arm, self.corpus.version, hits)

    def _named(self, query: str, candidates: npt.NDArray[np.int64]) -> list[str]:
        """The ids of the candidate clauses whose numbers the query names ("cl 4.2"), in the order it names them."""
        numbered = [index for token in clause_references(query) for index in self._by_number.get(token, [])]
        if not numbered:
            return []
        allowed = set(candidates.tolist())
        return list(dict.fromkeys(self._ids[index] for index in numbered if index in allowed))

    def _check(self, query: str, k: int, form: str | None, arm: str) -> None:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise ValueError(f"query is {len(query)} characters, more than {MAX_QUERY_CHARS}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise ValueError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
        if form is not None and form not in self._form_members:
            raise ValueError(f"unknown form {form!r}; the corpus has {', '.join(self._form_members)}")
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; expected one of {', '.join(ARMS)}")

    def _ranked(
        self, scores: npt.NDArray[np.float32], candidates: npt.NDArray[np.int64], depth: int, *, positive_only: bool
    ) -> list[int]:
        """Indexes of the best `depth` candidates by score, ties by clause id; only scores > 0 if positive_only."""
        candidate_scores = scores[candidates]
        if positive_only:
            keep = candidate_scores > 0
            candidates, candidate_scores = candidates[keep], candidate_scores[keep]
        if len(candidates) > depth:
            # Everything scoring at least the depth-th best score, so ties at the cut are all seen by the sort.
            threshold = np.partition(candidate_scores, len(candidate_scores) - depth)[len(candidate_scores) - depth]
            keep = candidate_scores >= threshold
            candidates, candidate_scores = candidates[keep], candidate_scores[keep]
        order = np.lexsort((self._id_order[candidates], -candidate_scores))
        return [int(index) for index in candidates[order[:depth]]]
