"""The retrieval eval: labelled queries against each arm and the fusion, with two negative controls, and the sweep
that chose the retriever's tuning.

Queries carry their form, a kind (`paraphrase`: the asker's own words or shorthand; `exact`: the clause's own terms,
or its number) and the ids of the clauses that answer them. Each is searched within its form, as a contract would
be. Per arm: recall@5 (share of a query's relevant clauses in the top 5 of a k=5 search, the depth the agent uses)
and MRR@10 (reciprocal rank of the first relevant clause in a k=10 search), averaged over queries, overall and per
kind. Two query sets are scored, each on its own: the tuning set (`config/evals/retrieval_queries.yaml`, the only
one the sweep and the glossary were fitted on) and the held-out set (`retrieval_queries_heldout.yaml`, written in a
surveyor's shorthand before any tuning).

`check` fails a report unless the fused recall@5 is at least each arm's and reaches the issue's targets:
FUSED_RECALL_AT_5_TARGET = 0.85 overall and PARAPHRASE_RECALL_AT_5_TARGET = 0.75 on paraphrase queries. Two
negative controls must fail it: `shuffled_labels` keeps every query and permutes the relevance labels among queries
of the same form (the labels carry the signal), and `RandomRetriever` answers every query with random clauses of
its form (the retriever carries it). Both score near `chance`.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import yaml

from countersign.evals.scoring import Summary
from countersign.retrieval.corpus import ClauseCorpus
from countersign.retrieval.expansion import Expansion
from countersign.retrieval.retriever import ARMS, MAX_QUERY_CHARS, Hit, Retrieval, Retriever, Tuning

KINDS = ("paraphrase", "exact")
RECALL_DEPTH = 5
MRR_DEPTH = 10
FUSED_RECALL_AT_5_TARGET = 0.85
PARAPHRASE_RECALL_AT_5_TARGET = 0.75
HARNESS = "retrieval eval"
MAX_QUERIES = 10_000
MAX_QUERY_FILE_BYTES = 8 * 1024 * 1024
_QUERY_KEYS = ("id", "form", "kind", "query", "relevant")


class QueryFileError(ValueError):
    """The labelled query file is unreadable or wrong; `query_id` names the query when one is at fault."""

    def __init__(self, problem: str, *, query_id: str | None = None) -> None:
        super().__init__(f"query {query_id}: {problem}" if query_id else problem)
        self.problem = problem
        self.query_id = query_id


@dataclass(frozen=True)
class LabelledQuery:
    id: str
    form: str
    kind: str
    query: str
    relevant: frozenset[str]


@dataclass(frozen=True)
class Scores:
    queries: int
    recall_at_5: float
    mrr_at_10: float


@dataclass(frozen=True)
class ArmReport:
    arm: str
    overall: Scores
    by_kind: Mapping[str, Scores]
    missed: tuple[str, ...]  # ids of the queries with no relevant clause in the top 5


@dataclass(frozen=True)
class RetrievalReport:
    corpus_version: str
    arms: tuple[ArmReport, ...]
    chance: Scores  # what a random ranking within each query's form would score on these labels

    def arm(self, name: str) -> ArmReport:
        return next(report for report in self.arms if report.arm == name)


def recall_at(k: int, ranked: Sequence[str], relevant: Set[str]) -> float:
    """Share of the relevant clause ids that appear in the first k of `ranked`."""
    if not relevant:
        raise ValueError("recall of a query with no relevant clauses is undefined")
    return sum(1 for clause_id in set(ranked[:k]) if clause_id in relevant) / len(relevant)


def mrr_at(k: int, ranked: Sequence[str], relevant: Set[str]) -> float:
    """Reciprocal rank of the first relevant clause id within the first k of `ranked`; 0 when there is none."""
    for rank, clause_id in enumerate(ranked[:k], start=1):
        if clause_id in relevant:
            return 1.0 / rank
    return 0.0


class Searcher(Protocol):
    """What the eval asks of a retriever (a `Retriever`, or a control that answers at random)."""

    @property
    def corpus(self) -> ClauseCorpus: ...

    def search(self, query: str, k: int = 5, *, form: str | None = None, arm: str = "fused") -> Retrieval: ...


def evaluate(
    retriever: Searcher, queries: Sequence[LabelledQuery], arms_to_score: Sequence[str] = ARMS
) -> RetrievalReport:
    if not queries:
        raise ValueError("no queries to evaluate")
    arms = []
    for arm in arms_to_score:
        recalls: dict[str, float] = {}
        reciprocal_ranks: dict[str, float] = {}
        for query in queries:
            top5 = [hit.clause_id for hit in retriever.search(query.query, RECALL_DEPTH, form=query.form, arm=arm).hits]
            top10 = [hit.clause_id for hit in retriever.search(query.query, MRR_DEPTH, form=query.form, arm=arm).hits]
            recalls[query.id] = recall_at(RECALL_DEPTH, top5, query.relevant)
            reciprocal_ranks[query.id] = mrr_at(MRR_DEPTH, top10, query.relevant)
        by_kind = {
            kind: _scores([query for query in queries if query.kind == kind], recalls, reciprocal_ranks)
            for kind in KINDS
        }
        missed = tuple(query.id for query in queries if recalls[query.id] == 0.0)
        arms.append(ArmReport(arm, _scores(queries, recalls, reciprocal_ranks), by_kind, missed))
    return RetrievalReport(retriever.corpus.version, tuple(arms), chance(retriever.corpus, queries))


def check(report: RetrievalReport) -> list[str]:
    """The thresholds the report fails, one line each; empty when it passes."""
    failures = []
    fused = report.arm("fused")
    for arm in ("bm25", "dense"):
        alone = report.arm(arm).overall.recall_at_5
        if fused.overall.recall_at_5 < alone:
            failures.append(f"fused recall@5 {fused.overall.recall_at_5:.3f} is below {arm} alone ({alone:.3f})")
    if fused.overall.recall_at_5 < FUSED_RECALL_AT_5_TARGET:
        failures.append(
            f"fused recall@5 {fused.overall.recall_at_5:.3f} is below the target {FUSED_RECALL_AT_5_TARGET:.2f}"
        )
    paraphrase = fused.by_kind["paraphrase"]
    if paraphrase.queries and not paraphrase.recall_at_5 >= PARAPHRASE_RECALL_AT_5_TARGET:
        failures.append(
            f"fused paraphrase recall@5 {paraphrase.recall_at_5:.3f} is below the target "
            f"{PARAPHRASE_RECALL_AT_5_TARGET:.2f}"
        )
    return failures


def summary(report: RetrievalReport, control: RetrievalReport) -> tuple[Summary, ...]:
    """The fused arm's recall@5 against the target; on shuffled labels (the control) it must stay below it. `check`
    also asks the fusion to reach each arm and the paraphrase target."""
    return (
        Summary(HARNESS, "fused recall@5", report.arm("fused").overall.recall_at_5, FUSED_RECALL_AT_5_TARGET),
        Summary(
            HARNESS, "fused recall@5", control.arm("fused").overall.recall_at_5, FUSED_RECALL_AT_5_TARGET, control=True
        ),
    )


class RandomRetriever:
    """The retriever control: every arm answers with clauses of the query's form in a random order, seeded by the
    query, the arm and `seed`, so a run is reproducible. It must score near chance and fail `check`."""

    def __init__(self, corpus: ClauseCorpus, seed: int) -> None:
        self.corpus = corpus
        self._seed = seed

    def search(self, query: str, k: int = 5, *, form: str | None = None, arm: str = "fused") -> Retrieval:
        clauses = [clause for clause in self.corpus.clauses if form is None or clause.form == form]
        order = random.Random(f"{self._seed}/{arm}/{query}").sample(clauses, len(clauses))
        hits = tuple(Hit(clause.id, clause.title, clause.sha256, 0.0, None, None) for clause in order[:k])
        return Retrieval(query, k, form, arm, self.corpus.version, hits)


# --- the sweep -------------------------------------------------------------------------------------------------

SWEEP_RRF_K = (0, 1, 2, 5, 10, 20, 60)
SWEEP_WEIGHTS = ((1.0, 1.0), (1.0, 0.75), (0.75, 1.0), (1.0, 0.5), (0.5, 1.0))  # (lexical, dense)
SWEEP_EXPANSIONS = (
    (Expansion.NONE, False),
    (Expansion.ABBREVIATIONS, False),
    (Expansion.ABBREVIATIONS, True),
    (Expansion.GLOSSARY, False),
    (Expansion.GLOSSARY, True),
)


@dataclass(frozen=True)
class SweepRow:
    tuning: Tuning
    fused: Scores
    paraphrase: Scores


def sweep_grid() -> Iterable[Tuning]:
    for (expansion, expand_dense), k, (lexical, dense), keep_first in itertools.product(
        SWEEP_EXPANSIONS, SWEEP_RRF_K, SWEEP_WEIGHTS, (True, False)
    ):
        yield Tuning(
            rrf_k=k,
            lexical_weight=lexical,
            dense_weight=dense,
            keep_first=keep_first,
            expansion=expansion,
            expand_dense=expand_dense,
        )


def sweep(retriever: Retriever, queries: Sequence[LabelledQuery], grid: Iterable[Tuning]) -> list[SweepRow]:
    """The fused arm's scores under each tuning, best first: recall@5, then paraphrase recall@5, then MRR@10."""
    rows = []
    for tuning in grid:
        fused = evaluate(retriever.retuned(tuning), queries, ("fused",)).arm("fused")
        rows.append(SweepRow(tuning, fused.overall, fused.by_kind["paraphrase"]))
    return sorted(rows, key=lambda row: (-row.fused.recall_at_5, -row.paraphrase.recall_at_5, -row.fused.mrr_at_10))


def shuffled_labels(queries: Sequence[LabelledQuery], seed: int) -> tuple[LabelledQuery, ...]:
    """The negative control: each query gets the relevance labels of another query of its form (a seeded shuffle,
    then a rotation by one, so no query keeps its own label list when its form has two or more queries)."""
    rng = random.Random(seed)
    by_form: dict[str, list[int]] = defaultdict(list)
    for index, query in enumerate(queries):
        by_form[query.form].append(index)
    relabelled = list(queries)
    for form in sorted(by_form):
        order = list(by_form[form])
        rng.shuffle(order)
        for position, index in enumerate(order):
            donor = queries[order[(position + 1) % len(order)]]
            relabelled[index] = replace(queries[index], relevant=donor.relevant)
    return tuple(relabelled)


def chance(corpus: ClauseCorpus, queries: Sequence[LabelledQuery]) -> Scores:
    """Expected recall@5 and MRR@10 of a uniformly random ranking of each query's form."""
    form_sizes: dict[str, int] = defaultdict(int)
    for clause in corpus.clauses:
        form_sizes[clause.form] += 1
    recalls, reciprocal_ranks = [], []
    for query in queries:
        size, relevant = form_sizes[query.form], len(query.relevant)
        recalls.append(min(RECALL_DEPTH, size) / size)
        # P(first relevant at rank i) = P(the first i-1 are all irrelevant) * P(the i-th is relevant | that)
        expected, none_yet = 0.0, 1.0
        for rank in range(1, min(MRR_DEPTH, size) + 1):
            remaining = size - rank + 1
            expected += none_yet * (relevant / remaining) / rank
            none_yet *= max(0, remaining - relevant) / remaining
        reciprocal_ranks.append(expected)
    return Scores(len(queries), math.fsum(recalls) / len(queries), math.fsum(reciprocal_ranks) / len(queries))


def load_queries(path: Path, corpus: ClauseCorpus) -> tuple[LabelledQuery, ...]:
    """Read the labelled queries; QueryFileError names the query id and what was wrong."""
    try:
        size = path.stat().st_size
        if size > MAX_QUERY_FILE_BYTES:
            raise QueryFileError(f"{path}: {size} bytes, more than {MAX_QUERY_FILE_BYTES}")
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise QueryFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise QueryFileError(f"{path}: not UTF-8 YAML ({exc})") from exc
    if not isinstance(document, dict) or not isinstance(document.get("queries"), list) or not document["queries"]:
        raise QueryFileError(f"{path}: expected a mapping with a non-empty `queries` list")
    raw_queries: list[Any] = document["queries"]
    if len(raw_queries) > MAX_QUERIES:
        raise QueryFileError(f"{path}: {len(raw_queries)} queries, more than {MAX_QUERIES}")
    queries: list[LabelledQuery] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_queries):
        query = _parse_query(raw, index, corpus)
        if query.id in seen:
            raise QueryFileError("appears twice", query_id=query.id)
        seen.add(query.id)
        queries.append(query)
    return tuple(queries)


def _parse_query(raw: Any, index: int, corpus: ClauseCorpus) -> LabelledQuery:
    if not isinstance(raw, dict):
        raise QueryFileError(f"queries[{index}] is not a mapping")
    query_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else f"queries[{index}]"
    assert isinstance(query_id, str)
    unknown = sorted(str(key) for key in raw if key not in _QUERY_KEYS)
    if unknown:
        raise QueryFileError(f"unknown keys {', '.join(unknown)}", query_id=query_id)
    missing = [key for key in ("id", "form", "kind", "query") if not isinstance(raw.get(key), str) or not raw[key]]
    if missing:
        raise QueryFileError(f"missing or empty string fields: {', '.join(missing)}", query_id=query_id)
    form, kind, text = raw["form"], raw["kind"], raw["query"]
    if form not in corpus.form_codes:
        raise QueryFileError(f"form {form!r} is not in the corpus", query_id=query_id)
    if kind not in KINDS:
        raise QueryFileError(f"kind {kind!r} is not one of {', '.join(KINDS)}", query_id=query_id)
    if not text.strip() or len(text) > MAX_QUERY_CHARS:
        raise QueryFileError(f"query text must be 1 to {MAX_QUERY_CHARS} characters", query_id=query_id)
    relevant = raw.get("relevant")
    if not isinstance(relevant, list) or not relevant or not all(isinstance(item, str) for item in relevant):
        raise QueryFileError("`relevant` must be a non-empty list of clause ids", query_id=query_id)
    if len(set(relevant)) != len(relevant):
        raise QueryFileError("`relevant` lists a clause id twice", query_id=query_id)
    for clause_id in relevant:
        clause = corpus.by_id.get(clause_id)
        if clause is None:
            raise QueryFileError(f"relevant clause {clause_id} is not in the corpus", query_id=query_id)
        if clause.form != form:
            raise QueryFileError(f"relevant clause {clause_id} is outside the query's form {form}", query_id=query_id)
    return LabelledQuery(query_id, form, kind, text, frozenset(relevant))


def _scores(queries: Sequence[LabelledQuery], recalls: Mapping[str, float], ranks: Mapping[str, float]) -> Scores:
    if not queries:
        return Scores(0, math.nan, math.nan)
    count = len(queries)
    return Scores(
        count,
        math.fsum(recalls[query.id] for query in queries) / count,
        math.fsum(ranks[query.id] for query in queries) / count,
    )
