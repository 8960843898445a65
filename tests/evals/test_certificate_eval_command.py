"""`countersign eval certificates` through Typer's test runner: generated data, no database, no network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.evals import eval_app
from tests.certificates.generated import generate

SMALL = ("--contracts", "80", "--months", "20")


@pytest.fixture(autouse=True)
def shipped_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERSIGN_CONFIG_DIR", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(eval_app, ["certificates", *args])


def test_the_eval_prints_its_scope_the_confusion_matrix_and_the_detector_and_exits_zero() -> None:
    result = invoke("--seed", "23", *SMALL)
    assert result.exit_code == 0, result.output
    assert "does NOT measure extraction precision on real scans" in result.output
    assert "calibration" in result.output
    for column in ("TP", "FP", "FN", "TN", "prec", "recall"):
        assert column in result.output
    assert "previously_certified_carried_forward" in result.output
    assert "duplicate detector (amount within 5.0%, 45 days, similarity >= 0.70)" in result.output
    assert "certificate eval: GREEN" in result.output


def test_negative_control_with_an_invariant_disabled_exits_one() -> None:
    result = invoke("--seed", "23", *SMALL, "--disable", "retention_released_once")
    assert result.exit_code == 1, result.output
    assert "retention_released_once (disabled)" in result.output
    assert "RED as it should be" in result.output


def test_an_unknown_invariant_exits_two() -> None:
    result = invoke("--disable", "no_such_invariant")
    assert result.exit_code == 2


def test_it_reads_a_data_directory_and_prints_the_sweep(tmp_path: Path) -> None:
    generate(tmp_path, 23, contracts=80, months=20)
    result = invoke("--data", str(tmp_path), "--sweep")
    assert result.exit_code == 0, result.output
    assert "| similarity >= | amount within |" in result.output
    assert result.output.count("\n| 0.") == 28


def test_a_missing_data_directory_exits_two(tmp_path: Path) -> None:
    result = invoke("--data", str(tmp_path / "nowhere"))
    assert result.exit_code == 2
