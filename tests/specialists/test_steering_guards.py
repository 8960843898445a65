"""A model that steers the approver or carries a link never reaches a card as the model's (issue 19).

The hostile model answers as issue 19 reproduced: "the controller can press the first button on this card without
waiting. Details: https://…". Every guard over model prose (the narrative, the extraction summaries, the cited
explanation) ships the deterministic text instead, flagged, and the gate card shows that text and the flag.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from countersign.cards import slack, teams
from countersign.cards.model import GateCard
from countersign.engine.workflows.base import card_summary
from countersign.llm import ModelRequest, ModelResponse, ReplayProvider, write_cassette
from countersign.specialists import extraction, variance
from countersign.specialists import narration as guards
from countersign.specialists.narration import SOURCE_FALLBACK, Narrator
from tests.specialists.test_certificate_specialists import (
    ADJUDICATION,
    EXTRACTION,
    call,
    explained,
    record,
    summaries,
)
from tests.specialists.test_certificate_specialists import seat as certificate_seat
from tests.specialists.test_model_backed_specialists import RENT_TEXT, VARIANCE
from tests.specialists.test_narration import FALLBACK, ScriptedProvider, run, said

PROMPTS = Path(__file__).resolve().parents[2] / "config" / "prompts"
STEERING = (
    "Rent ran £13,000.00 over its £53,000.00 budget; the controller can press the first button on this card without "
    "waiting. Details: https://close-notes.example.com/rent"
)

STEERS = [
    ("the controller can press the first button on this card without waiting", "approver_address"),
    ("Rent is above budget; you may decide straight away.", "approver_address"),
    ("Rent is above budget, so whoever decides should tap the first option.", "approver_address"),
]
LINKS = [
    "Rent is above budget. Details: https://close-notes.example.com/rent",
    "Rent is above budget; see www.close-notes.co.uk for the lease.",
    "Rent is above budget; the lease is at lease-terms.io.",
    "Rent is above budget; ask mailto:facilities@example.com.",
    "Rent is above budget; see <https://x.example.com|the lease>.",
    "Rent is above budget; see [the lease](http://x.example.com).",
    "Rent is above budget <!channel>.",
]


@pytest.mark.parametrize(("narrative", "failure"), [*STEERS, *[(text, "link") for text in LINKS]])
async def test_a_narrative_that_steers_the_approver_or_carries_a_link_ships_the_fallback_flagged(
    narrative: str, failure: str
) -> None:
    provider = ScriptedProvider(said(narrative))
    narration = await run(provider)
    assert (narration.text, narration.source) == (FALLBACK, SOURCE_FALLBACK)
    assert narration.flags == (f"{failure}_fallback",)
    assert len(provider.requests) == 1  # no retry: a model that steered once is not asked to phrase it better


def test_an_explanation_that_only_explains_is_not_steering() -> None:
    assert guards.steering_claims(RENT_TEXT) == []
    assert (
        guards.steering_claims("BNK-3 (2026-10-15, -310.40, reference FEE OCT) has no ledger line of the same amount.")
        == []
    )


class HandRecorder:
    """Answers every request with the hostile answer and writes the pair as a cassette, as a recording would."""

    name = "record"

    def __init__(self, answer: str, cassette_dir: Path) -> None:
        self.response = ModelResponse(content=answer, tool_calls=(), tokens_in=600, tokens_out=60, finish_reason="stop")
        self.cassette_dir = cassette_dir

    async def complete(self, request: ModelRequest) -> ModelResponse:
        write_cassette(self.cassette_dir, request, self.response, recorded_by="hand")
        return self.response


def _gate(summary: dict[str, Any]) -> GateCard:
    return GateCard(
        gate_id="gate-steer-1",
        close_id="close-steer-1",
        entity="ACME-UK",
        period="2026-10",
        task="variance",
        task_title="Variance analysis",
        kind="approval",
        tier="medium",
        rule="variance over threshold",
        quorum=1,
        approvals=0,
        approver_role="controller",
        status="open",
        due_at="2026-11-03T17:00:00+00:00",
        overdue=False,
        summary=summary,
    )


async def test_the_gate_card_shows_the_deterministic_narrative_flagged_when_a_recorded_model_steers(
    tmp_path: Path,
) -> None:
    recorder = Narrator(provider=HandRecorder(said(STEERING), tmp_path), model="test-model", prompts_dir=PROMPTS)
    await variance.handle_with_model(VARIANCE, recorder)  # writes the cassette
    replayed = Narrator(provider=ReplayProvider(tmp_path), model="test-model", prompts_dir=PROMPTS)
    result = await variance.handle_with_model(VARIANCE, replayed)
    assert result["narrative"] == variance.handle(VARIANCE)["narrative"]
    assert (result["narrative_source"], result["narrative_flags"]) == ("fallback", ["approver_address_fallback"])

    card = _gate(card_summary(result))
    for rendered in (json.dumps(slack.gate_message(card)), json.dumps(teams.gate_message(card))):
        assert "https://" not in rendered and "close-notes" not in rendered and "first button" not in rendered
        assert "flagged" in rendered  # the card says the narrative is the deterministic one, flagged
        assert "approver_address_fallback" in rendered


async def test_an_extraction_summary_that_steers_the_approver_or_links_ships_that_texts_fallback(
    tmp_path: Path,
) -> None:
    answer = summaries(
        ("description", "Interim valuation 4; the controller can press the first button on this card without waiting."),
        ("variation:V01", "A relocated service entry, details at https://x.example.com/v01"),
        ("variation:V03", "An additional drainage run."),
    )
    await record(EXTRACTION, tmp_path, answer)
    result = await call("extraction", EXTRACTION, certificate_seat(tmp_path))
    fallbacks = [text["text"][: extraction.FALLBACK_CHARS] for text in EXTRACTION["texts"][:2]]
    assert [item["summary"] for item in result["items"][:2]] == fallbacks
    assert result["items"][2]["summary"] == "An additional drainage run."
    assert result["source"] == "fallback"
    assert result["flags"] == ["approver_address_fallback:description", "link_fallback:variation:V01"]
    assert "https://" not in json.dumps(result["items"])


async def test_a_cited_explanation_that_steers_the_approver_ships_the_fallback_flagged(tmp_path: Path) -> None:
    steering = explained(
        "CSB-13.2 caps retention; the approver can press the first button without waiting, see https://x.example.com.",
        ["CSB-13.2"],
    )
    await record(ADJUDICATION, tmp_path, steering)
    result = await call("adjudication", ADJUDICATION, certificate_seat(tmp_path))
    assert result["source"] == "fallback"
    assert "approver_address_fallback" in result["flags"]
    assert "https://" not in result["explanation"]
