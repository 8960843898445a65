"""Hybrid search over a small corpus: form filtering, over-fetch and fusion, bad input, determinism, offline."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading

import pytest

from countersign.retrieval import DEFAULT_TUNING, MAX_K, MAX_QUERY_CHARS, Retriever, dense
from countersign.retrieval.corpus import ClauseCorpus, parse_corpus
from countersign.retrieval.fusion import reciprocal_rank_fusion
from tests.retrieval.corpus_files import rehash, small_corpus_document

QUERIES = (
    "how much can the employer hold back from each payment",
    "interest on an overdue certified sum",
    "paying for the same work twice",
    "unfixed materials delivered to site",
    "repaying the advance",
)


@pytest.fixture(scope="module")
def corpus() -> ClauseCorpus:
    return parse_corpus(small_corpus_document())


@pytest.fixture(scope="module")
def retriever(corpus: ClauseCorpus) -> Retriever:
    return Retriever.build(corpus)


def test_an_exact_term_query_finds_its_clause_first_in_every_arm(retriever: Retriever) -> None:
    for arm in ("bm25", "dense", "fused"):
        result = retriever.search("interest on late payment of a certified sum", 3, form="CSE", arm=arm)

        assert result.hits[0].clause_id == "CSE-7.6", arm


def test_a_retrieval_carries_the_clause_hashes_and_the_corpus_version(
    retriever: Retriever, corpus: ClauseCorpus
) -> None:
    result = retriever.search("retention limit", 2, form="CSB")

    assert result.corpus_version == corpus.version
    assert (result.query, result.k, result.form, result.arm) == ("retention limit", 2, "CSB", "fused")
    assert result.ids() == frozenset(hit.clause_id for hit in result.hits)
    for hit in result.hits:
        clause = corpus.clause(hit.clause_id)
        assert (hit.title, hit.sha256) == (clause.title, clause.sha256)


@pytest.mark.parametrize("arm", ["bm25", "dense", "fused"])
@pytest.mark.parametrize("form", ["CSB", "CSE"])
def test_a_form_filter_returns_only_that_forms_clauses(retriever: Retriever, arm: str, form: str) -> None:
    for query in QUERIES:
        result = retriever.search(query, 8, form=form, arm=arm)

        assert result.hits, query
        assert all(hit.clause_id.startswith(f"{form}-") for hit in result.hits), (query, result.ids())


def test_without_a_form_filter_both_forms_answer(retriever: Retriever) -> None:
    result = retriever.search("retention limit", 2, arm="dense")

    assert result.ids() == {"CSB-4.2", "CSE-7.2"}


def test_the_fusion_is_weighted_rrf_over_each_arms_top_three_k(retriever: Retriever) -> None:
    tuning = DEFAULT_TUNING
    for query in QUERIES:
        for k in (1, 2, 3):
            fused = retriever.search(query, k, form="CSB")
            lexical = [hit.clause_id for hit in retriever.search(query, 3 * k, form="CSB", arm="bm25").hits]
            dense_ = [hit.clause_id for hit in retriever.search(query, 3 * k, form="CSB", arm="dense").hits]

            expected = reciprocal_rank_fusion(
                [lexical, dense_],
                k=tuning.rrf_k,
                weights=(tuning.lexical_weight, tuning.dense_weight),
                keep_first=tuning.keep_first,
                depth=k,
            )[:k]
            assert [(hit.clause_id, hit.score) for hit in fused.hits] == expected, (query, k)
            for hit in fused.hits:
                assert hit.lexical_rank == (lexical.index(hit.clause_id) + 1 if hit.clause_id in lexical else None)
                assert hit.dense_rank == (dense_.index(hit.clause_id) + 1 if hit.clause_id in dense_ else None)


def test_bm25_keeps_only_clauses_sharing_a_term_and_the_fusion_still_answers(retriever: Retriever) -> None:
    assert retriever.search("zzzz qqqq", 5, arm="bm25").hits == ()

    fused = retriever.search("zzzz qqqq", 5)

    assert len(fused.hits) == 5
    assert all(hit.lexical_rank is None and hit.dense_rank is not None for hit in fused.hits)


def test_an_arm_alone_returns_its_own_top_k_and_scores(retriever: Retriever) -> None:
    result = retriever.search("materials on site", 3, form="CSE", arm="dense")

    assert [hit.dense_rank for hit in result.hits] == [1, 2, 3]
    assert all(hit.lexical_rank is None for hit in result.hits)
    assert [hit.score for hit in result.hits] == sorted((hit.score for hit in result.hits), reverse=True)
    assert -1.0 <= result.hits[-1].score <= result.hits[0].score <= 1.0 + 1e-6


@pytest.mark.parametrize(
    ("query", "k", "form", "arm", "problem"),
    [
        ("", 5, None, "fused", "query is empty"),
        ("   \n\t", 5, None, "fused", "query is empty"),
        ("retention", 0, None, "fused", "k must be an integer from 1 to 100, got 0"),
        ("retention", MAX_K + 1, None, "fused", "k must be an integer from 1 to 100, got 101"),
        ("retention", True, None, "fused", "k must be an integer"),
        ("x" * (MAX_QUERY_CHARS + 1), 5, None, "fused", "query is 2001 characters, more than 2000"),
        ("retention", 5, "CSX", "fused", "unknown form 'CSX'; the corpus has CSB, CSE"),
        ("retention", 5, None, "tfidf", "unknown arm 'tfidf'"),
    ],
)
def test_bad_input_is_a_value_error_naming_what_was_wrong(
    retriever: Retriever, query: str, k: int, form: str | None, arm: str, problem: str
) -> None:
    with pytest.raises(ValueError) as caught:
        retriever.search(query, k, form=form, arm=arm)

    assert problem in str(caught.value)


def test_the_limits_themselves_are_accepted(retriever: Retriever) -> None:
    assert len(retriever.search("retention " * 200, MAX_K).hits) == 16  # every clause, fused
    assert len(retriever.search("r" * MAX_QUERY_CHARS, 1).hits) == 1


def test_search_is_deterministic_across_builds_repeats_and_threads(corpus: ClauseCorpus, retriever: Retriever) -> None:
    expected = {query: retriever.search(query, 6) for query in QUERIES}
    rebuilt = Retriever.build(corpus)
    assert {query: rebuilt.search(query, 6) for query in QUERIES} == expected

    results: list[bool] = []

    def worker() -> None:
        for _ in range(40):
            results.append(all(retriever.search(query, 6) == expected[query] for query in QUERIES))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 160


def test_equal_scores_are_ordered_by_clause_id() -> None:
    document = small_corpus_document()
    for clause in document["clauses"]:
        clause["title"], clause["text"] = "Identical", "Every clause says the same thing."
    corpus = parse_corpus(rehash(document))

    result = Retriever.build(corpus).search("the same thing", 5)

    assert [hit.clause_id for hit in result.hits] == ["CSB-4.1", "CSB-4.2", "CSB-4.3", "CSB-4.4", "CSB-4.5"]


def test_search_works_offline_with_sockets_blocked_and_no_hub_setting(
    corpus: ClauseCorpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network blocked by the test")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(dense, "_model", None)  # force the model to load again, under the block

    result = Retriever.build(corpus).search("retention limit", 3, form="CSE")

    assert result.hits[0].clause_id == "CSE-7.2"
    assert dense._model is not None


def test_importing_retrieval_leaves_the_root_logger_alone() -> None:
    probe = (
        "import logging; import countersign.retrieval, countersign.retrieval.dense; root = logging.getLogger(); "
        "assert root.handlers == [] and root.level == logging.WARNING, (root.handlers, root.level)"
    )

    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)

    assert completed.returncode == 0, completed.stderr


def test_building_and_searching_print_and_log_nothing(
    corpus: ClauseCorpus, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # As a host application configures logging: the root at INFO, a handler that passes whatever reaches it.
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.INFO)
    monkeypatch.setattr(dense, "_model", None)  # the model load is covered too
    root.addHandler(handler)
    try:
        Retriever.build(corpus).search("retention limit", 3)
    finally:
        root.removeHandler(handler)

    assert [f"{record.name}: {record.getMessage()}" for record in records] == []
    assert capfd.readouterr() == ("", "")  # no progress bars either
