from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

from countersign.cards import slack
from countersign.cards.model import CardDataError
from countersign.cards.refusals import REFUSAL_WORDING, UNKNOWN_REFUSAL
from tests.cards.checks import assert_slack_message_valid, slack_actions, walk
from tests.cards.fixtures import (
    BANK_HALT_GATE_ID,
    SLACK_MESSAGES,
    decided_cards,
    escalation_cards,
    open_gate_cards,
    status_cards,
)

REFUSAL_CODES = (
    "unknown_principal",
    "machine_principal",
    "missing_role",
    "preparer",
    "already_voted",
    "already_decided",
    "gate_expired",
    "gate_cancelled",
    "conflict",
)


def _all_text(message: dict[str, Any]) -> str:
    return "\n".join(str(o["text"]) for o in walk(message["blocks"]) if isinstance(o.get("text"), str))


@pytest.mark.parametrize("name", sorted(SLACK_MESSAGES))
def test_every_message_passes_slack_sdk_validation_and_slack_limits(name: str) -> None:
    assert_slack_message_valid(SLACK_MESSAGES[name])


def test_a_header_over_150_characters_fails_slack_sdk_validation() -> None:
    block = {"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}
    parsed = Block.parse(block)
    assert parsed is not None
    with pytest.raises(SlackObjectFormationError, match="150"):
        parsed.validate_json()


@pytest.mark.parametrize(
    ("name", "render"),
    [(f"gate:{n}", slack.gate_message) for n in open_gate_cards()]
    + [(f"halt:{n}", slack.halt_message) for n in escalation_cards()],
)
def test_open_gate_buttons_carry_the_gate_id(name: str, render: Any) -> None:
    kind, key = name.split(":")
    card = (open_gate_cards() if kind == "gate" else escalation_cards())[key]
    message = render(card)
    actions = slack_actions(message)
    assert len(actions) == 1 and message["blocks"][-1] is actions[0]
    block = actions[0]
    assert block["block_id"] == f"gate:{card.gate_id}"
    approve, reject = block["elements"]
    assert (approve["action_id"], approve["style"], approve["value"]) == ("gate_approve", "primary", card.gate_id)
    assert (reject["action_id"], reject["style"], reject["value"]) == ("gate_reject", "danger", card.gate_id)


@pytest.mark.parametrize("name", sorted(decided_cards()))
def test_decided_messages_have_no_buttons(name: str) -> None:
    message = slack.decided_message(decided_cards()[name])
    assert slack_actions(message) == []
    assert not [o for o in walk(message["blocks"]) if o.get("type") == "button"]


def test_decided_message_says_who_decided_what_and_the_quorum() -> None:
    text = _all_text(slack.decided_message(decided_cards()["close_signoff_approval_approved"]))
    assert "Bob Osei (CFO)" in text and "Carol Main (Finance Director)" in text
    assert text.count(" approved <!date^") == 2
    assert "2 of 2 approvals, role cfo" in text


def test_halt_message_names_the_account_and_17_of_17() -> None:
    message = slack.halt_message(escalation_cards()["bank_halt"])
    text = _all_text(message)
    assert "*What halted*\naccount 1000: 17 of 17 bank lines unmatched" in text
    assert "Account 1000: 17 of 17 bank lines unmatched" in text
    assert message["blocks"][-1]["elements"][0]["text"]["text"] == "Approve re-run"
    assert BANK_HALT_GATE_ID in message["blocks"][-1]["block_id"]


def test_quorum_two_with_one_vote_shows_progress_and_the_vote() -> None:
    text = _all_text(slack.gate_message(open_gate_cards()["signoff_quorum_2_one_vote"]))
    assert "1 of 2 approvals, role cfo" in text
    assert "*Still needed*\n1" in text
    assert "*Bob Osei (CFO)* (`bob.osei`) approved" in text


def test_overdue_gate_is_marked_in_header_and_due_field() -> None:
    message = slack.gate_message(open_gate_cards()["overdue"])
    assert message["blocks"][0]["text"]["text"].startswith("Overdue — Approval needed")
    assert ":warning: *Overdue*" in _all_text(message)
    assert message["text"].startswith("Overdue — ")


def test_forty_flagged_lines_and_a_long_narrative_are_cut_with_notes_and_keep_the_buttons() -> None:
    message = slack.gate_message(open_gate_cards()["many_flagged_long_narrative"])
    text = _all_text(message)
    shown = text.count("• 6")
    assert 0 < shown < 40
    assert f"_+{40 - shown} more_" in text
    narrative = next(t for t in (b.get("text", {}).get("text", "") for b in message["blocks"]) if "*Narrative*" in t)
    assert len(narrative) <= 3000 and "…\n_+" in narrative and narrative.endswith(" more characters_")
    assert message["blocks"][-1]["type"] == "actions"


def test_text_from_people_is_mrkdwn_escaped() -> None:
    text = _all_text(slack.decided_message(decided_cards()["accruals_rejected"]))
    assert "October &amp; &lt;posted&gt;" in text
    assert "<posted>" not in text


def test_each_evidence_kind_shows_its_figures() -> None:
    cards = open_gate_cards()
    accruals = _all_text(slack.gate_message(cards["accruals"]))
    assert "*Total accrued*\n82,213.52" in accruals and "6200  12,009.51  GRNI accrual" in accruals
    variance = _all_text(slack.gate_message(cards["variance"]))
    assert "*Flagged lines*\n4" in variance and "*Narrative*\nThe following accounts" in variance
    subledger = _all_text(slack.gate_message(cards["subledger"]))
    assert "*Control balance*\n-154,210.33" in subledger and "*Difference*\n-30.00" in subledger
    intercompany = _all_text(slack.gate_message(cards["intercompany"]))
    assert "ACME-DE on 1300: ours 61,053.53, theirs 61,053.53, difference 0.00 — within tolerance" in intercompany
    signoff = _all_text(slack.gate_message(cards["signoff"]))
    assert "*Tasks done*\n6 of 7" in signoff and "Journal 1: Accrual for goods received" in signoff


def test_status_message_lists_tasks_and_who_open_gates_wait_on() -> None:
    message = slack.status_message(status_cards()["awaiting_7_tasks_6_gates"])
    text = _all_text(message)
    assert text.count("(attempt ") == 7
    assert "waiting on role cfo: 1 more approval needed (1 of 2)" in text
    assert text.count("waiting on role controller: 1 more approval needed (0 of 1)") == 2
    assert ":warning: *Overdue*" in text
    waiting = "Bank reconciliation (1 × controller), Variance analysis (1 × controller), Close sign-off (1 × cfo)"
    assert message["text"].endswith(f"waiting on {waiting}")
    assert slack_actions(message) == []


def test_trace_export_message_summarises_the_file() -> None:
    text = _all_text(SLACK_MESSAGES["trace:json"])
    assert "*Events*\n58" in text and "*Sequence*\n1–58" in text and "*Format*\nJSON" in text
    assert "`countersign-trace-DEMO-42-1-2026-10-37788716.json`" in text
    assert "418800f49626ca0c" * 4 in text


@pytest.mark.parametrize("code", REFUSAL_CODES)
def test_every_refusal_code_has_its_own_human_wording(code: str) -> None:
    text = slack.refusal_text(code, "")
    assert text == REFUSAL_WORDING[code]
    assert not text.startswith(UNKNOWN_REFUSAL) and "_" not in text


def test_refusal_wordings_are_distinct_and_details_are_escaped() -> None:
    assert len({REFUSAL_WORDING[c] for c in REFUSAL_CODES}) == len(REFUSAL_CODES)
    text = slack.refusal_text("preparer", "alice.chen <loaded> the bank feed & requested the close")
    assert text.startswith(REFUSAL_WORDING["preparer"])
    assert "&lt;loaded&gt;" in text and "&amp; requested" in text
    assert "unknown_code" in slack.refusal_text("unknown_code", "")


def test_a_gate_id_too_long_for_a_block_id_is_refused_rather_than_truncated() -> None:
    card = replace(open_gate_cards()["bank"], gate_id="g" * 251)
    with pytest.raises(CardDataError) as excinfo:
        slack.gate_message(card)
    assert excinfo.value.field == "gate_id"
