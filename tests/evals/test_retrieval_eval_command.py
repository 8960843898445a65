"""`countersign eval retrieval` through Typer's test runner: no database, no network, no subprocess."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from countersign.cli import evals as eval_cli
from countersign.cli.evals import eval_app
from countersign.evals.retrieval import LabelledQuery, load_queries, shuffled_labels
from countersign.retrieval import DEFAULT_TUNING, Expansion, Tuning, load_corpus
from tests.retrieval.corpus_files import REAL_CORPUS, REAL_QUERIES, real_retriever


@pytest.fixture(autouse=True)
def shipped_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERSIGN_CONFIG_DIR", raising=False)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(eval_app, ["retrieval", *args])


def write_queries(path: Path, queries: Sequence[LabelledQuery]) -> Path:
    rows = [
        {"id": q.id, "form": q.form, "kind": q.kind, "query": q.query, "relevant": sorted(q.relevant)} for q in queries
    ]
    path.write_text(yaml.safe_dump({"queries": rows}, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def test_retrieval_passes_on_both_query_sets_and_every_negative_control_fails() -> None:
    result = invoke()

    assert result.exit_code == 0, result.output
    assert "retrieval eval, tuning queries: PASS 185 queries" in result.output
    assert "retrieval eval, held-out queries: PASS" in result.output
    for name in ("tuning", "held-out"):
        for control in ("labels shuffled within each form, seed 7", "random clauses of the form, seed 7"):
            assert f"negative control ({name}, {control}): FAIL as it should" in result.output
    lines = result.output.splitlines()
    assert "  arm     recall@5  MRR@10   paraphrase r@5  MRR@10        exact r@5  MRR@10" in lines
    assert sum(line.startswith("  fused ") for line in lines) == 6  # each set's row and its two controls'
    assert sum(line.startswith("  chance ") for line in lines) == 6


def test_retrieval_exits_one_when_the_labels_are_wrong(tmp_path: Path) -> None:
    corpus = load_corpus(REAL_CORPUS)
    wrong = shuffled_labels(load_queries(REAL_QUERIES, corpus), seed=11)

    result = invoke("--queries", str(write_queries(tmp_path / "wrong.yaml", wrong)))

    assert result.exit_code == 1, result.output
    assert "retrieval eval, tuning queries: FAIL" in result.output
    assert "is below the target 0.85" in result.output
    assert "the tuning queries miss the targets" in result.output


def test_retrieval_exits_one_when_the_negative_control_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        eval_cli, "shuffled_labels", lambda queries, seed: tuple(queries)
    )  # a control that is no control

    result = invoke()

    assert result.exit_code == 1, result.output
    assert "negative control (tuning, labels shuffled within each form, seed 7): PASS it met every target" in (
        result.output
    )
    assert "the tuning control (labels shuffled within each form, seed 7) passes" in result.output


def test_retrieval_exits_one_when_the_random_retriever_control_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    class Oracle:  # a "random" retriever that is in fact the real one
        def __init__(self, corpus: object, seed: int) -> None:
            self.inner = real_retriever()
            self.corpus = self.inner.corpus

        def search(self, query: str, k: int = 5, *, form: str | None = None, arm: str = "fused") -> Any:
            return self.inner.search(query, k, form=form, arm=arm)

    monkeypatch.setattr(eval_cli, "RandomRetriever", Oracle)

    result = invoke()

    assert result.exit_code == 1, result.output
    assert "negative control (held-out, random clauses of the form, seed 7): PASS" in result.output


def test_retrieval_sweep_prints_one_row_per_tuning_and_marks_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    grid = [DEFAULT_TUNING, Tuning(rrf_k=60, keep_first=False, expansion=Expansion.NONE, expand_dense=False)]
    monkeypatch.setattr(eval_cli, "sweep_grid", lambda: grid)

    result = invoke("--sweep")

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("retrieval sweep over 2 tunings, fused arm, on ")
    assert lines[2].startswith("  glossary        yes     2  1.00  1.00      yes    0.930") and "<- default" in lines[2]
    assert lines[3].startswith("  none             no    60  1.00  1.00       no    0.714")


def test_retrieval_exits_two_naming_the_query_with_an_unknown_clause(tmp_path: Path) -> None:
    path = tmp_path / "queries.yaml"
    path.write_text(
        yaml.safe_dump(
            {"queries": [{"id": "q9", "form": "CSB", "kind": "exact", "query": "retention", "relevant": ["CSB-99.9"]}]}
        ),
        encoding="utf-8",
    )

    result = invoke("--queries", str(path))

    assert result.exit_code == 2, result.output
    assert "query q9: relevant clause CSB-99.9 is not in the corpus" in result.output


def test_retrieval_exits_two_naming_a_tampered_clause(tmp_path: Path) -> None:
    document = json.loads(REAL_CORPUS.read_text(encoding="utf-8"))
    tampered = document["clauses"][5]
    tampered["text"] += " Or not."
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    result = invoke("--corpus", str(path))

    assert result.exit_code == 2, result.output
    assert f"clause {tampered['id']}: sha256 is" in result.output
