"""`countersign eval certificates` through Typer's test runner: generated data, no database, no network."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.certificates.duplicates import SweepRow
from countersign.cli.eval_certificates import print_sweep
from countersign.cli.evals import eval_app
from countersign.synthetic.construction_profile import load_construction_profile
from countersign.synthetic.construction_second_style import generate_second_style
from tests.certificates.generated import generate

SMALL = ("--style", "first", "--contracts", "80", "--months", "20")
SECOND_SMALL = ("--style", "second", "--contracts", "50", "--months", "18")


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
    assert "duplicate detector (amount within 5.0%, each contract's window, similarity >= 0.70)" in result.output
    assert "negative control (period_work_at_rate_in_force disabled): FAIL as it must" in result.output
    assert "certificate eval (first style): GREEN" in result.output
    assert "second style" not in result.output


def test_negative_control_with_an_invariant_disabled_exits_one() -> None:
    result = invoke("--seed", "23", *SMALL, "--disable", "retention_released_once")
    assert result.exit_code == 1, result.output
    assert "retention_released_once (disabled)" in result.output
    assert "negative control (retention_released_once disabled, first style): FAIL as it must" in result.output


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


def test_the_second_style_reports_duplicate_kinds_tricky_cases_and_its_own_negative_control() -> None:
    result = invoke("--seed", "6151", *SECOND_SMALL)
    assert result.exit_code in (0, 1), result.output
    assert "certificate eval (second style, seed 6151:" in result.output
    for kind in (
        "legal_form_changed",
        "inflated_full_overlap",
        "resubmitted_47_to_59_days_later",
        "same_day_higher_id",
    ):
        assert f"  {kind} " in result.output
    assert "tricky legitimate case" in result.output and "sister_contract_release" in result.output
    assert "variation_dropped" in result.output and "materials_relisted" in result.output
    assert "FAIL as it must" in result.output


def test_an_undefined_score_prints_n_a_never_zero() -> None:
    result = invoke("--seed", "23", *SMALL)
    rows = [line for line in result.output.splitlines() if line.startswith("  variations_have_instructions ")]
    assert len(rows) == 2, result.output  # the confusion row and the crafted row
    confusion = rows[0].split()
    assert confusion[1:3] == ["0", "0"] and confusion[-2:] == ["n/a", "n/a"]


def test_negative_control_on_the_second_style_exits_one() -> None:
    result = invoke("--seed", "6151", *SECOND_SMALL, "--disable", "materials_within_line_allowance")
    assert result.exit_code == 1, result.output
    assert "negative control (materials_within_line_allowance disabled, second style): FAIL as it must" in result.output
    assert "class materials_relisted: recall 0.000 < 0.95" in result.output


def test_a_sweep_row_that_held_nothing_prints_n_a_not_a_perfect_precision(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        SweepRow(Decimal("0.90"), Decimal("0"), held=0, true_positives=0, false_positives=0, false_negatives=4),
        SweepRow(Decimal("0.70"), Decimal("0.05"), held=0, true_positives=0, false_positives=0, false_negatives=0),
    ]
    print_sweep(rows)
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| 0.90 | 0.0% | 0 | 0 | 0 | 4 | n/a | 0.000 |"
    assert lines[3] == "| 0.70 | 5.0% | 0 | 0 | 0 | 0 | n/a | n/a |"


def test_by_default_the_three_styles_run_each_with_its_own_control() -> None:
    result = invoke("--contracts", "30", "--months", "12")
    assert result.exit_code in (0, 1), result.output
    assert "certificate eval (first style, seed 101:" in result.output
    assert "certificate eval (second style, seed 9104:" in result.output
    assert "certificate eval (third style, seed 4242:" in result.output
    assert result.output.count("FAIL as it must") == 4  # one each, and the third style's conventions control


def test_both_still_means_the_first_and_the_second_style() -> None:
    result = invoke("--style", "both", "--contracts", "30", "--months", "12")
    assert "second style, seed 9104" in result.output and "third style" not in result.output


def test_a_second_style_data_directory_is_scored_as_the_second_style(tmp_path: Path) -> None:
    profile = load_construction_profile(PROJECT_ROOT / "config" / "profiles" / "construction-second-style-small.yaml")
    generate_second_style(profile, 6151, tmp_path)
    result = invoke("--data", str(tmp_path))
    assert "certificate eval (second style)" in result.output
    assert "tricky legitimate case" in result.output
