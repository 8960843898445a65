"""`countersign eval gates` through Typer's test runner: no database, no subprocess."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.cli.evals import eval_app

SHIPPED_CASES = PROJECT_ROOT / "config" / "evals" / "gate_cases.yaml"


@pytest.fixture(autouse=True)
def shipped_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERSIGN_CONFIG_DIR", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(eval_app, ["gates", *args])


def write_cases(tmp_path: Path, cases: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "cases": cases}, sort_keys=False))
    return path


def shipped_cases() -> list[dict[str, Any]]:
    return copy.deepcopy(yaml.safe_load(SHIPPED_CASES.read_text())["cases"])


def test_gates_exits_zero_reporting_a_green_eval_and_a_red_negative_control() -> None:
    result = invoke()
    assert result.exit_code == 0, result.output
    count = len(shipped_cases())
    assert f"gate eval: GREEN {count}/{count} cases passed" in result.output
    assert "negative control (tier medium gate deleted): RED" in result.output
    assert "cases[0] bank_reconciliation" in result.output


@pytest.mark.parametrize("tier", ["high", "critical"])
def test_gates_accepts_another_tier_for_the_negative_control(tier: str) -> None:
    result = invoke("--control-tier", tier)
    assert result.exit_code == 0, result.output
    assert f"negative control (tier {tier} gate deleted): RED" in result.output


def test_gates_exits_one_naming_the_eval_when_expectations_are_wrong(tmp_path: Path) -> None:
    cases = shipped_cases()
    index = next(i for i, case in enumerate(cases) if case["task"] == "close_signoff")
    cases[index]["expect"][0]["approver_role"] = "controller"
    result = invoke("--cases", str(write_cases(tmp_path, cases)))
    assert result.exit_code == 1
    assert "gate eval: RED" in result.output
    assert f"cases[{index}] close_signoff" in result.output
    assert "the eval is wrong" in result.output


def test_gates_exits_one_naming_the_control_when_cases_cannot_see_a_deleted_gate(tmp_path: Path) -> None:
    ungated_only = [case for case in shipped_cases() if not case["expect"]]
    assert ungated_only
    result = invoke("--cases", str(write_cases(tmp_path, ungated_only)))
    assert result.exit_code == 1
    assert "gate eval: GREEN" in result.output
    assert "the negative control is wrong" in result.output


def test_gates_exits_two_naming_the_field_of_a_malformed_case_file(tmp_path: Path) -> None:
    cases = shipped_cases()
    cases[4]["amount"] = 250000.0
    result = invoke("--cases", str(write_cases(tmp_path, cases)))
    assert result.exit_code == 2
    assert "cases[4].amount" in result.output


def test_gates_exits_two_for_a_control_tier_without_a_gate() -> None:
    result = invoke("--control-tier", "low")
    assert result.exit_code == 2
    assert "no gate to delete" in result.output


def test_gates_escapes_rich_markup_in_case_values(tmp_path: Path) -> None:
    cases = shipped_cases()
    cases[0]["task"] = "[bold]payroll[/bold]"
    result = invoke("--cases", str(write_cases(tmp_path, cases)))
    assert result.exit_code == 1
    assert "'[bold]payroll[/bold]' is not in the checklist" in result.output
