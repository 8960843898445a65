"""A payment card that proposes the reconstructed sum: the claim beside it, why they differ, the payment dates, and a
warning once the pay-less deadline has passed. Both platforms, validated against their schemas."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from countersign.cards import slack, teams
from countersign.cards.certificates import (
    certificate_summary,
    slack_certificate_blocks,
    teams_certificate_elements,
)
from countersign.cards.model import CardDataError
from tests.cards.checks import assert_adaptive_card_valid, assert_slack_message_valid
from tests.cards.test_certificate_cards import full_certificate, payment_gate, slack_text, teams_text

DEADLINE = dt.date(2026, 12, 11)


def corrected_certificate() -> dict[str, Any]:
    certificate = full_certificate()
    certificate.update(
        {
            "amount_to_certify": "109133.17",
            "claimed_amount": "123456.78",
            "basis": "reconstructed",
            "corrections": [
                {
                    "invariant": "certified_variations_carried_forward",
                    "description": "variation V-7 (GBP -14,323.61) certified on certificate 7 is missing",
                    "amount": "14323.61",
                }
            ],
            "previously_certified_reconstructed": "990000.00",
            "payment_dates": {
                "valuation_date": "2026-11-24",
                "received_on": "2026-11-24",
                "due_date": "2026-12-01",
                "final_date": "2026-12-18",
                "payment_notice_by": "2026-12-06",
                "pay_less_notice_by": DEADLINE.isoformat(),
            },
        }
    )
    return certificate


def _slack(today: dt.date) -> str:
    cs = certificate_summary({"certificate": corrected_certificate()})
    assert cs is not None
    return "\n".join(
        str(b.get("text", {}).get("text", "")) + str(b.get("fields", "")) + str(b.get("elements", ""))
        for b in slack_certificate_blocks(cs, today=today)
    )


def _teams(today: dt.date) -> str:
    cs = certificate_summary({"certificate": corrected_certificate()})
    assert cs is not None
    return teams_text({"body": teams_certificate_elements(cs, today=today)})


def test_the_card_shows_the_claim_the_sum_to_certify_and_each_correction() -> None:
    cs = certificate_summary({"certificate": corrected_certificate()})
    assert cs is not None and cs.corrected
    assert (cs.claimed_amount, cs.amount_to_certify) == (Decimal("123456.78"), Decimal("109133.17"))
    for text in (_slack(dt.date(2026, 12, 2)), _teams(dt.date(2026, 12, 2))):
        assert "GBP 109,133.17 (the reconstructed sum)" in text
        assert "GBP 123,456.78" in text  # the claim
        assert "Why the amount to certify differs from the claim" in text
        assert "GBP -14,323.61" in text
        assert "Previously certified by the documents" in text and "GBP 990,000.00" in text
        assert "a pay-less notice must be given by 2026-12-11" in text
        assert "payment notice by 2026-12-06" in text  # deciding the gate serves it: its deadline comes first
        assert "has passed" not in text


@pytest.mark.parametrize("render", [_slack, _teams])
def test_once_the_pay_less_deadline_passes_the_card_says_the_notified_sum_is_payable(render: Any) -> None:
    assert "has passed" not in render(DEADLINE)
    text = render(DEADLINE + dt.timedelta(days=1))
    assert "The pay-less notice deadline (2026-12-11) has passed: the notified sum GBP 123,456.78 is payable" in text


def test_a_certificate_without_the_new_fields_reads_as_before() -> None:
    cs = certificate_summary({"certificate": full_certificate()})
    assert cs is not None
    assert (cs.claimed_amount, cs.basis, cs.corrections, cs.payment_dates) == (None, None, (), None)
    assert not cs.corrected


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("basis", "guessed"),
        ("claimed_amount", 123.4),
        ("payment_dates", {"due_date": "soon", "final_date": "2026-12-18", "pay_less_notice_by": "2026-12-11"}),
        (
            "payment_dates",
            {
                "due_date": "2026-12-01",
                "final_date": "2026-12-18",
                "pay_less_notice_by": "2026-12-11",
                "payment_notice_by": "sixth",
            },
        ),
        ("corrections", [{"invariant": "Not Snake", "description": "x", "amount": "1.00"}]),
    ],
)
def test_a_malformed_new_field_is_refused_naming_it(field: str, value: Any) -> None:
    certificate = corrected_certificate()
    certificate[field] = value
    with pytest.raises(CardDataError) as refused:
        certificate_summary({"certificate": certificate})
    assert field in str(refused.value)


def test_corrected_gate_cards_stay_valid_on_both_platforms() -> None:
    gate = payment_gate(corrected_certificate())
    message = slack.gate_message(gate)
    assert_slack_message_valid(message)
    assert "the reconstructed sum" in slack_text(message)
    card = teams.gate_message(gate)
    assert_adaptive_card_valid(card)
    assert "the reconstructed sum" in teams_text(card)
