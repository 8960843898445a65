"""`countersign eval retrieval` through Typer's test runner: no database, no network, no subprocess."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from cli import evals as eval_cli
from cli.evals import eval_app
from evals.retrieval import LabelledQuery, load_queries, shuffled_labels
from retrieval import load_corpus
from tests.retrieval.corpus_files import REAL_CORPUS, REAL_QUERIES


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


def test_retrieval_exits_zero_with_a_green_eval_and_a_red_negative_control() -> None:
    result = invoke()

    assert result.exit_code == 0, result.output
    assert "retrieval eval: GREEN" in result.output
    assert "negative control (labels shuffled within each form, seed 7): RED as it should be" in result.output
    lines = result.output.splitlines()
    assert "  arm     recall@5  MRR@10   paraphrase r@5  MRR@10        exact r@5  MRR@10" in lines
    assert sum(line.startswith("  fused ") for line in lines) == 2  # the eval's row and the control's
    assert sum(line.startswith("  chance ") for line in lines) == 2


def test_retrieval_exits_one_when_the_labels_are_wrong(tmp_path: Path) -> None:
    corpus = load_corpus(REAL_CORPUS)
    wrong = shuffled_labels(load_queries(REAL_QUERIES, corpus), seed=11)

    result = invoke("--queries", str(write_queries(tmp_path / "wrong.yaml", wrong)))

    assert result.exit_code == 1, result.output
    assert "retrieval eval: RED" in result.output
    assert "is below the floor" in result.output


def test_retrieval_exits_one_when_the_negative_control_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        eval_cli, "shuffled_labels", lambda queries, seed: tuple(queries)
    )  # a control that is no control

    result = invoke()

    assert result.exit_code == 1, result.output
    assert "it passed every threshold; it should have failed" in result.output


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
