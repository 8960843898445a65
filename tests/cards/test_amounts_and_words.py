"""Cards show amounts with the close's currency in the caller's locale, and codes in words (issue 21)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from countersign.cards import slack, teams
from countersign.cards.evidence import evidence_for
from countersign.cards.model import StatusCard
from countersign.cards.payments import payments_card, slack_payments_message, teams_payments_card
from tests.cards.fixtures import open_gate_cards
from tests.cards.test_certificate_cards import slack_text, teams_text
from tests.cards.test_payments_card import run_row
from tests.cards.test_payments_card import slack_text as slack_payments_text
from tests.cards.test_payments_card import teams_text as teams_payments_text


def _texts(summary: dict[str, Any], locale: str | None = None) -> str:
    return "\n".join(
        [fact.value for e in evidence_for(summary, locale=locale) for fact in e.facts]
        + [line for e in evidence_for(summary, locale=locale) for line in e.lines]
    )


def test_evidence_amounts_carry_the_summary_currency() -> None:
    summary = {**open_gate_cards()["accruals"].summary, "currency": "GBP"}
    text = _texts(summary)
    assert "GBP 82,213.52" in text and "GBP -82,213.52" in text and "GBP 12,009.51" in text


def test_evidence_amounts_are_written_in_the_locale() -> None:
    summary = {"kind": "subledger", "control_account": "1100", "control_balance": "1640038.33", "currency": "CHF"}
    assert "CHF 1'640'038.33" in _texts(summary, locale="de_CH")
    assert "CHF 1.640.038,33" in _texts(summary, locale="de_DE")


def test_an_escalation_summary_lends_its_currency_to_its_result() -> None:
    inner = {"kind": "subledger", "control_account": "1100", "control_balance": "10.6"}
    assert "JPY 11" in _texts({"reason": "x", "currency": "JPY", "result": inner})  # JPY has no minor unit


def test_a_summary_without_a_currency_shows_the_figure_alone() -> None:
    """Negative control: gates opened before summaries carried a currency read as they did; no code is guessed."""
    text = _texts(open_gate_cards()["accruals"].summary)
    assert "82,213.52" in text and "GBP" not in text


@pytest.mark.parametrize("platform", ["slack", "teams"])
def test_gate_cards_pass_the_locale_to_every_amount(platform: str) -> None:
    card = open_gate_cards()["accruals"]
    card = replace(card, summary={**card.summary, "currency": "GBP"})
    if platform == "slack":
        swiss, plain = slack_text(slack.gate_message(card, locale="de_CH")), slack_text(slack.gate_message(card))
    else:
        swiss, plain = teams_text(teams.gate_message(card, locale="de_CH")), teams_text(teams.gate_message(card))
    assert "GBP 82'213.52" in swiss and "GBP 82,213.52" not in swiss
    assert "GBP 82,213.52" in plain


def _status() -> StatusCard:
    return StatusCard.from_status_json(
        {
            "close_id": "c-1",
            "entity": "ACME-UK",
            "period": "2026-11",
            "status": "awaiting_approval",
            "tasks": [{"task": "accruals", "status": "awaiting_gate", "attempt": 1, "reason": None}],
            "gates": [
                {
                    "gate_id": "g-1",
                    "task": "accruals",
                    "kind": "approval",
                    "tier": "high",
                    "status": "rejected",
                    "quorum": 1,
                    "approvals": 0,
                    "approver_role": "controller",
                    "due_at": "2026-12-01T00:00:00+00:00",
                    "decisions": [
                        {
                            "principal": "p",
                            "decision": "reject",
                            "decided_at": "2026-11-30T10:00:00+00:00",
                            "channel": "signed_callback",
                        }
                    ],
                }
            ],
        }
    )


def test_status_cards_show_statuses_in_words_not_codes() -> None:
    for text in (slack_text(slack.status_message(_status())), teams_text(teams.status_message(_status()))):
        assert "waiting for approval" in text and "awaiting_approval" not in text
        assert "waiting for a person's decision" in text and "awaiting_gate" not in text


def test_decision_lines_name_the_channel_in_words() -> None:
    card = replace(_status().gates[0], summary={})
    for text in (slack_text(slack.decided_message(card)), teams_text(teams.decided_message(card))):
        assert "via a signed callback" in text and "signed_callback" not in text


def test_payment_cards_take_the_locale() -> None:
    card = payments_card([run_row(1, currency="CHF", amount_to_certify="1640038.33")], "2025-06")
    for text in (
        slack_payments_text(slack_payments_message(card, locale="de_CH")),
        teams_payments_text(teams_payments_card(card, locale="de_CH")),
    ):
        assert "CHF 1'640'038.33" in text
