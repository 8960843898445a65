"""The only writer of `close_task.status`, `close_run.status` and `gate.lifecycle` in the engine.

Each move locks its row, checks the move against `countersign.engine.lifecycle` and the escalation rules, and writes
it. The
database checks the same again (migration 0011), so a move that slipped past Python is refused there too.
A move returns False when the row is not in a state the caller expected (another worker moved it first).
The rules are here; the statements (each lock, each update, the gates the rules ask after) are
`countersign.store.runs`', run in the move's own transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.lifecycle import IllegalTransition, check_transition
from countersign.policy import APPROVAL, EscalationReason
from countersign.states import GateLifecycle, GateStatus, Machine, RunState, TaskState
from countersign.store import runs as store
from countersign.store.runs import LockedTask
from countersign.store.sign_off_voids import attempt_voided


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
        row = await store.lock_task_for_move(conn, close_id, task)
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
        await store.update_task(
            conn,
            close_id,
            task,
            status=to,
            result=result,
            reason=reason,
            attempt=attempt,
            escalation=new_escalation.value if new_escalation is not None else None,
        )
    return True


async def _check_escalation_rules(
    conn: AsyncConnection[Any],
    close_id: str,
    task: str,
    row: LockedTask,
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
        and not await store.gate_applied_with(conn, close_id, task, attempt, kind=APPROVAL, status=GateStatus.APPROVED)
    ):
        raise IllegalTransition(Machine.TASK, source, to, f"no applied, approved approval gate for attempt {attempt}")
    if source == TaskState.DONE and not await attempt_voided(conn, close_id, task, row.attempt):
        raise IllegalTransition(
            Machine.TASK,
            source,
            to,
            f"done work reopens only when a change voids the sign-off of attempt {row.attempt}",
        )
    if (
        source == TaskState.HALTED
        and to is TaskState.PENDING
        and not await store.escalation_gate_settled(conn, close_id, task, row.attempt)
    ):
        raise IllegalTransition(
            Machine.TASK,
            source,
            to,
            f"escalated work runs again only after the escalation gate of attempt {row.attempt} was approved by a"
            " person or expired undecided",
        )


async def move_run(conn: AsyncConnection[Any], close_id: str, to: RunState, *, reason: str | None) -> bool:
    """Store the run's status and reason; False when both were already so (or there is no such run)."""
    to = RunState(to)
    async with conn.transaction():
        row = await store.lock_run(conn, close_id)
        if row is None or (row.status == to and row.status_reason == reason):
            return False
        check_transition(Machine.RUN, row.status, to)
        await store.update_run(conn, close_id, to, reason)
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
        lifecycle = await store.lock_gate_lifecycle(conn, gate_id)
        if lifecycle is None or lifecycle not in {GateLifecycle(state) for state in expect}:
            return False
        check_transition(Machine.GATE, lifecycle, to)
        await store.update_gate_lifecycle(conn, gate_id, to)
    return True
