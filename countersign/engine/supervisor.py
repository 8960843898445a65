"""The only writer of `close_task.status`, `close_run.status` and `gate.lifecycle` in the engine.

Each move locks its row, checks the move against `countersign.engine.lifecycle` and the escalation rules, and writes
it. The
database checks the same again (migration 0011), so a move that slipped past Python is refused there too.
A move returns False when the row is not in a state the caller expected (another worker moved it first).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from countersign.engine.lifecycle import IllegalTransition, check_transition
from countersign.policy import APPROVAL, EscalationReason
from countersign.states import GateLifecycle, GateStatus, Machine, RunState, TaskState


@dataclass(frozen=True)
class TaskRow:
    status: str
    attempt: int
    escalation: str | None


@dataclass(frozen=True)
class RunRow:
    status: str
    status_reason: str | None


@dataclass(frozen=True)
class GateRow:
    lifecycle: str


@dataclass(frozen=True)
class AppliedGate:
    found: bool


async def move_task(
    conn: AsyncConnection[Any],
    close_id: str,
    task: str,
    to: TaskState,
    *,
    expect: Collection[TaskState],
    result: Mapping[str, Any] | None = None,
    reason: str | None = None,
    attempt: int | None = None,
    escalation: str | None = None,
) -> bool:
    """Move the task to `to` when it is in one of `expect`; False when it is not (nobody moved it here).

    Stores `result` and `attempt` when given, always `reason`, and sets `escalation` when given (an escalation is
    never cleared). Raises `IllegalTransition` when the task is where the caller expected but the move is illegal.
    """
    to = TaskState(to)
    new_escalation = EscalationReason(escalation) if escalation is not None else None
    async with conn.transaction():
        async with conn.cursor(row_factory=class_row(TaskRow)) as cur:
            await cur.execute(
                "SELECT status, attempt, escalation FROM close_task WHERE close_id = %s AND task = %s FOR UPDATE",
                (close_id, task),
            )
            row = await cur.fetchone()
        if row is None or row.status not in {TaskState(state) for state in expect}:
            return False
        check_transition(Machine.TASK, row.status, to)
        await _check_escalation_rules(
            conn,
            close_id,
            task,
            row,
            to,
            attempt=attempt if attempt is not None else row.attempt,
            escalation=new_escalation or row.escalation,
        )
        await conn.execute(
            "UPDATE close_task SET status = %s, result = COALESCE(%s, result), reason = %s,"
            " attempt = COALESCE(%s, attempt), escalation = COALESCE(%s, escalation), updated_at = now()"
            " WHERE close_id = %s AND task = %s",
            (
                to.value,
                Jsonb(dict(result)) if result is not None else None,
                reason,
                attempt,
                new_escalation.value if new_escalation is not None else None,
                close_id,
                task,
            ),
        )
    return True


async def _check_escalation_rules(
    conn: AsyncConnection[Any],
    close_id: str,
    task: str,
    row: TaskRow,
    to: TaskState,
    *,
    attempt: int,
    escalation: str | None,
) -> None:
    """Escalated work reaches a person and completes only through a human gate, and an attempt counts up by one into a
    re-run (the rules migrations 0011 and 0015 enforce)."""
    source = row.status
    if attempt != row.attempt and not (attempt == row.attempt + 1 and to is TaskState.PENDING and source != to):
        raise IllegalTransition(
            Machine.TASK, source, to, f"an attempt counts up by one, into a re-run (not {row.attempt} -> {attempt})"
        )
    if source == to:
        return
    if to is TaskState.HALTED and escalation is None:
        raise IllegalTransition(Machine.TASK, source, to, "a task halts only with an escalation reason")
    if to is TaskState.DONE and source != TaskState.AWAITING_GATE and escalation is not None:
        raise IllegalTransition(
            Machine.TASK, source, to, f"escalated work ({escalation}) completes only through a human gate"
        )
    if (
        to is TaskState.DONE
        and source == TaskState.AWAITING_GATE
        and not await _gate_applied_with(conn, close_id, task, attempt, kind=APPROVAL, status=GateStatus.APPROVED)
    ):
        raise IllegalTransition(Machine.TASK, source, to, f"no applied, approved approval gate for attempt {attempt}")
    if (
        source == TaskState.HALTED
        and to is TaskState.PENDING
        and not await _escalation_gate_settled(conn, close_id, task, row.attempt)
    ):
        raise IllegalTransition(
            Machine.TASK,
            source,
            to,
            f"escalated work runs again only after the escalation gate of attempt {row.attempt} was approved by a"
            " person or expired undecided",
        )


async def _gate_applied_with(
    conn: AsyncConnection[Any], close_id: str, task: str, attempt: int, *, kind: str, status: str
) -> bool:
    async with conn.cursor(row_factory=class_row(AppliedGate)) as cur:
        await cur.execute(
            "SELECT EXISTS (SELECT 1 FROM gate_state WHERE close_id = %s AND task = %s AND attempt = %s"
            " AND kind = %s AND lifecycle = 'applied' AND status = %s) AS found",
            (close_id, task, attempt, kind, status),
        )
        found = await cur.fetchone()
    return found is not None and found.found


async def _escalation_gate_settled(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> bool:
    async with conn.cursor(row_factory=class_row(AppliedGate)) as cur:
        await cur.execute(
            "SELECT EXISTS (SELECT 1 FROM gate_state WHERE close_id = %s AND task = %s AND attempt = %s"
            " AND kind = 'escalation' AND ((lifecycle = 'applied' AND status = 'approved') OR lifecycle = 'expired'))"
            " AS found",
            (close_id, task, attempt),
        )
        found = await cur.fetchone()
    return found is not None and found.found


async def move_run(conn: AsyncConnection[Any], close_id: str, to: RunState, *, reason: str | None) -> bool:
    """Store the run's status and reason; False when both were already so (or there is no such run)."""
    to = RunState(to)
    async with conn.transaction():
        async with conn.cursor(row_factory=class_row(RunRow)) as cur:
            await cur.execute("SELECT status, status_reason FROM close_run WHERE close_id = %s FOR UPDATE", (close_id,))
            row = await cur.fetchone()
        if row is None or (row.status == to and row.status_reason == reason):
            return False
        check_transition(Machine.RUN, row.status, to)
        await conn.execute(
            "UPDATE close_run SET status = %s, status_reason = %s, updated_at = now() WHERE close_id = %s",
            (to.value, reason, close_id),
        )
    return True


async def move_gate(
    conn: AsyncConnection[Any],
    gate_id: str,
    to: GateLifecycle,
    *,
    expect: Collection[GateLifecycle] = (GateLifecycle.OPEN,),
) -> bool:
    """Move the gate's lifecycle to `to` when it is in one of `expect` (by default: open); False otherwise.

    Applying or expiring a gate stamps `applied_at`, the moment the engine acted on it.
    """
    to = GateLifecycle(to)
    gate_id = str(uuid.UUID(str(gate_id)))
    async with conn.transaction():
        async with conn.cursor(row_factory=class_row(GateRow)) as cur:
            await cur.execute("SELECT lifecycle FROM gate WHERE gate_id = %s FOR UPDATE", (gate_id,))
            row = await cur.fetchone()
        if row is None or row.lifecycle not in {GateLifecycle(state) for state in expect}:
            return False
        check_transition(Machine.GATE, row.lifecycle, to)
        await conn.execute(
            "UPDATE gate SET lifecycle = %s,"
            " applied_at = CASE WHEN %s IN ('applied', 'expired') THEN now() ELSE applied_at END"
            " WHERE gate_id = %s",
            (to.value, to.value, gate_id),
        )
    return True
