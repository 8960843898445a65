"""A payment gate approved with edits: the decided card shows, in words, the sum certified beside the sum proposed and
the approver's reason, on Slack and on Teams (issue 35)."""

from __future__ import annotations

from dataclasses import replace

from countersign.cards import slack, teams
from countersign.cards.formatting import amended_sums
from countersign.cards.model import DecisionLine
from tests.cards.fixtures import decided_cards
from tests.cards.test_certificate_cards import slack_text, teams_text

REASON = "Measured on site: the groundworks are 75% complete, not 100%"


def _amended_vote(**override: str) -> DecisionLine:
    fields = {"certified": "41250.00", "proposed": "45000.00", "currency": "GBP"} | override
    return DecisionLine(
        "quinn.surveyor", "Quinn Surveyor", "approve", REASON, "2026-11-30T04:11:30+00:00", "board", **fields
    )


def test_a_decided_card_shows_both_sums_and_the_reason_of_an_approval_with_edits() -> None:
    card = replace(next(iter(decided_cards().values())), decisions=(_amended_vote(),))
    for text in (slack_text(slack.decided_message(card)), teams_text(teams.decided_message(card))):
        assert "Certified GBP 41,250.00 (proposed GBP 45,000.00)" in text, text
        assert REASON in text


def test_a_plain_approval_shows_no_amended_sums() -> None:
    plain = _amended_vote(certified="", proposed="", currency="")
    assert amended_sums(plain) == ""
    card = replace(next(iter(decided_cards().values())), decisions=(plain,))
    for text in (slack_text(slack.decided_message(card)), teams_text(teams.decided_message(card))):
        assert "Certified" not in text and "proposed" not in text
