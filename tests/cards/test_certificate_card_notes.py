"""A revaluation the checks accepted and a convention the documents could not show reach the approver, in words, on
both platforms (issue 35)."""

from __future__ import annotations

from typing import Any

from countersign.cards import slack, teams
from countersign.cards.certificates import certificate_summary
from countersign.engine.workflows.certificates.payment import certificate_summary as gate_summary
from tests.cards.checks import assert_adaptive_card_valid, assert_slack_message_valid
from tests.cards.fixtures import open_gate_cards
from tests.cards.test_certificate_cards import full_certificate, payment_gate, slack_text, teams_text

REVALUED = "Variation V-07 revalued from GBP 12,000.00 to GBP 14,500.00 (certified on certificate C2)"
ASKED = (
    "Contract C-0007 has shown one figure so far, in whole pounds: too few to tell whether it is valued in whole "
    "pounds. Is it? Until that is recorded, its figures are checked to the penny."
)


def noted() -> dict[str, Any]:
    return {**full_certificate(), "notes": [REVALUED], "questions": [ASKED]}


def test_the_notes_and_questions_are_read_and_default_to_none() -> None:
    cs = certificate_summary({"certificate": noted()})
    assert cs is not None and cs.notes == (REVALUED,) and cs.questions == (ASKED,)
    plain = certificate_summary({"certificate": full_certificate()})
    assert plain is not None and plain.notes == () and plain.questions == ()


def test_slack_shows_the_revaluation_and_the_question_under_their_headings() -> None:
    message = slack.gate_message(payment_gate(noted(), base=open_gate_cards()["accruals"]))
    assert_slack_message_valid(message)
    text = slack_text(message)
    assert f"*Accepted by the checks*\n• {REVALUED}\n*Please confirm*\n• {ASKED}" in text
    assert "Accepted by the checks" not in slack_text(
        slack.gate_message(payment_gate(base=open_gate_cards()["accruals"]))
    )


def test_teams_shows_the_revaluation_and_the_question_under_their_headings() -> None:
    card = teams.gate_message(payment_gate(noted(), base=open_gate_cards()["accruals"]))
    assert_adaptive_card_valid(card)
    text = teams_text(card)
    assert "Accepted by the checks" in text and REVALUED in text
    assert "Please confirm" in text and ASKED in text


def test_the_payment_gate_summary_carries_the_reconstructions_notes_and_questions_to_the_card() -> None:
    reconstruction = {
        "contract_id": "C-0007",
        "contract_title": "Riverside depot",
        "certificate_no": 5,
        "period": "2026-10",
        "currency": "GBP",
        "violations": [],
        "amount_to_certify": "14500.00",
        "claimed_amount": "14500.00",
        "reconstructed_amount": "14500.00",
        "previously_certified": "12000.00",
        "payment_dates": None,
        "gross_to_date": "26500.00",
        "retention_to_date": "0.00",
        "advance_repaid_to_date": "0.00",
        "notes": [REVALUED],
        "questions": [ASKED],
    }
    summary = gate_summary(reconstruction, {}, {}, {}, None)
    cs = certificate_summary({"certificate": summary})
    assert cs is not None and cs.notes == (REVALUED,) and cs.questions == (ASKED,)
