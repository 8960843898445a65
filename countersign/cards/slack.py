"""Slack Block Kit messages: `{"text": <notification fallback>, "blocks": [...]}`.

Everything stays inside Slack's limits (slack_sdk.models.blocks): long text is cut with "…", long lists end in
a "+N more" note, and the actions block is never dropped. Every gate card links to its Close Board page; a gate that
needs a person's own key offers "Review and sign" there instead of Approve/Reject. Approve and Reject open a modal
(`decision_modal`) that asks for the reason. Text given to us (rules, reasons,
narratives, names, entities, memos) is made inert by countersign/cards/escape.py: &, < and > escaped, Slack's formatting
characters shown as look-alikes, and every mrkdwn text object sent `verbatim`, so data can mention nobody, forge no
link or formatting, and is never auto-linked. Lengths are counted in UTF-16 code units, which is never less than
Python's character count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from countersign.cards.certificates import slack_certificate_section
from countersign.cards.escape import slack_data, slack_mrkdwn_object, slack_own
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
from countersign.cards.model import REASON_MAX_CHARS, CardDataError, DecisionLine, GateCard, StatusCard, TraceExportCard
from countersign.cards.platform_limits import (
    SLACK_BLOCKS_PER_MESSAGE,
    SLACK_BUTTON_TEXT_CHARS,
    SLACK_BUTTON_VALUE_CHARS,
    SLACK_ELEMENTS_PER_CONTEXT,
    SLACK_FIELD_TEXT_CHARS,
    SLACK_FIELDS_PER_SECTION,
    SLACK_HEADER_TEXT_CHARS,
    SLACK_ID_CHARS,
    SLACK_INPUT_LABEL_CHARS,
    SLACK_PLACEHOLDER_CHARS,
    SLACK_PRIVATE_METADATA_CHARS,
    SLACK_SECTION_TEXT_CHARS,
    SLACK_URL_CHARS,
    SLACK_VIEW_TITLE_CHARS,
)
from countersign.cards.refusals import PERSON_KEY_NOTE, person_key_needed, refusal_wording
from countersign.cards.text import ELLIPSIS, fit, units
from countersign.policy.wording import in_words
from countersign.states import GateKind, GateStatus, TaskState

LINE_MAX = 600

APPROVE_ACTION_ID = "gate_approve"
REJECT_ACTION_ID = "gate_reject"
OPEN_BOARD_ACTION_ID = "gate_open_board"  # a link button: Slack still tells the app it was clicked
REVIEW_ACTION_ID = "gate_review_and_sign"  # a link button, on a gate that needs a person's own key
LINK_ACTION_IDS = (OPEN_BOARD_ACTION_ID, REVIEW_ACTION_ID)
BLOCK_ID_PREFIX = "gate:"
OPEN_BOARD_LABEL = "Open in Close Board"
REVIEW_LABEL = "Review and sign"

DECISION_VIEW_ID = "gate_decision"  # the modal's callback_id
REASON_BLOCK_ID = "reason"
REASON_ACTION_ID = "reason"

Block = dict[str, Any]
Message = dict[str, Any]

_TASK_MARKS = {
    "done": ":white_check_mark:",
    "running": ":arrows_counterclockwise:",
    "pending": ":white_circle:",
    "awaiting_gate": ":hourglass_flowing_sand:",
    "halted": ":octagonal_sign:",
    "rejected": ":x:",
    "failed": ":x:",
}
_GATE_MARKS = {
    "open": ":hourglass_flowing_sand:",
    "approved": ":white_check_mark:",
    "rejected": ":x:",
    "expired": ":alarm_clock:",
    "cancelled": ":heavy_minus_sign:",
    "voided": ":warning:",
}


# --- public messages --------------------------------------------------------------------------------------


def gate_message(card: GateCard, *, locale: str | None = None) -> Message:
    """An open approval gate: what is asked, why, the figures, quorum, due time, and Approve/Reject; amounts written
    in the CLDR `locale` (None: en_GB)."""
    headline = f"Approval needed: {card.task_title}"
    blocks = [
        _header(_overdue_prefix(card) + headline),
        _gate_context(card),
        _section(f"*Why policy requires it*\n{_esc(card.rule)}"),
        _gate_fields(card),
        *slack_certificate_section(card.summary, locale=locale),
        *_evidence_blocks(evidence_for(card.summary, locale=locale)),
        *_decision_blocks(card.decisions),
        *_person_key_note(card),
    ]
    return _message(_fallback(card, headline), blocks, _actions(card, "Approve"))


def halt_message(card: GateCard, *, locale: str | None = None) -> Message:
    """An escalation gate: what halted and why, the evidence, and Approve re-run/Reject."""
    reason = halt_reason(card.summary) or "The task halted and needs a person to investigate."
    headline = f"Halted: {card.task_title}"
    blocks = [
        _header(_overdue_prefix(card) + headline),
        _gate_context(card),
        _section(f"*What halted*\n{_esc(reason)}"),
        _section(f"*Why a person must look*\n{_esc(card.rule)}"),
        _gate_fields(card),
        *slack_certificate_section(card.summary, locale=locale),
        *_evidence_blocks(evidence_for(card.summary, locale=locale)),
        *_decision_blocks(card.decisions),
        *_person_key_note(card),
    ]
    return _message(_fallback(card, headline, reason), blocks, _actions(card, "Approve re-run"))


def decided_message(card: GateCard, *, locale: str | None = None) -> Message:
    """The same gate after its outcome: no buttons, who decided what and when, and the quorum reached."""
    headline = f"{STATUS_HEADLINES[card.status]}: {card.task_title}"
    fields = [
        Fact("Outcome", STATUS_HEADLINES[card.status]),
        Fact("Quorum", quorum_progress(card)),
        Fact("Tier", card.tier),
        Fact("Was due", utc_time(card.due_at)),
    ]
    reason = halt_reason(card.summary) if card.kind == GateKind.ESCALATION else None
    blocks = [
        _header(headline),
        _gate_context(card),
        *[_section(f"*{_esc(sentence)}*") for sentence in card.voided],
        *([_section(f"*What halted*\n{_esc(reason)}")] if reason else []),
        _section(f"*Why policy required it*\n{_esc(card.rule)}"),
        _fields_section(None, fields),
        *slack_certificate_section(card.summary, locale=locale),
        *_evidence_blocks(evidence_for(card.summary, locale=locale)),
        *(_decision_blocks(card.decisions) or [_section("_No decisions were recorded._")]),
    ]
    links = _link_actions(card, [_link_button(OPEN_BOARD_ACTION_ID, OPEN_BOARD_LABEL, card.page_url)])
    return _message(_fallback(card, headline), blocks, links if card.page_url else None)


def status_message(status: StatusCard) -> Message:
    """A close's tasks and gates, and who each open gate waits on."""
    headline = f"Close {status.entity} {status.period}: {in_words(status.status)}"
    done = sum(1 for t in status.tasks if t.status == TaskState.DONE)
    open_gates = [g for g in status.gates if g.status == GateStatus.OPEN]
    fields = [
        Fact("Tasks done", f"{done} of {len(status.tasks)}"),
        Fact("Open gates", str(len(open_gates))),
        Fact("Overdue gates", str(sum(1 for g in open_gates if g.overdue))),
    ]
    task_lines = [
        f"{_TASK_MARKS.get(t.status, ':grey_question:')} *{_esc(t.display_title)}*: {_own(in_words(t.status))}"
        f" (attempt {t.attempt})" + (f" — {_esc_fit(t.reason, 400)}" if t.reason else "")
        for t in status.tasks
    ]
    gate_lines = [_status_gate_line(g) for g in status.gates]
    blocks = [
        _header(headline),
        _context([f"Close `{_esc(status.close_id)}`"]),
        *([_section(f"*Why*\n{_esc(status.status_reason)}")] if status.status_reason else []),
        _fields_section(None, fields),
        _section(_bullets("*Tasks*", task_lines, escaped=True)),
        _section(_bullets("*Gates*", gate_lines, escaped=True) if gate_lines else "*Gates*\n_No gates opened._"),
    ]
    waiting = ", ".join(f"{g.task_title} ({g.approvals_missing} × {g.approver_role})" for g in open_gates)
    fallback = headline + (f"; waiting on {waiting}" if waiting else "")
    return _message(fallback, blocks, None)


def trace_export_message(card: TraceExportCard) -> Message:
    headline = f"Trace exported: {card.entity} {card.period}"
    fields = [
        Fact("Format", card.format.upper()),
        Fact("Events", str(card.events)),
        Fact("Sequence", f"{card.first_seq}–{card.last_seq}" if card.events else "none"),
        Fact("File", f"`{_esc(card.filename)}`"),
    ]
    blocks = [
        _header(headline),
        _context([f"Close `{_esc(card.close_id)}`"]),
        _fields_section(None, fields, escaped=True),
        _section(f"*Head hash*\n`{_esc(card.head_hash_hex)}`" if card.head_hash_hex else "*Head hash*\n_none_"),
    ]
    fallback = (
        f"Trace export {card.filename}: {card.events} events (seq {card.first_seq}–{card.last_seq}), "
        f"head {card.head_hash_hex[:16]}…"
    )
    return _message(fallback, blocks, None)


def refusal_text(reason_code: str, detail: str) -> str:
    """Ephemeral text for a refused decision; `detail` is the server's message, escaped."""
    text = refusal_wording(reason_code)
    if detail and detail != reason_code:
        text += f"\n_{_esc(detail)}_"
    return _fit(text, SLACK_SECTION_TEXT_CHARS)


def person_key_text(card: GateCard) -> str:
    """Ephemeral text for a one-tap click on a gate that needs the person's own key: where to sign it."""
    return _fit(person_key_needed(_own(card.page_url)), SLACK_SECTION_TEXT_CHARS)


def decision_modal(card: GateCard, decision: str, private_metadata: str) -> Block:
    """The modal Approve or Reject opens: the gate in one line and the reason (required to reject, optional to
    approve). `private_metadata` is the door's (it names the gate and the decision; the door re-checks it)."""
    if decision not in ("approve", "reject"):
        raise CardDataError("decision", f"expected approve or reject, got {decision!r}", "decision modal")
    if _units(private_metadata) > SLACK_PRIVATE_METADATA_CHARS:
        raise CardDataError("private_metadata", f"longer than {SLACK_PRIVATE_METADATA_CHARS}", "decision modal")
    rejecting = decision == "reject"
    verb = "Reject" if rejecting else ("Approve re-run" if card.kind == GateKind.ESCALATION else "Approve")
    about = (
        f"*{_esc(card.task_title)}* · {_esc(card.entity)} {_esc(card.period)}\n"
        f"Tier {_own(card.tier)} · {_own(quorum_progress(card))}"
    )
    warning = (
        "One rejection rejects the gate, whatever the quorum."
        if rejecting
        else "Your approval counts once towards the quorum."
    )
    hint = "Required: the preparer sees it." if rejecting else "Optional: recorded with your approval."
    return {
        "type": "modal",
        "callback_id": DECISION_VIEW_ID,
        "private_metadata": private_metadata,
        "title": _plain(_fit(f"{verb} gate", SLACK_VIEW_TITLE_CHARS)),
        "submit": _plain(_fit(verb, SLACK_VIEW_TITLE_CHARS)),
        "close": _plain("Cancel"),
        "blocks": [
            _section(about),
            _context([_own(warning)]),
            {
                "type": "input",
                "block_id": REASON_BLOCK_ID,
                "optional": not rejecting,
                "label": _plain(_fit("Why you reject it" if rejecting else "Reason", SLACK_INPUT_LABEL_CHARS)),
                "hint": _plain(_fit(hint, SLACK_INPUT_LABEL_CHARS)),
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_ACTION_ID,
                    "multiline": True,
                    "max_length": REASON_MAX_CHARS,
                    "placeholder": _plain(_fit("What you checked, or what is wrong", SLACK_PLACEHOLDER_CHARS)),
                },
            },
        ],
    }


# --- gate pieces ------------------------------------------------------------------------------------------


def _gate_context(card: GateCard) -> Block:
    return _context(
        [
            f"*{_esc(card.entity)}* · {_esc(card.period)}",
            f"{_own(card.kind)} gate `{_esc(card.gate_id)}`",
            f"close `{_esc(card.close_id)}`",
        ]
    )


def _gate_fields(card: GateCard) -> Block:
    due = _slack_time(card.due_at)
    if card.overdue:
        due += " :warning: *Overdue*"
    return _fields_section(
        None,
        [
            Fact("Tier", _own(card.tier)),
            Fact("Approvals", _own(quorum_progress(card))),
            Fact("Due", due),
            Fact("Still needed", str(card.approvals_missing)),
        ],
        escaped=True,
    )


def _overdue_prefix(card: GateCard) -> str:
    return "Overdue — " if card.overdue and card.status == GateStatus.OPEN else ""


def _actions(card: GateCard, approve_label: str) -> Block:
    """Approve, Reject and the board link; on a gate that needs a person's own key, only "Review and sign"."""
    gate_id = card.gate_id
    if _units(gate_id) > SLACK_BUTTON_VALUE_CHARS:
        raise CardDataError("gate_id", f"longer than a Slack button value ({SLACK_BUTTON_VALUE_CHARS})", "GateCard")
    if card.needs_person_key:
        review = {**_link_button(REVIEW_ACTION_ID, REVIEW_LABEL, card.page_url), "style": "primary"}
        return _link_actions(card, [review])
    elements = [
        _button(APPROVE_ACTION_ID, approve_label, gate_id, "primary"),
        _button(REJECT_ACTION_ID, "Reject", gate_id, "danger"),
    ]
    if card.page_url:
        elements.append(_link_button(OPEN_BOARD_ACTION_ID, OPEN_BOARD_LABEL, card.page_url))
    return _link_actions(card, elements)


def _link_actions(card: GateCard, elements: list[Block]) -> Block:
    block_id = BLOCK_ID_PREFIX + card.gate_id
    if _units(block_id) > SLACK_ID_CHARS:
        raise CardDataError("gate_id", f"too long to round-trip in a Slack block_id ({SLACK_ID_CHARS} max)", "GateCard")
    return {"type": "actions", "block_id": block_id, "elements": elements}


def _link_button(action_id: str, label: str, url: str) -> Block:
    if _units(url) > SLACK_URL_CHARS:
        raise CardDataError("page_url", f"longer than Slack's {SLACK_URL_CHARS} for a button url", "GateCard")
    return {"type": "button", "action_id": action_id, "text": _plain(_fit(label, SLACK_BUTTON_TEXT_CHARS)), "url": url}


def _person_key_note(card: GateCard) -> list[Block]:
    return [_context([f":key: {_own(PERSON_KEY_NOTE)}"])] if card.needs_person_key else []


def _button(action_id: str, label: str, value: str, style: str) -> Block:
    return {
        "type": "button",
        "action_id": action_id,
        "text": _plain(_fit(label, SLACK_BUTTON_TEXT_CHARS)),
        "value": value,
        "style": style,
    }


def _decision_blocks(decisions: Sequence[DecisionLine]) -> list[Block]:
    if not decisions:
        return []
    lines = [
        f"{':white_check_mark:' if d.decision == 'approve' else ':x:'} *{_esc_fit(d.name, 200)}* "
        f"(`{_esc_fit(d.principal, 100)}`) {decision_verb(d.decision)} {_slack_time(d.decided_at)}"
        f" via {_esc_fit(in_words(d.channel), 60)}"
        + (f". {_esc_fit(amended_sums(d), 200)}" if d.certified else "")
        + (f": “{_esc_fit(d.reason, 400)}”" if d.reason else "")
        for d in decisions
    ]
    return [_section(_bullets("*Decisions*", lines, escaped=True))]


def _status_gate_line(gate: GateCard) -> str:
    mark = _GATE_MARKS.get(gate.status, ":grey_question:")
    title = f"*{_esc(gate.task_title)}* {_own(gate.kind)} gate (tier {_own(gate.tier)})"
    if gate.status == GateStatus.OPEN:
        line = f"{mark} {title}: {_own(waiting_on(gate))}, due {_slack_time(gate.due_at)}"
        return line + (" :warning: *Overdue*" if gate.overdue else "")
    return f"{mark} {title}: {_own(in_words(gate.status))} ({_own(quorum_progress(gate))})"


def _evidence_blocks(evidence: Iterable[Evidence]) -> list[Block]:
    blocks: list[Block] = []
    for item in evidence:
        title = f"*{_esc(item.title)}*"
        if item.facts:
            blocks.append(
                _fields_section(title, [Fact(_esc(f.label), _esc(f.value)) for f in item.facts], escaped=True)
            )
        if item.lines:
            heading = "" if item.facts else title
            blocks.append(_section(_bullets(heading, [_esc_fit(line, LINE_MAX) for line in item.lines], True)))
        elif not item.facts:
            blocks.append(_section(f"{title}\n_Nothing to show._"))
        if item.narrative:
            blocks.append(_section(_long_text("*Narrative*\n", item.narrative, SLACK_SECTION_TEXT_CHARS)))
        if item.narrative_note:
            blocks.append(_context([f":warning: {_own(item.narrative_note)}"]))  # our words and flag names
    return blocks


def _fallback(card: GateCard, headline: str, detail: str | None = None) -> str:
    text = f"{_overdue_prefix(card)}{headline} for {card.entity} {card.period} ({quorum_progress(card)})"
    return f"{text}: {detail}" if detail else text


# --- Block Kit primitives ---------------------------------------------------------------------------------


def _message(fallback: str, blocks: list[Block], actions: Block | None) -> Message:
    """Assemble the message, keeping the actions block whatever else has to go to stay under 50 blocks."""
    room = SLACK_BLOCKS_PER_MESSAGE - (1 if actions else 0)
    if len(blocks) > room:
        hidden = len(blocks) - (room - 1)
        blocks = [*blocks[: room - 1], _context([f"_+{hidden} more sections not shown_"])]
    return {"text": _esc_fit(fallback, SLACK_SECTION_TEXT_CHARS), "blocks": [*blocks, *([actions] if actions else [])]}


def _header(text: str) -> Block:
    return {"type": "header", "text": _plain(_fit(text, SLACK_HEADER_TEXT_CHARS))}


def _plain(text: str) -> Block:
    return {"type": "plain_text", "text": text or " ", "emoji": True}


def _section(mrkdwn: str) -> Block:
    return {"type": "section", "text": slack_mrkdwn_object(_fit(mrkdwn or " ", SLACK_SECTION_TEXT_CHARS))}


def _fields_section(title: str | None, facts: Sequence[Fact], escaped: bool = False) -> Block:
    shown = list(facts[:SLACK_FIELDS_PER_SECTION])
    fields = []
    for fact in shown:
        label = fact.label if escaped else _esc(fact.label)
        value = fact.value if escaped else _esc(fact.value)
        fields.append(slack_mrkdwn_object(_fit(f"*{label}*\n{value or '—'}", SLACK_FIELD_TEXT_CHARS)))
    block: Block = {"type": "section", "fields": fields}
    if title:
        block["text"] = slack_mrkdwn_object(_fit(title, SLACK_SECTION_TEXT_CHARS))
    return block


def _context(mrkdwn: Sequence[str]) -> Block:
    elements = [slack_mrkdwn_object(_fit(text, SLACK_FIELD_TEXT_CHARS)) for text in mrkdwn[:SLACK_ELEMENTS_PER_CONTEXT]]
    return {"type": "context", "elements": elements}


def _bullets(heading: str, lines: Sequence[str], escaped: bool) -> str:
    """Heading and bullet lines within a section's limit; lines that do not fit become a "+N more" note."""
    items = list(lines) if escaped else [_esc(line) for line in lines]
    text = heading
    for index, line in enumerate(items):
        candidate = f"{text}\n• {line}" if text else f"• {line}"
        remaining = len(items) - index - 1
        reserve = _units(f"\n_+{len(items)} more_") if remaining else 0
        if _units(candidate) + reserve > SLACK_SECTION_TEXT_CHARS:
            note = f"_+{len(items) - index} more_"
            return f"{text}\n{note}" if text else note
        text = candidate
    return text


def _long_text(heading: str, raw: str, limit: int) -> str:
    """Heading plus escaped text; when cut, ends with "…" and a note of how many characters were left out."""
    escaped = _esc(raw)
    if _units(heading + escaped) <= limit:
        return heading + escaped
    note_room = _units(f"\n_+{len(raw)} more characters_") + 1
    kept = _esc_prefix(raw, limit - _units(heading) - note_room)
    left_out = len(raw) - kept
    return f"{heading}{_esc(raw[:kept])}{ELLIPSIS}\n_+{left_out} more characters_"


def _slack_time(iso: str) -> str:
    """A date token Slack shows in the reader's own time zone, falling back to UTC text."""
    parsed = parse_time(iso)
    if parsed is None:
        return _esc_fit(iso, 100)
    return f"<!date^{int(parsed.timestamp())}^{{date_short_pretty}} at {{time}}|{utc_time(iso)}>"


# --- text -------------------------------------------------------------------------------------------------


def _esc(text: str) -> str:
    """Data: nothing in it can open a mention, a link or formatting (countersign/cards/escape.py)."""
    return slack_data(text)


def _own(text: str) -> str:
    """Our own words and identifiers: &, < and > escaped, underscores kept."""
    return slack_own(text)


def _units(text: str) -> int:
    return units(text)


def _fit(text: str, limit: int) -> str:
    """Cut to `limit` units with "…", never leaving half an entity (&amp; &lt; &gt;) at the cut."""
    cut = fit(text, limit)
    if cut == text:
        return text
    prefix = cut[: -len(ELLIPSIS)]
    amp = prefix.rfind("&")
    if amp != -1 and ";" not in prefix[amp:] and amp >= len(prefix) - 4:
        prefix = prefix[:amp]
    return prefix + ELLIPSIS


def _esc_prefix(raw: str, budget: int) -> int:
    """How many characters of `raw` fit in `budget` units once escaped."""
    used = 0
    for index, char in enumerate(raw):
        used += _units(_esc(char))
        if used > budget:
            return index
    return len(raw)


def _esc_fit(raw: str, limit: int) -> str:
    escaped = _esc(raw)
    if _units(escaped) <= limit:
        return escaped
    return _esc(raw[: _esc_prefix(raw, limit - 1)]) + ELLIPSIS
