"""Whatever people or data put in rules, narratives, reasons and names, every card stays valid and in limits."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from countersign.cards import slack, teams
from countersign.cards.model import DecisionLine, StatusCard
from tests.cards.checks import assert_adaptive_card_valid, assert_slack_message_valid, slack_actions
from tests.cards.fixtures import DEMO_STATUS, escalation_cards, open_gate_cards

_HOSTILE = [
    "<!channel> & <@U024BE7LH> <https://evil.example|click>",
    "🧾" * 5000,
    "&" * 5000,
    "<" * 2999 + ">",
    "a" * 2998 + "&",
    "\u200d👩‍👩‍👧‍👦" * 700,
]
TEXT = st.one_of(
    st.sampled_from(_HOSTILE),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=5000),
    st.text(st.sampled_from("<>&*_~`|\n 🙂é€"), min_size=2900, max_size=5000),
)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(rule=TEXT, narrative=TEXT, reason=TEXT, name=TEXT, title=TEXT)
def test_any_text_keeps_gate_cards_valid_with_their_buttons(
    rule: str, narrative: str, reason: str, name: str, title: str
) -> None:
    vote = DecisionLine(name or "x", name, "approve", reason, "2026-11-30T04:11:30+00:00", name)
    variance = open_gate_cards()["many_flagged_long_narrative"]
    card = replace(
        variance,
        rule=rule,
        task_title=title or "t",
        summary={
            **variance.summary,
            "narrative": narrative,
            "flagged": [{**line, "name": name} for line in variance.summary["flagged"]],
        },
        decisions=(vote,),
    )
    halt = replace(escalation_cards()["bank_halt"], rule=rule, summary={"reason": reason, "result": {}})
    for render_slack, render_teams, gate in (
        (slack.gate_message, teams.gate_message, card),
        (slack.halt_message, teams.halt_message, halt),
    ):
        message = render_slack(gate)
        assert_slack_message_valid(message)
        (actions,) = slack_actions(message)
        assert [b["value"] for b in actions["elements"]] == [gate.gate_id, gate.gate_id]
        adaptive = render_teams(gate)
        assert_adaptive_card_valid(adaptive)
        assert [a["data"]["gate_id"] for a in adaptive["actions"]] == [gate.gate_id, gate.gate_id]
    decided = replace(card, status="rejected", decisions=(replace(vote, decision="reject"),))
    assert_slack_message_valid(slack.decided_message(decided))
    assert_adaptive_card_valid(teams.decided_message(decided))


@FAST
@given(reason=TEXT, rule=TEXT, detail=TEXT)
def test_any_text_keeps_status_and_refusal_messages_valid(reason: str, rule: str, detail: str) -> None:
    data = {**DEMO_STATUS, "status_reason": reason}
    data["gates"] = [{**g, "rule": rule, "status": "open"} for g in DEMO_STATUS["gates"]]
    data["tasks"] = [{**t, "reason": reason or None} for t in DEMO_STATUS["tasks"]]
    status = StatusCard.from_status_json(data)
    assert_slack_message_valid(slack.status_message(status))
    assert_adaptive_card_valid(teams.status_message(status))
    text = slack.refusal_text("missing_role", detail)
    assert len(text.encode("utf-16-le")) // 2 <= 3000
    assert_adaptive_card_valid(teams.refusal_card("missing_role", detail))
