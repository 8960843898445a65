"""`countersign eval narratives` through Typer's test runner: no database, no network, no subprocess."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.cli.evals import eval_app

SHIPPED_TABLE = PROJECT_ROOT / "config" / "evals" / "narratives" / "scenarios.yaml"
CONTROL_ONLY_CATCHES = ("variance_loops_until_step_bound", "variance_overruns_token_ceiling")


@pytest.fixture(autouse=True)
def shipped_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERSIGN_CONFIG_DIR", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(eval_app, ["narratives", *args])


def shipped_document() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(SHIPPED_TABLE.read_text(encoding="utf-8"))
    return copy.deepcopy(document)


def write_table(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "scenarios.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def test_narratives_exits_zero_with_a_green_eval_and_a_red_negative_control() -> None:
    result = invoke()

    assert result.exit_code == 0, result.output
    count = len(shipped_document()["scenarios"])
    assert f"narrative eval: GREEN {count}/{count} scenarios passed" in result.output
    assert "negative control (guards off): RED as it should be" in result.output
    lines = result.output.splitlines()
    assert "  guard              scenarios planted  caught  moved" in lines
    assert "  grounding                  2       2       2      0" in lines  # the eval's row
    assert "  grounding                  2       2       0      0" in lines  # the control's row
    assert "variance_unqueried_number_twice: grounding not caught" in result.output


def test_narratives_exits_one_naming_the_eval_when_a_planted_violation_is_not_caught(tmp_path: Path) -> None:
    document = shipped_document()
    entry = next(item for item in document["scenarios"] if item["name"] == "variance_good_answer")
    entry["planted"] = [{"guard": "grounding", "flag": "ungrounded_fallback"}]  # it plants nothing of the kind
    path = write_table(tmp_path, document)

    result = invoke("--scenarios", str(path), "--write-cassettes")

    assert result.exit_code == 1
    assert "wrote 19 hand-written cassettes for 12 scenarios" in result.output
    assert "narrative eval: RED 11/12 scenarios passed" in result.output
    assert "scenarios[0] variance_good_answer: grounding not caught" in result.output
    assert "the eval is wrong" in result.output


def test_narratives_exits_one_naming_the_control_when_the_scenarios_pass_without_guards(tmp_path: Path) -> None:
    document = shipped_document()
    document["scenarios"] = [item for item in document["scenarios"] if item["name"] in CONTROL_ONLY_CATCHES]
    path = write_table(tmp_path, document)

    result = invoke("--scenarios", str(path), "--write-cassettes")

    assert result.exit_code == 1
    assert "narrative eval: GREEN 2/2 scenarios passed" in result.output
    assert "negative control (guards off): GREEN all 2 scenarios passed; it should have failed" in result.output
    assert "the negative control is wrong" in result.output


def test_narratives_exits_one_when_the_cassettes_are_missing(tmp_path: Path) -> None:
    path = write_table(tmp_path, shipped_document())  # no --write-cassettes: nothing recorded under tmp_path

    result = invoke("--scenarios", str(path))

    assert result.exit_code == 1
    assert "ended with escalation no_recorded_response, expected model" in result.output


def test_narratives_exits_two_naming_the_field_of_a_malformed_table(tmp_path: Path) -> None:
    document = shipped_document()
    document["scenarios"][1]["ships"] = "perhaps"

    result = invoke("--scenarios", str(write_table(tmp_path, document)))

    assert result.exit_code == 2
    assert "scenarios[1].ships" in result.output
