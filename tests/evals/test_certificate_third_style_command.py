"""`countersign eval certificates --style third`: the third style with both of its negative controls."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from countersign.cli.evals import eval_app

THIRD_SMALL = ("--style", "third", "--contracts", "40", "--months", "18", "--seed", "77")


@pytest.fixture(autouse=True)
def shipped_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COUNTERSIGN_CONFIG_DIR", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(eval_app, ["certificates", *args])


def test_the_third_style_is_green_beside_two_controls_that_fail() -> None:
    result = invoke(*THIRD_SMALL)
    assert result.exit_code == 0, result.output
    assert "third style, seed 77" in result.output
    assert "disabled): FAIL as it must" in result.output
    assert "negative control (conventions not read from the documents): FAIL as it must" in result.output
    assert "certificate eval (third style): GREEN every target met" in result.output
    for kind in ("variation_agreed_within_quotation", "invoice_number_on_another_contract", "valued_in_whole_pounds"):
        assert kind in result.output


def test_the_third_style_with_the_revaluation_check_switched_off_exits_one() -> None:
    result = invoke(*THIRD_SMALL, "--disable", "certified_variations_carried_forward")
    assert result.exit_code == 1, result.output
    assert "class variation_revalued_beyond_limit: recall 0.000 < 0.95" in result.output
