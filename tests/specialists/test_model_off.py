"""Every model-backed specialist obeys `model_off` (docs/adr/0036): after a person approved an escalation that
asking the model again would meet again, the specialist does not ask it and ships its deterministic text, flagged
`<reason>_fallback`; an unknown `model_off` value is refused naming the field.

The provider fails the test if it is called; the texts are compared with each specialist's no-model path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from countersign.engine.workflows.close.reconciliation import BankReconciliation
from countersign.llm import ModelRequest, ModelResponse
from countersign.policy import EscalationReason
from countersign.specialists import adjudication, extraction, reconciliation
from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.narration import MODEL_OFF_FIELD, MODEL_OFF_REASONS, Narrator
from tests.specialists.test_certificate_specialists import ADJUDICATION, EXTRACTION, HOSTILE
from tests.specialists.test_model_backed_specialists import HALTING

PROMPTS = Path(__file__).resolve().parents[2] / "config" / "prompts"
Handler = Callable[[dict[str, Any], Narrator], Awaitable[dict[str, Any]]]


class _Unreachable:
    name = "unreachable"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("the model was asked although the engine said model_off")


SEAT = Narrator(provider=_Unreachable(), model="m", prompts_dir=PROMPTS)


@pytest.mark.parametrize("reason", MODEL_OFF_REASONS)
async def test_the_bank_explanation_is_not_asked_and_the_halt_keeps_its_own_reason(reason: str) -> None:
    result = await reconciliation.handle_with_model({**HALTING, MODEL_OFF_FIELD: reason}, SEAT)
    plain = reconciliation.handle(HALTING)
    assert {key: result[key] for key in plain} == plain
    assert (result["halted"], result["halt_reason"]) == (True, plain["halt_reason"])
    assert (result["explanation_source"], result["explanation_flags"]) == ("fallback", [f"{reason}_fallback"])
    assert result["explanation"] == reconciliation.draft_explanation(
        plain, reconciliation._unmatched_bank_lines(HALTING, plain)
    )
    assert result["model_steps"] == []
    # No `escalation` of the narration's: the engine reads the bank halt as the anomaly it is, as on attempt 1
    # before a missed recording replaced it.
    assert "escalation" not in result
    assert BankReconciliation().halt_reason(result) is EscalationReason.ANOMALY_OVER_TOLERANCE


@pytest.mark.parametrize("reason", MODEL_OFF_REASONS)
async def test_extraction_ships_every_fallback_summary_and_still_flags_the_injection(reason: str) -> None:
    result = await extraction.handle_with_model({**EXTRACTION, MODEL_OFF_FIELD: reason}, SEAT)
    plain = extraction.handle(EXTRACTION)
    assert (result["source"], result["flags"]) == ("fallback", [f"{reason}_fallback"])
    assert result["items"] == plain["items"]
    assert [item["summary"] for item in result["items"]][-1] == HOSTILE[:200]
    assert (result["suspected_injection"], result["injection_fields"]) == (True, ["variation:V03"])
    assert result["model_steps"] == [] and "halted" not in result


@pytest.mark.parametrize("reason", MODEL_OFF_REASONS)
async def test_adjudication_ships_the_deterministic_explanation_and_its_citations(reason: str) -> None:
    result = await adjudication.handle_with_model({**ADJUDICATION, MODEL_OFF_FIELD: reason}, SEAT)
    plain = adjudication.handle(ADJUDICATION)
    assert (result["source"], result["flags"]) == ("fallback", [f"{reason}_fallback"])
    assert (result["explanation"], result["citations"]) == (plain["explanation"], plain["citations"])
    assert result["citation_trace"]["flags"] == [f"{reason}_fallback"]
    assert "halted" not in result


@pytest.mark.parametrize(
    ("handle", "payload"),
    [
        (reconciliation.handle_with_model, HALTING),
        (extraction.handle_with_model, EXTRACTION),
        (adjudication.handle_with_model, ADJUDICATION),
    ],
    ids=["reconciliation", "extraction", "adjudication"],
)
@pytest.mark.parametrize("value", ["model_unavailable", "contradictory_evidence", ""])
async def test_an_unknown_model_off_is_refused_naming_the_field(
    handle: Handler, payload: dict[str, Any], value: str
) -> None:
    with pytest.raises(SpecialistInputError, match=MODEL_OFF_FIELD):
        await handle({**payload, MODEL_OFF_FIELD: value}, SEAT)


async def test_negative_control_without_model_off_the_unreachable_model_is_asked() -> None:
    with pytest.raises(AssertionError, match="the model was asked"):
        await reconciliation.handle_with_model(HALTING, SEAT)
