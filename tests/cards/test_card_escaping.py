"""Text from documents never reaches a card as live markup, on Slack or Teams (issue 19).

Every field a document can fill (a payment run's entity is the contractor's certificate id; vendor and account names,
memos, descriptions, narratives, clause titles, reasons, names) is filled with a hostile string: a link, `<!channel>`,
`<https://x|click>`, `[x](http://y)`, `**bold**`, a mention, Slack's `*`, `_`, `~` and backtick formatting. Every
hostile string carries the marker `ZQX`, so the test can find where the data went:

- Slack: every mrkdwn text object (and the notification text) that carries data is `verbatim` (no auto-linking),
  holds no raw `<` or `>` outside our own date tokens and no `&` that is not an entity, and no formatting character
  touches the marker (`*ZQX`, `ZQX_`, ...), so no bold, italic, strike or code span can open on data.
- Teams: the marker never appears in a `TextBlock` or a `FactSet` (both read as markdown); it appears in `TextRun`s,
  which Adaptive Cards never read as markdown; `fallbackText` (which a client may read as markdown) has every
  markdown special backslash-escaped. Every card still validates against the Adaptive Card 1.5 schema.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from countersign.cards import slack, teams
from countersign.cards.model import DecisionLine, GateCard, StatusCard, TraceExportCard
from countersign.cards.payments import payments_card, slack_payments_message, teams_payments_card
from tests.cards.checks import assert_adaptive_card_valid, assert_mrkdwn_escaped, assert_slack_message_valid, walk
from tests.cards.fixtures import DEMO_STATUS, escalation_cards, open_gate_cards
from tests.cards.test_certificate_cards import full_certificate, payment_gate
from tests.cards.test_payments_card import run_row

MARK = "ZQX"
PAYLOADS = (
    f"<!channel> {MARK}",
    f"<https://evil.example/{MARK}|click here>",
    f"[{MARK}](http://evil.example/y)",
    f"**{MARK}**",
    f"*{MARK}*",
    f"_{MARK}_",
    f"~{MARK}~",
    f"`{MARK}`",
    f"<@U024BE7LH> {MARK}",
    f"https://{MARK}.example.com/pay",
    f"{MARK}.example.com",
    f"mailto:{MARK}@example.com",
    f"&lt;{MARK}&gt; & <#C024BE7LH>",
    f"> {MARK} quoted\n# {MARK} heading",
)
HOSTILE = st.builds(
    lambda prefix, payload, suffix: f"{prefix}{payload}{suffix}",
    st.sampled_from(["", "C-0007 ", "Riverside *", "pay_"]),
    st.sampled_from(PAYLOADS),
    st.sampled_from(["", " now", "_", "* ok"]),
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_SLACK_MARKUP = re.compile(r"[*_~`<>]")


def slack_texts(message: dict[str, Any]) -> list[str]:
    """The notification text and every mrkdwn text object's text, in order."""
    return [message["text"], *(o["text"] for o in walk(message["blocks"]) if o.get("type") == "mrkdwn")]


def slack_markup_is_dead(message: dict[str, Any], plain: dict[str, Any]) -> None:
    """`message` rendered with hostile data, `plain` the same card with the bare marker: the data added no markup
    character (formatting, < or >) to any text, and every mrkdwn object carrying data is verbatim."""
    assert_slack_message_valid(message)
    for obj in walk(message["blocks"]):
        if obj.get("type") == "mrkdwn" and MARK in obj["text"]:
            assert obj.get("verbatim") is True, obj
    hostile, bare = slack_texts(message), slack_texts(plain)
    assert len(hostile) == len(bare)
    for text, reference in zip(hostile, bare, strict=True):
        assert_mrkdwn_escaped(text)
        assert _SLACK_MARKUP.findall(text) == _SLACK_MARKUP.findall(reference), (text, reference)
        assert "<!channel>" not in text and "<@U" not in text and "<https" not in text


_ESCAPED_PAIR = re.compile(r"\\.", re.DOTALL)


def teams_markup_is_dead(card: dict[str, Any]) -> None:
    assert_adaptive_card_valid(card)
    # fallbackText may be read as markdown: once every backslash pair is taken out, no markdown special is left.
    assert re.search(r"[\\`*_\[\]()<>~#|]", _ESCAPED_PAIR.sub("", card["fallbackText"])) is None, card["fallbackText"]
    shown = False
    for obj in walk(card["body"]):
        if obj.get("type") == "TextBlock":
            assert MARK not in obj["text"], obj
        if obj.get("type") == "FactSet":
            for fact in obj["facts"]:
                assert MARK not in fact["title"] and MARK not in fact["value"], fact
        if obj.get("type") == "TextRun" and MARK in obj["text"]:
            shown = True
    assert shown, "the document text should still be shown, as plain text"


def hostile_gate(card: GateCard, text: str) -> GateCard:
    vote = DecisionLine(f"pr-{text}", text, "approve", text, "2026-11-30T04:11:30+00:00", text)
    return replace(card, entity=text, period=text, rule=text, decisions=(vote,))


def close_gate_cards(text: str) -> list[GateCard]:
    variance = open_gate_cards()["many_flagged_long_narrative"]
    summaries: list[dict[str, Any]] = [
        {
            **variance.summary,
            "narrative": text,
            "flagged": [{**line, "name": text, "account": text} for line in variance.summary["flagged"]],
        },
        {"kind": "subledger", "control_account": text, "control_balance": "1.00", "difference": "0.00"},
        {"journal_lines": [{"account": text, "amount": "10.00", "description": text}], "total": "10.00"},
        {"kind": "signoff", "tasks": [], "journals": [{"journal_id": text, "memo": text, "debits": "1.00"}]},
        {"kind": "bank", "accounts": [{"account": text, "bank_lines": 3, "matched": 1, "gl_lines": 2}]},
        {"kind": "intercompany", "pairs": [{"counterparty": text, "account": text, "within_tolerance": False}]},
        {"vendor": text, "memo": text},
    ]
    cards = [hostile_gate(replace(variance, summary=summary), text) for summary in summaries]
    halt = replace(escalation_cards()["bank_halt"], summary={"reason": text, "result": {}})
    return [*cards, hostile_gate(halt, text)]


def certificate_gate(text: str) -> GateCard:
    certificate = full_certificate()
    certificate.update(contract_id=text, contract_title=text, period=text)
    for v in certificate["violations"]:
        v.update(title=text, explanation=text, lines=[text])
        v["clauses"] = [{"id": text, "title": text}]
    certificate["holds"] = [{"kind": "duplicate", "other": text, "overlap": "1.00"}]
    return hostile_gate(payment_gate(certificate), text)


def check_gate(card: GateCard, plain: GateCard) -> None:
    for render_slack, render_teams in (
        (slack.gate_message, teams.gate_message),
        (slack.halt_message, teams.halt_message),
    ):
        slack_markup_is_dead(render_slack(card), render_slack(plain))
        teams_markup_is_dead(render_teams(card))
    decided, decided_plain = (replace(c, status="approved", approvals=1) for c in (card, plain))
    slack_markup_is_dead(slack.decided_message(decided), slack.decided_message(decided_plain))
    teams_markup_is_dead(teams.decided_message(decided))


@FAST
@given(text=HOSTILE)
def test_document_text_on_a_close_gate_card_is_never_live_markup(text: str) -> None:
    for card, plain in zip(close_gate_cards(text), close_gate_cards(MARK), strict=True):
        check_gate(card, plain)


@FAST
@given(text=HOSTILE)
def test_document_text_on_a_payment_certificate_card_is_never_live_markup(text: str) -> None:
    check_gate(certificate_gate(text), certificate_gate(MARK))


def status_card(text: str) -> StatusCard:
    data = {**DEMO_STATUS, "entity": text, "period": text, "status_reason": text}
    data["tasks"] = [{**t, "reason": text} for t in DEMO_STATUS["tasks"]]
    data["gates"] = [{**g, "rule": text} for g in DEMO_STATUS["gates"]]
    return StatusCard.from_status_json(data)


def payment_rows(text: str) -> list[dict[str, Any]]:
    return [run_row(1, certificate_id=text, contract_id=text, stage=text, gate={"tier": text, "status": "open"})]


@FAST
@given(text=HOSTILE)
def test_document_text_on_the_status_and_payments_cards_is_never_live_markup(text: str) -> None:
    slack_markup_is_dead(slack.status_message(status_card(text)), slack.status_message(status_card(MARK)))
    teams_markup_is_dead(teams.status_message(status_card(text)))
    payments, plain = payments_card(payment_rows(text), None), payments_card(payment_rows(MARK), None)
    slack_markup_is_dead(slack_payments_message(payments), slack_payments_message(plain))
    teams_markup_is_dead(teams_payments_card(payments))


def trace_export(text: str) -> TraceExportCard:
    return TraceExportCard("close-1", text, text, "csv", 3, 1, 3, "ab" * 32, f"countersign-trace-{text}-{text}.csv")


@FAST
@given(text=HOSTILE)
def test_document_text_on_the_trace_export_card_is_never_live_markup(text: str) -> None:
    slack_markup_is_dead(slack.trace_export_message(trace_export(text)), slack.trace_export_message(trace_export(MARK)))
    teams_markup_is_dead(teams.trace_export_message(trace_export(text)))
