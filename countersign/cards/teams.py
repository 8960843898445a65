"""Teams Adaptive Cards 1.5 (the highest version Teams renders) for the same five messages as
countersign/cards/slack.py.

Decisions use Universal Actions: `Action.Execute` with verb `gate.approve`/`gate.reject` and
`data: {"gate_id", "decision"}`, each with an `Action.Submit` fallback carrying the same data for clients
without Universal Actions; the card's `Input.Text` (id `reason`) adds the person's reason to that data. Every gate card
links to its Close Board page (`Action.OpenUrl`); a gate that needs a person's own key offers "Review and sign" there
instead of Approve/Reject. An open gate card carries `refresh` (verb `refresh`, at most TEAMS_USERS_PER_REFRESH user
ids, which the adapter passes in), so each approver sees their own state (`Viewer`). Text given to us (rules, reasons,
narratives, names, entities, evidence facts and lines) goes only into `TextRun`s (countersign/cards/escape.py), which
Adaptive
Cards never read as markdown: `TextBlock`s and `FactSet`s (both read as markdown) carry only our own words,
identifiers and formatted figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from countersign.cards.certificates import teams_certificate_section
from countersign.cards.escape import teams_data_block, teams_data_run, teams_markdown
from countersign.cards.evidence import Evidence, Fact, evidence_for, halt_reason
from countersign.cards.formatting import (
    STATUS_HEADLINES,
    amended_sums,
    decision_verb,
    parse_time,
    quorum_progress,
    utc_time,
    waiting_on,
)
from countersign.cards.model import (
    APPROVED_BY_VIEWER,
    MAY_DECIDE,
    NOT_ENTITLED,
    PREPARED_BY_VIEWER,
    REASON_MAX_CHARS,
    REJECTED_BY_VIEWER,
    CardDataError,
    DecisionLine,
    GateCard,
    StatusCard,
    TraceExportCard,
    Viewer,
)
from countersign.cards.platform_limits import (
    SLACK_SECTION_TEXT_CHARS,
    TEAMS_CARD_BYTES,
    TEAMS_TEXT_CHARS,
    TEAMS_USERS_PER_REFRESH,
)
from countersign.cards.refusals import PERSON_KEY_NOTE, refusal_wording
from countersign.cards.text import ELLIPSIS, fit
from countersign.policy.wording import in_words
from countersign.states import GateKind, GateStatus, TaskState

SCHEMA_URL = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_VERSION = "1.5"
INVOKE_RESPONSE_TYPE = "application/vnd.microsoft.card.adaptive"
APPROVE_VERB = "gate.approve"
REJECT_VERB = "gate.reject"
REFRESH_VERB = "refresh"
REASON_INPUT_ID = "reason"
OPEN_BOARD_TITLE = "Open in Close Board"
REVIEW_TITLE = "Review and sign"

VIEWER_WORDS = {
    MAY_DECIDE: "Waiting on you.",
    APPROVED_BY_VIEWER: "You approved this gate.",
    REJECTED_BY_VIEWER: "You rejected this gate.",
    PREPARED_BY_VIEWER: "You prepared or requested this work: someone else decides it.",
    NOT_ENTITLED: "This gate is not yours to decide.",
}

# Our caps, which keep every card well under TEAMS_CARD_BYTES (countersign/cards/platform_limits.py).
LINE_MAX = 400
LINES_SHOWN_MAX = 15
GATES_SHOWN_MAX = 20
DECISIONS_SHOWN_MAX = 20
FACTS_SHOWN_MAX = 12
FALLBACK_SHORT_CHARS = 200  # the fallback text of a card whose own heading is too large to keep

Element = dict[str, Any]
Card = dict[str, Any]


# --- public cards -----------------------------------------------------------------------------------------


def gate_message(
    card: GateCard,
    *,
    viewer: Viewer | None = None,
    refresh_user_ids: Sequence[str] = (),
    locale: str | None = None,
) -> Card:
    """An open approval gate; `viewer` is the one person it is rendered for (a refresh), None for the channel;
    amounts written in the CLDR `locale` (None: en_GB)."""
    headline = f"Approval needed: {card.task_title}"
    body = [
        *_gate_heading(card, headline),
        *_viewer_banner(viewer),
        _titled("Why policy requires it", [_verbatim(card.rule, TEAMS_TEXT_CHARS)]),
        _gate_facts(card),
        *_overdue_banner(card),
        *teams_certificate_section(card.summary, locale=locale),
        *_evidence(evidence_for(card.summary, locale=locale)),
        *_decisions(card.decisions),
        *_decision_inputs(card, viewer),
    ]
    actions = _decision_actions(card, "Approve", viewer)
    return _open_card(card, body, actions, _fallback_text(card, headline), refresh_user_ids)


def halt_message(
    card: GateCard,
    *,
    viewer: Viewer | None = None,
    refresh_user_ids: Sequence[str] = (),
    locale: str | None = None,
) -> Card:
    reason = halt_reason(card.summary) or "The task halted and needs a person to investigate."
    headline = f"Halted: {card.task_title}"
    body = [
        *_gate_heading(card, headline),
        *_viewer_banner(viewer),
        _titled("What halted", [_verbatim(reason, TEAMS_TEXT_CHARS)], style="attention"),
        _titled("Why a person must look", [_verbatim(card.rule, TEAMS_TEXT_CHARS)]),
        _gate_facts(card),
        *_overdue_banner(card),
        *teams_certificate_section(card.summary, locale=locale),
        *_evidence(evidence_for(card.summary, locale=locale)),
        *_decisions(card.decisions),
        *_decision_inputs(card, viewer),
    ]
    actions = _decision_actions(card, "Approve re-run", viewer)
    return _open_card(card, body, actions, _fallback_text(card, headline, reason), refresh_user_ids)


def decided_message(card: GateCard, *, locale: str | None = None) -> Card:
    headline = f"{STATUS_HEADLINES[card.status]}: {card.task_title}"
    reason = halt_reason(card.summary) if card.kind == GateKind.ESCALATION else None
    facts = [
        Fact("Outcome", STATUS_HEADLINES[card.status]),
        Fact("Quorum", quorum_progress(card)),
        Fact("Tier", card.tier),
        Fact("Was due", utc_time(card.due_at)),
    ]
    body = [
        *_gate_heading(card, headline),
        *[_verbatim_attention(sentence) for sentence in card.voided],
        *([_titled("What halted", [_verbatim(reason, TEAMS_TEXT_CHARS)])] if reason else []),
        _titled("Why policy required it", [_verbatim(card.rule, TEAMS_TEXT_CHARS)]),
        _fact_set(facts),
        *teams_certificate_section(card.summary, locale=locale),
        *_evidence(evidence_for(card.summary, locale=locale)),
        *(_decisions(card.decisions) or [_text("No decisions were recorded.", isSubtle=True)]),
    ]
    links = [_open_url(OPEN_BOARD_TITLE, card.page_url)] if card.page_url else None
    return _card(body, links, _fallback_text(card, headline))


def status_message(status: StatusCard) -> Card:
    headline = f"Close {status.entity} {status.period}: {in_words(status.status)}"
    done = sum(1 for t in status.tasks if t.status == TaskState.DONE)
    open_gates = [g for g in status.gates if g.status == GateStatus.OPEN]
    body: list[Element] = [
        _data_heading(headline),
        _data_line(f"Close {status.close_id}", isSubtle=True, spacing="none"),
    ]
    if status.status_reason:
        body.append(_titled("Why", [_verbatim(status.status_reason, TEAMS_TEXT_CHARS)], style="attention"))
    body.append(
        _fact_set(
            [
                Fact("Tasks done", f"{done} of {len(status.tasks)}"),
                Fact("Open gates", str(len(open_gates))),
                Fact("Overdue gates", str(sum(1 for g in open_gates if g.overdue))),
            ]
        )
    )
    task_facts = [
        Fact(t.display_title, f"{in_words(t.status)} (attempt {t.attempt})" + (f" — {t.reason}" if t.reason else ""))
        for t in status.tasks
    ]
    body.append(_titled("Tasks", _data_facts(task_facts)))
    gate_items = [_status_gate(g) for g in status.gates[:GATES_SHOWN_MAX]]
    gate_items += _more(len(status.gates) - GATES_SHOWN_MAX, "gates")
    body.append(_titled("Gates", gate_items or [_text("No gates opened.", isSubtle=True)]))
    waiting = ", ".join(f"{g.task_title} ({g.approvals_missing} × {g.approver_role})" for g in open_gates)
    return _card(body, None, headline + (f"; waiting on {waiting}" if waiting else ""))


def trace_export_message(card: TraceExportCard) -> Card:
    headline = f"Trace exported: {card.entity} {card.period}"
    facts = [
        Fact("Format", card.format.upper()),
        Fact("Events", str(card.events)),
        Fact("Sequence", f"{card.first_seq}–{card.last_seq}" if card.events else "none"),
        Fact("Close", card.close_id),
    ]
    body = [
        _data_heading(headline),  # the entity and period may be a document's (a payment run's certificate id)
        _fact_set(facts),
        *_data_facts([Fact("File", card.filename)]),
        _titled("Head hash", [_verbatim(card.head_hash_hex or "none", 200, monospace=True)]),
    ]
    return _card(body, None, f"{headline}: {card.events} events in {card.filename}")


def error_card(title: str, detail: str) -> Card:
    """What the person who clicked sees when a decision is refused (the 403 cases)."""
    body = [
        {
            "type": "TextBlock",
            "text": fit(title, 150),
            "size": "large",
            "weight": "bolder",
            "color": "attention",
            "wrap": True,
            "style": "heading",
        },
        _verbatim(detail, TEAMS_TEXT_CHARS),
    ]
    return _card(body, None, f"{title}: {detail}")


def refusal_card(reason_code: str, detail: str) -> Card:
    text = refusal_wording(reason_code)
    if detail and detail != reason_code:
        text += f"\n{detail}"
    return error_card("Not recorded", text)


def invoke_response(card: Card) -> dict[str, Any]:
    """The body of the HTTP answer to an `adaptiveCard/action` invoke: the card replaces the one clicked."""
    return {"statusCode": 200, "type": INVOKE_RESPONSE_TYPE, "value": card}


# --- gate pieces ------------------------------------------------------------------------------------------


def _gate_heading(card: GateCard, headline: str) -> list[Element]:
    return [
        _data_heading(headline),
        _data_line(f"{card.entity} · {card.period} · {card.kind} gate {card.gate_id}", isSubtle=True, spacing="none"),
    ]


def _gate_facts(card: GateCard) -> Element:
    return _fact_set(
        [
            Fact("Tier", card.tier),
            Fact("Approvals", quorum_progress(card)),
            Fact("Still needed", str(card.approvals_missing)),
            Fact("Due", utc_time(card.due_at) + (" (overdue)" if card.overdue else "")),
        ]
    )


def _overdue_banner(card: GateCard) -> list[Element]:
    if not (card.overdue and card.status == GateStatus.OPEN):
        return []
    return [_text("Overdue: this gate is past its due time.", color="attention", weight="bolder")]


def _decision_actions(card: GateCard, approve_title: str, viewer: Viewer | None) -> list[Element]:
    """Approve and Reject (with the board link), or only a link: "Review and sign" on a gate that needs a person's
    own key, "Open in Close Board" for a viewer the gate does not wait on."""
    if card.needs_person_key:
        return [{**_open_url(REVIEW_TITLE, card.page_url), "style": "positive"}]
    links = [_open_url(OPEN_BOARD_TITLE, card.page_url)] if card.page_url else []
    if viewer is not None and not viewer.may_decide:
        return links
    return [
        _execute(approve_title, APPROVE_VERB, card.gate_id, "approve", "positive"),
        _execute("Reject", REJECT_VERB, card.gate_id, "reject", "destructive"),
        *links,
    ]


def _decision_inputs(card: GateCard, viewer: Viewer | None) -> list[Element]:
    """The reason box, whose value Teams adds to the Approve/Reject data; none where no one-tap decision is offered."""
    if card.needs_person_key:
        return [_text(PERSON_KEY_NOTE, weight="bolder")]
    if viewer is not None and not viewer.may_decide:
        return []
    return [
        {
            "type": "Input.Text",
            "id": REASON_INPUT_ID,
            "label": "Reason (required to reject)",
            "placeholder": "What you checked, or what is wrong",
            "isMultiline": True,
            "maxLength": REASON_MAX_CHARS,
            "spacing": "medium",
        }
    ]


def _viewer_banner(viewer: Viewer | None) -> list[Element]:
    if viewer is None:
        return []
    banner = [_text(VIEWER_WORDS[viewer.state], weight="bolder", color="accent", spacing="small")]
    if viewer.prompt:
        banner.append(_verbatim_attention(viewer.prompt))
    return banner


def _open_card(
    card: GateCard, body: list[Element], actions: list[Element], fallback_text: str, refresh_user_ids: Sequence[str]
) -> Card:
    if len(refresh_user_ids) > TEAMS_USERS_PER_REFRESH:
        too_many = f"at most {TEAMS_USERS_PER_REFRESH}, got {len(refresh_user_ids)}"
        raise CardDataError("refresh_user_ids", too_many, "Teams card")
    refresh = {"type": "Action.Execute", "title": "Refresh", "verb": REFRESH_VERB, "data": {"gate_id": card.gate_id}}
    return _card(body, actions, fallback_text, refresh={"action": refresh, "userIds": list(refresh_user_ids)})


def _open_url(title: str, url: str) -> Element:
    return {"type": "Action.OpenUrl", "title": title, "url": url}


def _execute(title: str, verb: str, gate_id: str, decision: str, style: str) -> Element:
    data = {"gate_id": gate_id, "decision": decision}
    return {
        "type": "Action.Execute",
        "title": title,
        "verb": verb,
        "data": data,
        "style": style,
        "fallback": {"type": "Action.Submit", "title": title, "data": dict(data), "style": style},
    }


def _decisions(decisions: Sequence[DecisionLine]) -> list[Element]:
    if not decisions:
        return []
    items = [_verbatim(_decision_line(d), LINE_MAX) for d in decisions[:DECISIONS_SHOWN_MAX]]
    return [_titled("Decisions", items + _more(len(decisions) - DECISIONS_SHOWN_MAX, "decisions"))]


def _decision_line(d: DecisionLine) -> str:
    line = f"{fit(d.name, 120)} ({fit(d.principal, 80)}) {decision_verb(d.decision)} {utc_time(d.decided_at)}"
    line += f" via {fit(in_words(d.channel), 40)}"
    if d.certified:
        line += f". {fit(amended_sums(d), 160)}"
    return line + (f": “{fit(d.reason, 200)}”" if d.reason else "")


def _status_gate(gate: GateCard) -> Element:
    title = f"{gate.task_title} {gate.kind} gate (tier {gate.tier})"
    if gate.status == GateStatus.OPEN:
        detail = f"{waiting_on(gate)}, due {_teams_time(gate.due_at)}" + (" — overdue" if gate.overdue else "")
        color = "attention" if gate.overdue else "warning"
    else:
        detail = f"{in_words(gate.status)} ({quorum_progress(gate)})"
        color = "good" if gate.status == GateStatus.APPROVED else "default"
    return {
        "type": "Container",
        "items": [
            _data_line(title, weight="bolder"),
            _data_line(detail, color=color, spacing="none"),
        ],
    }


def _evidence(evidence: Iterable[Evidence]) -> list[Element]:
    containers = []
    for item in evidence:
        items: list[Element] = []
        if item.facts:
            items += _data_facts(item.facts)
        items += [_verbatim(line, LINE_MAX) for line in item.lines[:LINES_SHOWN_MAX]]
        items += _more(len(item.lines) - LINES_SHOWN_MAX, "more")
        if item.narrative:
            # cut where Slack's narrative section cuts it, so both doors show the same words
            items.append(_verbatim(_cut_note(item.narrative, SLACK_SECTION_TEXT_CHARS), SLACK_SECTION_TEXT_CHARS + 40))
        if item.narrative_note:
            items.append(_verbatim(item.narrative_note, TEAMS_TEXT_CHARS))
        containers.append(_titled(item.title, items or [_text("Nothing to show.", isSubtle=True)]))
    return containers


def _fallback_text(card: GateCard, headline: str, detail: str | None = None) -> str:
    text = f"{headline} for {card.entity} {card.period} ({quorum_progress(card)})"
    return f"{text}: {detail}" if detail else text


# --- Adaptive Card primitives -----------------------------------------------------------------------------


def _card(
    body: list[Element], actions: list[Element] | None, fallback_text: str, *, refresh: Element | None = None
) -> Card:
    """The card, measured whole (its refresh included) against TEAMS_CARD_BYTES."""
    card: Card = {
        "$schema": SCHEMA_URL,
        "type": "AdaptiveCard",
        "version": CARD_VERSION,
        # The schema lets a client read fallbackText as markdown, and it names the entity: every special escaped.
        "fallbackText": fit(teams_markdown(fallback_text), TEAMS_TEXT_CHARS),
        "body": body,
    }
    if actions:
        card["actions"] = actions
    if refresh is not None:
        card["refresh"] = refresh
    if _bytes(card) > TEAMS_CARD_BYTES:
        # Unreachable with the caps above for any realistic summary; if it happens, keep the decision path: first
        # the heading and its facts, then, if even those are too large, the notice alone.
        inputs = [element for element in body if str(element.get("type", "")).startswith("Input.")]
        too_large = _text("Some figures are too large for a Teams card; see the close status.")
        card["body"] = [*(e for e in body[:3] if e not in inputs), too_large, *inputs]
        if _bytes(card) > TEAMS_CARD_BYTES:
            card["fallbackText"] = fit(teams_markdown(fallback_text), FALLBACK_SHORT_CHARS)
            card["body"] = [too_large, *inputs]
    return card


def _bytes(card: Card) -> int:
    return len(json.dumps(card, ensure_ascii=False).encode("utf-8"))


def _heading(text: str) -> Element:
    return {
        "type": "TextBlock",
        "text": fit(text, 150),
        "size": "large",
        "weight": "bolder",
        "wrap": True,
        "style": "heading",
    }


def _data_heading(text: str) -> Element:
    """A heading that may hold data (a task title, an entity): a large bold TextRun, never markdown."""
    return teams_data_block([teams_data_run(fit(text, 150), size="large", weight="bolder")])


def _data_line(text: str, **options: Any) -> Element:
    """One line that may hold data, as a TextRun; `color`, `weight` and `isSubtle` style the run itself."""
    run_options = {key: options.pop(key) for key in ("color", "weight", "isSubtle") if key in options}
    return teams_data_block([teams_data_run(fit(text, TEAMS_TEXT_CHARS), **run_options)], **options)


def _data_facts(facts: Iterable[Fact]) -> list[Element]:
    """Facts whose labels or values may be data: one RichTextBlock each (bold label, plain value), not a FactSet."""
    shown = list(facts)
    rows = [
        teams_data_block(
            [teams_data_run(fit(f.label, 100) + ": ", weight="bolder"), teams_data_run(fit(f.value or "—", LINE_MAX))],
            spacing="none",
        )
        for f in shown[:FACTS_SHOWN_MAX]
    ]
    return rows + _more(len(shown) - FACTS_SHOWN_MAX, "more")


def _text(text: str, **options: Any) -> Element:
    """Text we wrote ourselves (markdown allowed)."""
    return {"type": "TextBlock", "text": fit(text, TEAMS_TEXT_CHARS), "wrap": True, **options}


def _verbatim_attention(text: str) -> Element:
    """A message for the person (it may carry a link or their own words): a TextRun in the attention colour."""
    return teams_data_block([teams_data_run(fit(text, TEAMS_TEXT_CHARS), color="attention", weight="bolder")])


def _verbatim(text: str, limit: int, monospace: bool = False) -> Element:
    """Text from people or data: a TextRun, which Adaptive Cards never read as markdown."""
    run: Element = {"type": "TextRun", "text": fit(text, limit) or " "}
    if monospace:
        run["fontType"] = "monospace"
    return {"type": "RichTextBlock", "inlines": [run]}


def _titled(title: str, items: list[Element], style: str | None = None) -> Element:
    container: Element = {
        "type": "Container",
        "items": [_text(title, weight="bolder", **({"color": style} if style else {})), *items],
        "spacing": "medium",
    }
    return container


def _fact_set(facts: Iterable[Fact]) -> Element:
    shown = list(facts)
    rows = [{"title": fit(f.label, 100), "value": fit(f.value or "—", LINE_MAX)} for f in shown[:FACTS_SHOWN_MAX]]
    if len(shown) > FACTS_SHOWN_MAX:
        rows.append({"title": "…", "value": f"+{len(shown) - FACTS_SHOWN_MAX} more"})
    return {"type": "FactSet", "facts": rows}


def _more(hidden: int, noun: str) -> list[Element]:
    return [_text(f"+{hidden} {noun}", isSubtle=True, spacing="small")] if hidden > 0 else []


def _cut_note(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    kept = fit(text, limit)
    return f"{kept}\n+{len(text) - (len(kept) - len(ELLIPSIS))} more characters"


def _teams_time(iso: str) -> str:
    """For TextBlocks only: DATE()/TIME() render in the reader's time zone and need strict RFC 3339."""
    parsed = parse_time(iso)
    if parsed is None:
        return fit(iso, 100)
    stamp = parsed.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{{{{DATE({stamp}, SHORT)}}}} {{{{TIME({stamp})}}}}"
