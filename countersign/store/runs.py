"""The run tables: `close_run` and `close_task` (a close and its tasks), the `accounting_period` a close opens, and the
statements of the supervisor's state moves.

Reads and writes `close_run`, `close_task` and `accounting_period` (only its insert: closing a period is
`countersign.store.close_inputs`'); reads `gate_state` (a close's open gates, and the gates the supervisor's rules
ask after) and locks and writes `gate.lifecycle`. Called by countersign/engine/runs.py (starting a close, reading its
records and status, refreshing its derived status) and by countersign/engine/supervisor.py, the one caller of the
state moves (`lock_task_for_move`, `update_task`, `lock_run`, `update_run`, `lock_gate_lifecycle`,
`update_gate_lifecycle`): the supervisor checks every move against the state machines and the escalation rules
before it writes, and the database checks it again (migration 0011). The workflow handlers may not import this
module (an import-linter contract), and only the supervisor calls the moves (tests/store/test_runs_store.py).

Every function runs on the caller's connection, in the caller's transaction: a `FOR UPDATE` lock is held until that
transaction ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.states import GateKind, GateLifecycle, GateStatus, PeriodState, RunState, TaskState

# --- closes --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CloseRecord:
    close_id: str
    entity: str
    period: str
    book_set_id: int
    status: RunState
    started_by: str
    workflow: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunState(self.status))


async def read_close(conn: AsyncConnection[Any], close_id: str) -> CloseRecord | None:
    """The close (`close_id` a well-formed UUID), or None when there is no such close."""
    async with conn.cursor(row_factory=class_row(CloseRecord)) as cur:
        await cur.execute(
            "SELECT close_id::text, entity, period, book_set_id, status, started_by, workflow"
            " FROM close_run WHERE close_id = %s",
            (close_id,),
        )
        return await cur.fetchone()


async def latest_close_id(conn: AsyncConnection[Any], entity: str | None = None) -> str | None:
    """The close created last (of `entity`, when given), or None when there is none."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        if entity is None:
            await cur.execute("SELECT close_id::text FROM close_run ORDER BY created_at DESC, close_id LIMIT 1")
        else:
            await cur.execute(
                "SELECT close_id::text FROM close_run WHERE entity = %s ORDER BY created_at DESC, close_id LIMIT 1",
                (entity,),
            )
        close_id: str | None = await cur.fetchone()
    return close_id


async def runnable_close_ids(conn: AsyncConnection[Any], only: str | None = None) -> list[str]:
    """Every close not yet closed (or just `only`, when it is not closed), oldest first."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT close_id::text FROM close_run WHERE status <> 'closed'"
            " AND (%s::uuid IS NULL OR close_id = %s::uuid) ORDER BY created_at",
            (only, only),
        )
        ids: Sequence[str] = await cur.fetchall()
    return list(ids)


async def count_closes_with_entity_prefix(conn: AsyncConnection[Any], prefix: str) -> int:
    """How many closes have an entity starting with `prefix`."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT count(*) FROM close_run WHERE left(entity, length(%(p)s)) = %(p)s", {"p": prefix})
        return int(await cur.fetchone() or 0)


async def find_close(conn: AsyncConnection[Any], entity: str, period: str) -> str | None:
    """The close of the entity and period, or None."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT close_id::text FROM close_run WHERE entity = %s AND period = %s", (entity, period))
        close_id: str | None = await cur.fetchone()
    return close_id


async def read_status_reason(conn: AsyncConnection[Any], close_id: str) -> str | None:
    """Why the close is in its status (None when its status needs no reason, or there is no such close)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT status_reason FROM close_run WHERE close_id = %s", (close_id,))
        status_reason: str | None = await cur.fetchone()
    return status_reason


# --- starting a close ----------------------------------------------------------------------------------------------


async def open_period(conn: AsyncConnection[Any], entity: str, period: str) -> PeriodState | None:
    """Insert the entity's accounting period when it has none yet; returns the period's state."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO accounting_period (entity, period) VALUES (%s, %s) ON CONFLICT DO NOTHING", (entity, period)
        )
        await cur.execute("SELECT status FROM accounting_period WHERE entity = %s AND period = %s", (entity, period))
        status: str | None = await cur.fetchone()
    return PeriodState(status) if status is not None else None


@dataclass(frozen=True)
class NewClose:
    close_id: str
    entity: str
    period: str
    book_set_id: int
    policy_digest: str
    checklist_digest: str
    started_by: str
    workflow: str


async def insert_close(conn: AsyncConnection[Any], close: NewClose, tasks: Sequence[tuple[str, str | None]]) -> None:
    """Insert the close and its tasks, `(task, title)` each, in that order (one close per entity and period: a second
    raises `UniqueViolation`)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO close_run (close_id, entity, period, book_set_id, policy_digest, checklist_digest,"
            " started_by, workflow) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (
                close.close_id,
                close.entity,
                close.period,
                close.book_set_id,
                close.policy_digest,
                close.checklist_digest,
                close.started_by,
                close.workflow,
            ),
        )
        await cur.executemany(
            "INSERT INTO close_task (close_id, task, title) VALUES (%s, %s, %s)",
            [(close.close_id, task, title) for task, title in tasks],
        )


# --- tasks ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRow:
    """One task of one close as the supervisor last left it."""

    task: str
    status: TaskState
    attempt: int
    result: dict[str, Any] | None
    escalation: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", TaskState(self.status))


_TASK_COLUMNS = "task, status, attempt, result, escalation"


async def read_tasks(conn: AsyncConnection[Any], close_id: str) -> list[TaskRow]:
    """Every task of the close."""
    async with conn.cursor(row_factory=class_row(TaskRow)) as cur:
        await cur.execute(f"SELECT {_TASK_COLUMNS} FROM close_task WHERE close_id = %s", (close_id,))
        return await cur.fetchall()


async def lock_task(conn: AsyncConnection[Any], close_id: str, task: str) -> TaskRow | None:
    """The task's row, locked until the caller's transaction ends; None when the close has no such task."""
    async with conn.cursor(row_factory=class_row(TaskRow)) as cur:
        await cur.execute(
            f"SELECT {_TASK_COLUMNS} FROM close_task WHERE close_id = %s AND task = %s FOR UPDATE", (close_id, task)
        )
        return await cur.fetchone()


@dataclass(frozen=True)
class TaskOutcome:
    """A task's status and its reason: what a run's status derives from."""

    status: TaskState
    reason: str | None
    task: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", TaskState(self.status))


async def lock_task_outcomes(conn: AsyncConnection[Any], close_id: str) -> list[TaskOutcome]:
    """Every task of the close, locked until the caller's transaction ends."""
    async with conn.cursor(row_factory=class_row(TaskOutcome)) as cur:
        await cur.execute("SELECT status, reason, task FROM close_task WHERE close_id = %s FOR UPDATE", (close_id,))
        return await cur.fetchall()


async def count_open_gates(conn: AsyncConnection[Any], close_id: str) -> int:
    """How many of the close's gates are open (undecided, unexpired, not cancelled)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT count(*) FROM gate_state WHERE close_id = %s AND status = %s", (close_id, GateStatus.OPEN)
        )
        return int(await cur.fetchone() or 0)


@dataclass(frozen=True)
class TaskStatusLine:
    """One task as `close status` shows it."""

    task: str
    title: str | None
    status: TaskState
    attempt: int
    reason: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", TaskState(self.status))


async def read_task_status_lines(conn: AsyncConnection[Any], close_id: str) -> list[TaskStatusLine]:
    """Every task of the close, as `close status` shows it."""
    async with conn.cursor(row_factory=class_row(TaskStatusLine)) as cur:
        await cur.execute(
            "SELECT task, title, status, attempt, reason FROM close_task WHERE close_id = %s", (close_id,)
        )
        return await cur.fetchall()


# --- the supervisor's moves ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockedTask:
    """A task's state as a move reads it, under the row's lock."""

    status: TaskState
    attempt: int
    escalation: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", TaskState(self.status))


async def lock_task_for_move(conn: AsyncConnection[Any], close_id: str, task: str) -> LockedTask | None:
    """The task's status, attempt and escalation, its row locked until the caller's transaction ends; None when the
    close has no such task."""
    async with conn.cursor(row_factory=class_row(LockedTask)) as cur:
        await cur.execute(
            "SELECT status, attempt, escalation FROM close_task WHERE close_id = %s AND task = %s FOR UPDATE",
            (close_id, task),
        )
        return await cur.fetchone()


async def update_task(
    conn: AsyncConnection[Any],
    close_id: str,
    task: str,
    *,
    status: TaskState,
    result: Mapping[str, Any] | None,
    reason: str | None,
    attempt: int | None,
    escalation: str | None,
) -> None:
    """Write the task's status and reason; its result, attempt and escalation only when given (None keeps them)."""
    await conn.execute(
        "UPDATE close_task SET status = %s, result = COALESCE(%s, result), reason = %s,"
        " attempt = COALESCE(%s, attempt), escalation = COALESCE(%s, escalation), updated_at = now()"
        " WHERE close_id = %s AND task = %s",
        (
            TaskState(status).value,
            Jsonb(dict(result)) if result is not None else None,
            reason,
            attempt,
            escalation,
            close_id,
            task,
        ),
    )


@dataclass(frozen=True)
class _Found:
    found: bool


async def gate_applied_with(
    conn: AsyncConnection[Any], close_id: str, task: str, attempt: int, *, kind: GateKind, status: GateStatus
) -> bool:
    """Whether the task's attempt has a gate of `kind` that was applied with `status`."""
    async with conn.cursor(row_factory=class_row(_Found)) as cur:
        await cur.execute(
            "SELECT EXISTS (SELECT 1 FROM gate_state WHERE close_id = %s AND task = %s AND attempt = %s"
            " AND kind = %s AND lifecycle = 'applied' AND status = %s) AS found",
            (close_id, task, attempt, kind, status),
        )
        found = await cur.fetchone()
    return found is not None and found.found


async def escalation_gate_settled(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> bool:
    """Whether the task's attempt has an escalation gate applied as approved, or expired undecided."""
    async with conn.cursor(row_factory=class_row(_Found)) as cur:
        await cur.execute(
            "SELECT EXISTS (SELECT 1 FROM gate_state WHERE close_id = %s AND task = %s AND attempt = %s"
            " AND kind = 'escalation' AND ((lifecycle = 'applied' AND status = 'approved') OR lifecycle = 'expired'))"
            " AS found",
            (close_id, task, attempt),
        )
        found = await cur.fetchone()
    return found is not None and found.found


@dataclass(frozen=True)
class LockedRun:
    """A run's status and its reason as a move reads them, under the row's lock."""

    status: RunState
    status_reason: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunState(self.status))


async def lock_run(conn: AsyncConnection[Any], close_id: str) -> LockedRun | None:
    """The run's status and reason, its row locked until the caller's transaction ends; None when there is no such
    run."""
    async with conn.cursor(row_factory=class_row(LockedRun)) as cur:
        await cur.execute("SELECT status, status_reason FROM close_run WHERE close_id = %s FOR UPDATE", (close_id,))
        return await cur.fetchone()


async def update_run(conn: AsyncConnection[Any], close_id: str, status: RunState, reason: str | None) -> None:
    """Write the run's status and reason."""
    await conn.execute(
        "UPDATE close_run SET status = %s, status_reason = %s, updated_at = now() WHERE close_id = %s",
        (RunState(status).value, reason, close_id),
    )


async def lock_gate_lifecycle(conn: AsyncConnection[Any], gate_id: str) -> GateLifecycle | None:
    """The gate's lifecycle (`gate_id` a well-formed UUID), its row locked until the caller's transaction ends; None
    when there is no such gate."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT lifecycle FROM gate WHERE gate_id = %s FOR UPDATE", (gate_id,))
        lifecycle: str | None = await cur.fetchone()
    return GateLifecycle(lifecycle) if lifecycle is not None else None


async def update_gate_lifecycle(conn: AsyncConnection[Any], gate_id: str, lifecycle: GateLifecycle) -> None:
    """Write the gate's lifecycle; applying or expiring it stamps `applied_at`, the moment the engine acted on it."""
    to = GateLifecycle(lifecycle).value
    await conn.execute(
        "UPDATE gate SET lifecycle = %s,"
        " applied_at = CASE WHEN %s IN ('applied', 'expired') THEN now() ELSE applied_at END"
        " WHERE gate_id = %s",
        (to, to, gate_id),
    )
