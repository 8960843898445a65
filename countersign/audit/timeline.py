"""A trace event in words a person can read: who handed what to whom. Pure: no I/O.

The command line's timeline (countersign/bootstrap/timeline.py) and the Close Board's close page both describe events
here, so
the two doors never word the same event differently.
"""

from __future__ import annotations

from countersign.audit.trace import TraceEvent
from countersign.states import TraceKind

# Events a door records about a request: what the door saw and says, never a person's own act (migration 0015).
DOOR_EVENTS = frozenset({TraceKind.TRACE_EXPORTED, TraceKind.DECISION_REFUSED, TraceKind.COMMAND_REFUSED})
_WRITERS = {"countersign_callbacks": "the callbacks door", "countersign_engine": "the engine"}
# How a decision arrived, and so what proves it (audit imports nothing of ours, so the words live here).
CHANNEL_WORDS = {
    "board": "on the Close Board, signed with a passkey",
    "signed_callback": "over the signed callback, signed with Ed25519",
    "slack": "in Slack (platform identity)",
    "teams": "in Teams (platform identity)",
}
# Why an attempt does not ask the model (`model_off` on task_requeued and task_started, docs/adr/0036): the
# escalation a person approved, in the words countersign.policy.wording gives it (audit imports nothing of ours; a test
# holds the
# two tables equal for every reason in countersign.specialists.narration.MODEL_OFF_REASONS). Another code is shown as
# it is.
MODEL_OFF_WORDS = {
    "no_recorded_response": "the model was asked something nobody recorded an answer for",
    "budget_exhausted": "the agent ran out of its step, time or token budget",
}


def door_of(event: TraceEvent) -> str:
    """Who asserts a door event: the role that wrote it (the owner's connection is the command line)."""
    return _WRITERS.get(event.writer or "", "the command line")


def target_of(event: TraceEvent) -> str:
    """Whom the event hands something to (`payload.to`), or "" when it hands nothing on."""
    return str(event.payload.get("to", ""))


def describe(event: TraceEvent) -> str:
    """One line saying what the event records."""
    p = event.payload
    kind = event.kind
    if kind in DOOR_EVENTS:
        return f"{door_of(event)} reports {_door_claim(event)}"
    if kind == TraceKind.DISPATCHED:
        return f"{p.get('task')} (attempt {p.get('attempt')})"
    if kind == TraceKind.SPECIALIST_RESULT:
        s = p.get("summary", {})
        if s.get("halted"):
            return f"{p.get('task')}: halted — {s.get('halt_reason')}"
        return f"{p.get('task')}: result"
    if kind == TraceKind.TASK_HALTED:
        return f"{p.get('task')}: {p.get('reason')}"
    if kind == TraceKind.GATE_OPENED:
        return f"{p.get('task')} {p.get('gate_kind')} gate, tier {p.get('tier')}, quorum {p.get('quorum')}"
    if kind == TraceKind.GATE_DECIDED:
        channel = CHANNEL_WORDS.get(str(p.get("channel")), str(p.get("channel")))
        return f"{p.get('decision')} {p.get('task')} ({p.get('approvals')}/{p.get('quorum')}) {channel}"
    if kind == TraceKind.JOURNAL_POSTED:
        return f"journal {p.get('journal_id')}: {p.get('memo')}"
    if kind == TraceKind.GATE_PASSED:
        return f"{p.get('task')} {p.get('gate_kind')} gate {p.get('outcome')} ({str(p.get('gate_id'))[:8]})"
    if kind in (TraceKind.TASK_STARTED, TraceKind.TASK_REQUEUED) and p.get("model_off") is not None:
        why = MODEL_OFF_WORDS.get(str(p.get("model_off")), str(p.get("model_off")))
        rerun = "to re-run " if kind == TraceKind.TASK_REQUEUED else ""
        return f"{p.get('task')}, {rerun}without the model (approved escalation: {why})"
    if kind in (TraceKind.TASK_STARTED, TraceKind.TASK_DONE, TraceKind.TASK_REQUEUED):
        return str(p.get("task"))
    if kind == TraceKind.CLOSE_STATUS:
        return f"{p.get('status')}" + (f" — {p.get('reason')}" if p.get("reason") else "")
    if kind == TraceKind.BANK_FEED_LOADED:
        return f"bank feed version {p.get('feed_version')} ({p.get('source')}) loaded by {p.get('loaded_by')}"
    if kind == TraceKind.CLOSE_STARTED:
        return f"{p.get('entity')} {p.get('period')} requested by {p.get('requested_by')}"
    if kind == TraceKind.CERTIFICATE_CERTIFIED:
        claimed = p.get("claimed_amount")
        basis = (
            f" of {p.get('currency')} {claimed} claimed ({p.get('basis')})"
            if claimed not in (None, p.get("amount"))
            else ""
        )
        return f"{p.get('certificate_id')} certified for {p.get('currency')} {p.get('amount')}{basis}"
    if kind == TraceKind.PAY_LESS_NOTICE_SERVED:
        when = "in time" if p.get("served_in_time") else "LATE"
        return (
            f"pay-less notice {p.get('notice_id')} for {p.get('certificate_id')}: pays {p.get('currency')}"
            f" {p.get('sum_to_pay')} of {p.get('notified_sum')}, deadline {p.get('deadline')} ({when})"
        )
    if kind == TraceKind.SIGN_OFF_VOIDED:
        said = p.get("said") or []
        first = said[0] if isinstance(said, list) and said else "Sign-off voided."
        return f"{p.get('task')}: {first} Attempt {p.get('next_attempt')} runs."
    return ", ".join(f"{k}={v}" for k, v in p.items() if isinstance(v, str | int) and k != "to")[:90]


def _door_claim(event: TraceEvent) -> str:
    p = event.payload
    if event.kind == TraceKind.TRACE_EXPORTED:
        return f"{event.actor} exported the trace as {p.get('format')} via {p.get('platform')} ({p.get('bytes')} bytes)"
    if event.kind == TraceKind.DECISION_REFUSED:
        return f"a decision by {p.get('principal')} refused: {p.get('code')}"
    return f"a {p.get('platform')} command by {p.get('user')} refused: {p.get('reason')}"
