"""The payment-runs status card: strict reading, one line per certificate, escaping and caps on both platforms."""

from __future__ import annotations

import json
from typing import Any

import pytest

from countersign.cards.model import CardDataError
from countersign.cards.payments import (
    SLACK_RUNS_SHOWN_MAX,
    payments_card,
    slack_payments_message,
    teams_payments_card,
)
from tests.cards.checks import assert_adaptive_card_valid, assert_slack_message_valid, walk

HOSTILE = "<!channel> *pay* <https://evil.example|click> & @here\n• certified"
SHORT = "<!here> & <#C1>"  # inside the reference cap, so it is escaped whole, not cut


def run_row(n: int, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "certificate_id": f"IPC-{n:012X}",
        "contract_id": f"CT-{n % 12 + 1:04d}",
        "number": 6,
        "period": "2025-06",
        "currency": "GBP",
        "amount_to_certify": f"{1000 + n}.50",
        "stage": "payment",
        "gate": {"tier": "high", "status": "open"},
        "escalation": None,
        "certified": False,
        "close_id": f"00000000-0000-0000-0000-{n:012d}",
    }
    row.update(changes)
    return row


def month() -> list[dict[str, Any]]:
    return [
        run_row(1, gate={"tier": "medium", "status": "approved"}, stage="done", certified=True),
        run_row(2, gate={"tier": "high", "status": "rejected"}, stage="payment"),
        run_row(3, escalation="suspected_injection"),
        run_row(4, amount_to_certify=None, gate=None, stage="extraction"),
    ]


def slack_text(message: dict[str, Any]) -> str:
    return "\n".join(str(o["text"]) for o in walk(message["blocks"]) if isinstance(o.get("text"), str))


def teams_text(card: dict[str, Any]) -> str:
    return "\n".join(str(o["text"]) for o in walk(card["body"]) if isinstance(o.get("text"), str))


def test_each_certificate_gets_one_line_with_every_column_on_both_platforms() -> None:
    card = payments_card(month(), "2025-06")
    slack = slack_payments_message(card)
    teams = teams_payments_card(card)
    assert_slack_message_valid(slack)
    assert_adaptive_card_valid(teams)
    slack_lines = [line for line in slack_text(slack).splitlines() if "IPC-" in line]
    teams_lines = [
        "".join(str(run["text"]) for run in o["inlines"])
        for o in walk(teams["body"])
        if o.get("type") == "RichTextBlock"
    ]
    assert len(slack_lines) == len(teams_lines) == 4
    for lines in (slack_lines, teams_lines):
        assert "IPC-000000000001" in lines[0] and "CT-0002" in lines[0] and "GBP 1,001.50" in lines[0]
        assert "stage done" in lines[0] and "gate medium: approved" in lines[0] and "not certified" not in lines[0]
        assert "gate high: rejected" in lines[1] and "not certified" in lines[1]
        assert "escalated: suspected manipulation of the books or the agents" in lines[2]
        assert "amount not yet computed" in lines[3] and "no gate yet" in lines[3]
    assert "Payment runs 2025-06" in slack["text"]


def test_data_text_is_escaped_in_slack_and_only_in_text_runs_in_teams() -> None:
    rows = [run_row(1, certificate_id=HOSTILE, contract_id=HOSTILE, stage=HOSTILE), run_row(2, contract_id=SHORT)]
    card = payments_card(rows, "2025-06")
    slack = slack_payments_message(card)
    assert_slack_message_valid(slack)  # no raw < > and no bare & in any mrkdwn
    assert "<!channel>" not in json.dumps(slack)
    assert all(o.get("verbatim") is True for o in walk(slack["blocks"]) if o.get("type") == "mrkdwn")
    line = next(line for line in slack_text(slack).splitlines() if "pay" in line)
    assert "\n" not in line and "&lt;!channel&gt;" in line
    assert "&lt;!here&gt; &amp; &lt;#C1&gt;" in slack_text(slack)
    teams = teams_payments_card(card)
    assert_adaptive_card_valid(teams)
    text_blocks = [o["text"] for o in walk(teams["body"]) if o.get("type") == "TextBlock"]
    assert not any("evil.example" in text for text in text_blocks)
    assert any("evil.example" in o["text"] for o in walk(teams["body"]) if o.get("type") == "TextRun")


def test_a_long_month_is_capped_and_says_how_many_more() -> None:
    rows = [run_row(n, certificate_id=f"IPC-{n:06d}-" + "X" * 60, contract_id="C" * 80) for n in range(500)]
    card = payments_card(rows, "2025-06")
    slack = slack_payments_message(card)
    teams = teams_payments_card(card)
    assert_slack_message_valid(slack)
    assert_adaptive_card_valid(teams)
    shown_slack = sum(1 for line in slack_text(slack).splitlines() if "IPC-" in line)
    assert shown_slack == SLACK_RUNS_SHOWN_MAX
    assert f"and {500 - shown_slack} more certificates" in slack_text(slack)
    shown_teams = sum(1 for o in walk(teams["body"]) if o.get("type") == "RichTextBlock")
    assert 0 < shown_teams < 500
    assert f"and {500 - shown_teams} more certificates" in teams_text(teams)


def test_no_runs_says_so() -> None:
    card = payments_card([], None)
    assert "No payment runs started" in slack_text(slack_payments_message(card))
    assert "No payment runs started" in teams_text(teams_payments_card(card))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"amount_to_certify": 1001.5}, "runs[1].amount_to_certify"),
        ({"amount_to_certify": "1001.505"}, "runs[1].amount_to_certify"),
        ({"certified": "yes"}, "runs[1].certified"),
        ({"certificate_id": ""}, "runs[1].certificate_id"),
        ({"escalation": "Suspected Injection"}, "runs[1].escalation"),
        ({"currency": "gbp"}, "runs[1].currency"),
        ({"gate": {"tier": "high"}}, "runs[1].gate"),
        ({"gate": {"tier": "high", "status": "pending"}}, "runs[1].gate.status"),
        ({"final_date": "18 December"}, "runs[1].final_date"),
        ({"postponed_final_date": "2026-02-30"}, "runs[1].postponed_final_date"),
    ],
)
def test_a_malformed_row_names_its_field_and_renders_nothing(changes: dict[str, Any], field: str) -> None:
    rows = [run_row(0), run_row(1, **changes)]
    with pytest.raises(CardDataError) as caught:
        payments_card(rows, "2025-06")
    assert caught.value.field == field


def test_a_missing_column_names_its_field() -> None:
    row = run_row(0)
    del row["stage"]
    with pytest.raises(CardDataError) as caught:
        payments_card([row], None)
    assert caught.value.field == "runs[0].stage"
