"""`countersign trace reproduce`: re-run a close's recorded specialist calls and say where the output differs.

For every completed dispatch of the close (or of one gate's task and attempt), the task's input is rebuilt from the
database by the same handler that built it (`specialist_input`), its SHA-256 compared with the digest the dispatch
recorded, and the specialist asked again, through the same gateway and recorded model responses as the close. The new
result's canonical JSON (sorted keys, the bytes the dispatch's digest rule uses) is compared byte for byte with the
stored result's; the first differing byte is named, with a little of each side. The close's version set (from its
first trace event) is compared with the one this process would record, key by key, so a difference in the code, the
prompts or the recorded responses is named beside the outputs it explains.

Read-only: nothing is written, no event is traced, no dispatch row is touched. A call whose request is built by
asking the specialist first (the paged bank reconciliation, ADR 0041) and the pages themselves are reported as not
re-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from psycopg import AsyncConnection

from countersign.audit.trace import iter_events
from countersign.engine.context import EngineContext
from countersign.engine.dispatch import dispatch_key, input_digest
from countersign.engine.runs import load_close, task_rows
from countersign.engine.task_runner import model_off_reason
from countersign.engine.workflows.base import TaskContext, TaskHandler
from countersign.policy import EscalationReason
from countersign.specialists.narration import MODEL_OFF_FIELD
from countersign.store.dispatch import CompletedDispatch, completed_dispatches
from countersign.store.gates import read_gate

CONTEXT_BYTES = 40  # how much of each side is shown around the first differing byte


class NothingToReproduce(LookupError):
    """The close (or the gate) has no completed specialist call."""


@dataclass(frozen=True)
class ByteDifference:
    offset: int  # the first differing byte of the canonical JSON
    recorded: str  # a little of each side from there (decoded for reading; the offset counts bytes)
    reproduced: str
    recorded_size: int
    reproduced_size: int


@dataclass(frozen=True)
class Reproduction:
    task: str
    attempt: int
    specialist: str
    input_same: bool  # the rebuilt input hashes to the digest the dispatch recorded
    output_same: bool | None  # None when the call was not re-run (a page of a larger request)
    difference: ByteDifference | None = None
    note: str = ""


@dataclass
class ReproductionReport:
    close_id: str
    version_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # key: (recorded, now)
    calls: list[Reproduction] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return all(c.input_same and c.output_same is not False for c in self.calls)


def canonical(value: Any) -> bytes:
    """The bytes compared: sorted keys, no whitespace (the dispatch digest's own serialisation)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def first_difference(recorded: bytes, reproduced: bytes) -> ByteDifference | None:
    """Where two byte strings first differ (None when equal), with CONTEXT_BYTES of each side from there."""
    if recorded == reproduced:
        return None
    offset = next((i for i, (a, b) in enumerate(zip(recorded, reproduced, strict=False)) if a != b), None)
    if offset is None:
        offset = min(len(recorded), len(reproduced))
    start = max(0, offset - CONTEXT_BYTES // 4)

    def around(data: bytes) -> str:
        return data[start : offset + CONTEXT_BYTES].decode("utf-8", "replace")

    return ByteDifference(offset, around(recorded), around(reproduced), len(recorded), len(reproduced))


def version_changes(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Every key this process records whose value differs from the close's (missing on the close: None)."""
    keys = sorted(now)  # what this process would record; the close-specific keys (books, seed, rates) are its own
    return {k: (recorded.get(k), now.get(k)) for k in keys if recorded.get(k) != now.get(k)}


async def reproduce_close(
    conn: AsyncConnection[Any],
    close_id: str,
    ctx: EngineContext,
    *,
    versions_now: Mapping[str, Any],
    gate_id: str | None = None,
) -> ReproductionReport:
    """Re-run the close's completed specialist calls (one gate's task and attempt with `gate_id`); read-only."""
    close = await load_close(conn, close_id)
    workflow = ctx.workflow(close.workflow)
    dispatches = await completed_dispatches(conn, close.close_id)
    if gate_id is not None:
        gate = await read_gate(conn, gate_id)
        if gate is None or gate.close_id != close.close_id:
            raise NothingToReproduce(f"gate {gate_id} is not a gate of close {close.close_id}")
        dispatches = [d for d in dispatches if (d.task, d.attempt) == (gate.task, gate.attempt)]
    if not dispatches:
        raise NothingToReproduce(f"close {close.close_id} has no completed specialist call to re-run")
    report = ReproductionReport(close.close_id)
    async for event in iter_events(conn, close_id=close.close_id):
        report.version_changes = version_changes(event.version_set, versions_now)
        break
    escalations = {task: row.escalation for task, row in (await task_rows(conn, close.close_id)).items()}
    for recorded in dispatches:
        report.calls.append(await _reproduce_one(conn, ctx, workflow, close, recorded, escalations))
    return report


async def _reproduce_one(
    conn: AsyncConnection[Any],
    ctx: EngineContext,
    workflow: Any,
    close: Any,
    recorded: CompletedDispatch,
    escalations: Mapping[str, str | None],
) -> Reproduction:
    task = workflow.task(recorded.task)
    escalation = escalations.get(recorded.task)
    tc = TaskContext(
        close,
        task,
        recorded.attempt,
        ctx.policy,
        ctx.actor,
        EscalationReason(escalation) if escalation else None,
        ctx.locale,
        ctx.channels,
    )
    if recorded.idempotency_key != dispatch_key(close.close_id, recorded.task, recorded.attempt, recorded.input_digest):
        return Reproduction(
            recorded.task, recorded.attempt, recorded.specialist, True, None, note="a page of a larger request"
        )
    handler = ctx.handler(task)
    if type(handler).prepared_input is not TaskHandler.prepared_input:  # built by calling the specialist first
        return Reproduction(
            recorded.task,
            recorded.attempt,
            recorded.specialist,
            True,
            None,
            note="its request is built from pages the specialist answered first: not re-run (LIMITATIONS.md)",
        )
    payload = await handler.specialist_input(conn, tc)
    off = model_off_reason(tc)
    if off is not None:
        payload = {**payload, MODEL_OFF_FIELD: off}
    if input_digest(payload) != recorded.input_digest:
        return Reproduction(
            recorded.task,
            recorded.attempt,
            recorded.specialist,
            False,
            None,
            note="the input no longer rebuilds to the recorded one (the books or an earlier result changed since)",
        )
    result = await ctx.call(recorded.specialist, payload, f"reproduce:{recorded.idempotency_key}")
    difference = first_difference(canonical(recorded.result), canonical(result))
    return Reproduction(recorded.task, recorded.attempt, recorded.specialist, True, difference is None, difference)
