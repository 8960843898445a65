"""Close records: starting a close, reading its status, deriving its overall state from its tasks and gates."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, errors
from psycopg.rows import class_row, scalar_row

from countersign import installed_version
from countersign.audit.person_proof import digest_of_gate
from countersign.audit.trace import append_event, register_close_versions, seal_pending
from countersign.engine.actors import ENGINE_ACTOR
from countersign.engine.books import BooksError, book_rates
from countersign.engine.dispatch import dead_letters
from countersign.engine.outbox import failed_deliveries
from countersign.engine.supervisor import move_run
from countersign.policy import Policy, Workflow
from countersign.states import GateStatus, RunState, TaskState, TraceKind
from countersign.store.gates import GateRecord, read_gates_of_close

ENTITY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
PERIOD_PATTERN = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])")


class InvalidCloseKey(ValueError):
    def __init__(self, field: str, value: str, rule: str) -> None:
        super().__init__(f"{field}: {value!r} is not valid ({rule})")
        self.field = field
        self.value = value


def check_entity_and_period(entity: str, period: str) -> None:
    """Entity codes become folder names and chat text: letters, digits, '.', '_' and '-' only."""
    if not ENTITY_PATTERN.fullmatch(entity):
        raise InvalidCloseKey(
            "entity", entity, "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    if not PERIOD_PATTERN.fullmatch(period):
        raise InvalidCloseKey("period", period, "YYYY-MM")


class CloseNotFound(LookupError):
    def __init__(self, close_id: str) -> None:
        super().__init__(f"no close with id {close_id!r}")
        self.close_id = close_id


class CloseAlreadyExists(Exception):
    def __init__(self, entity: str, period: str, close_id: str) -> None:
        super().__init__(f"a close for {entity} {period} already exists: {close_id}")
        self.entity = entity
        self.period = period
        self.close_id = close_id


class PeriodClosed(Exception):
    def __init__(self, entity: str, period: str) -> None:
        super().__init__(f"period {entity} {period} is already closed")
        self.entity = entity
        self.period = period


@dataclass(frozen=True)
class CloseRecord:
    close_id: str
    entity: str
    period: str
    book_set_id: int
    status: str
    started_by: str
    workflow: str


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


async def task_rows(conn: AsyncConnection[Any], close_id: str) -> dict[str, TaskRow]:
    async with conn.cursor(row_factory=class_row(TaskRow)) as cur:
        await cur.execute(f"SELECT {_TASK_COLUMNS} FROM close_task WHERE close_id = %s", (close_id,))
        return {row.task: row for row in await cur.fetchall()}


async def lock_task(conn: AsyncConnection[Any], close_id: str, task: str) -> TaskRow:
    """The task's row, locked until the caller's transaction ends."""
    async with conn.cursor(row_factory=class_row(TaskRow)) as cur:
        await cur.execute(
            f"SELECT {_TASK_COLUMNS} FROM close_task WHERE close_id = %s AND task = %s FOR UPDATE", (close_id, task)
        )
        row = await cur.fetchone()
    if row is None:
        raise LookupError(f"close {close_id} has no task {task!r}")
    return row


def _valid_uuid(close_id: str) -> str:
    try:
        return str(uuid.UUID(str(close_id)))
    except ValueError:
        raise CloseNotFound(str(close_id)) from None


async def find_close_record(conn: AsyncConnection[Any], close_id: str) -> CloseRecord | None:
    """The close, or None when there is no such close."""
    try:
        return await load_close(conn, close_id)
    except CloseNotFound:
        return None


async def load_close(conn: AsyncConnection[Any], close_id: str) -> CloseRecord:
    async with conn.cursor(row_factory=class_row(CloseRecord)) as cur:
        await cur.execute(
            "SELECT close_id::text, entity, period, book_set_id, status, started_by, workflow"
            " FROM close_run WHERE close_id = %s",
            (_valid_uuid(close_id),),
        )
        row = await cur.fetchone()
    if row is None:
        raise CloseNotFound(close_id)
    return row


async def latest_close_id(conn: AsyncConnection[Any], entity: str | None = None) -> str | None:
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
    """How many closes have an entity starting with `prefix` (the demo numbers its entities with it)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT count(*) FROM close_run WHERE left(entity, length(%(p)s)) = %(p)s", {"p": prefix})
        return int(await cur.fetchone() or 0)


async def find_close(conn: AsyncConnection[Any], entity: str, period: str) -> str | None:
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT close_id::text FROM close_run WHERE entity = %s AND period = %s", (entity, period))
        close_id: str | None = await cur.fetchone()
    return close_id


async def _checked_currency(
    conn: AsyncConnection[Any], policy: Policy, entity: str, book_set_id: int
) -> list[dict[str, str]]:
    """The rates the close records (into its version set, and so its trace), after checking the books' currency is
    the entity's functional currency and, when its amounts meet the global thresholds in another currency, that the
    books record the rate to convert them at."""
    own = policy.entity(entity)
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT currency FROM book_set WHERE book_set_id = %s", (book_set_id,))
        books_currency = await cur.fetchone()
    if books_currency != own.currency:
        raise BooksError(
            "entity.json",
            "currency",
            f"the books of {entity} are in {books_currency}, but risk.yaml gives {entity} the functional currency "
            f"{own.currency}: set entities.{entity}.currency in risk.yaml, or load the books in {own.currency}",
        )
    rates = await book_rates(conn, book_set_id)
    if (
        own.amount_thresholds is None
        and own.currency != policy.currency
        and not any((rate.from_currency, rate.to_currency) == (own.currency, policy.currency) for rate in rates)
    ):
        raise BooksError(
            "rates.csv",
            "(file)",
            f"{entity} keeps its books in {own.currency} and is judged on risk.yaml's thresholds in "
            f"{policy.currency}: its books need a {own.currency}->{policy.currency} rate for the period in rates.csv",
        )
    return [
        {
            "from_currency": rate.from_currency,
            "to_currency": rate.to_currency,
            "rate": format(rate.rate.normalize(), "f"),
            "rate_date": rate.rate_date.isoformat(),
            "source": rate.source,
        }
        for rate in rates
    ]


async def start_close(
    conn: AsyncConnection[Any],
    *,
    entity: str,
    period: str,
    book_set_id: int,
    policy: Policy,
    workflow: Workflow,
    started_by: str,
    versions: dict[str, Any] | None = None,
) -> str:
    """Create the close and its tasks in one transaction. One close per entity and period."""
    check_entity_and_period(entity, period)
    close_id = str(uuid.uuid4())
    try:
        async with conn.transaction():
            async with conn.cursor(row_factory=scalar_row) as cur:
                await cur.execute(
                    "INSERT INTO accounting_period (entity, period) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (entity, period),
                )
                await cur.execute(
                    "SELECT status FROM accounting_period WHERE entity = %s AND period = %s", (entity, period)
                )
                if await cur.fetchone() == "closed":
                    raise PeriodClosed(entity, period)
                await cur.execute(
                    "INSERT INTO close_run (close_id, entity, period, book_set_id, policy_digest, checklist_digest,"
                    " started_by, workflow) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (close_id, entity, period, book_set_id, policy.digest, workflow.digest, started_by, workflow.name),
                )
                await cur.executemany(
                    "INSERT INTO close_task (close_id, task, title) VALUES (%s, %s, %s)",
                    [(close_id, task_id, workflow.title_of(task_id)) for task_id in workflow.topological_order()],
                )
                await cur.execute("SELECT manifest FROM book_set WHERE book_set_id = %s", (book_set_id,))
                manifest = await cur.fetchone() or {}
            rates = await _checked_currency(conn, policy, entity, book_set_id)
            version_set = {
                "app_version": installed_version(),
                "risk_yaml_sha256": policy.digest,
                "checklist_sha256": workflow.digest,
                "workflow": workflow.name,
                "synthetic_profile": manifest.get("profile"),
                "synthetic_seed": manifest.get("seed"),
                "functional_currency": policy.entity(entity).currency,
                "books_format": manifest.get("format", 1),
                "books_sources": manifest.get("sources", []),
                "rates": rates,
                **(versions or {}),
            }
            await register_close_versions(conn, close_id, version_set)
            await append_event(
                conn,
                actor=ENGINE_ACTOR,
                close_id=close_id,
                kind=TraceKind.CLOSE_STARTED,
                payload={
                    "requested_by": started_by,
                    "entity": entity,
                    "period": period,
                    "book_set_id": book_set_id,
                    "workflow": workflow.name,
                    "tasks": list(workflow.topological_order()),
                    "to": "orchestrator",
                },
            )
    except errors.UniqueViolation:
        existing = await find_close(conn, entity, period)
        raise CloseAlreadyExists(entity, period, existing or "?") from None
    await seal_pending(conn)
    return close_id


@dataclass(frozen=True)
class _TaskOutcome:
    status: TaskState
    reason: str | None
    task: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", TaskState(self.status))


_STOPPED = (TaskState.REJECTED, TaskState.FAILED)


def derive_run_state(
    statuses: set[TaskState], tasks: Sequence[_TaskOutcome], open_gates: int
) -> tuple[RunState, str | None]:
    """A run's status and its reason, from its tasks' statuses and how many of its gates are open. Pure."""
    if statuses == {TaskState.DONE}:
        return RunState.CLOSED, None
    if statuses & set(_STOPPED):
        return RunState.BLOCKED, "; ".join(f"{t.task}: {t.reason}" for t in tasks if t.status in _STOPPED)
    if TaskState.HALTED in statuses:
        return RunState.HALTED, "; ".join(f"{t.task}: {t.reason}" for t in tasks if t.status is TaskState.HALTED)
    if open_gates:
        return RunState.AWAITING_APPROVAL, None
    return RunState.RUNNING, None


async def refresh_close_status(conn: AsyncConnection[Any], close_id: str, actor: str) -> str:
    """Derive the close's status from its tasks and gates and store it when it changed."""
    async with conn.transaction():
        async with conn.cursor(row_factory=class_row(_TaskOutcome)) as cur:
            await cur.execute("SELECT status, reason, task FROM close_task WHERE close_id = %s FOR UPDATE", (close_id,))
            tasks = await cur.fetchall()
        async with conn.cursor(row_factory=scalar_row) as cur:
            await cur.execute(
                "SELECT count(*) FROM gate_state WHERE close_id = %s AND status = %s", (close_id, GateStatus.OPEN)
            )
            open_gates = int(await cur.fetchone() or 0)
        status, reason = derive_run_state({t.status for t in tasks}, tasks, open_gates)
        changed = await move_run(conn, close_id, status, reason=reason)
        if changed:
            await append_event(
                conn,
                actor=actor,
                close_id=close_id,
                kind=TraceKind.CLOSE_STATUS,
                payload={"status": status.value, "reason": reason},
            )
    return status


@dataclass(frozen=True)
class TaskStatusLine:
    """One task as `close status` shows it."""

    task: str
    title: str | None
    status: str
    attempt: int
    reason: str | None


async def close_status(conn: AsyncConnection[Any], close_id: str) -> dict[str, Any]:
    """The documented `close status --json` shape."""
    close = await load_close(conn, close_id)
    async with conn.cursor(row_factory=class_row(TaskStatusLine)) as cur:
        await cur.execute(
            "SELECT task, title, status, attempt, reason FROM close_task WHERE close_id = %s", (close.close_id,)
        )
        tasks = await cur.fetchall()
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT status_reason FROM close_run WHERE close_id = %s", (close.close_id,))
        status_reason: str | None = await cur.fetchone()
    gates = await read_gates_of_close(conn, close.close_id)
    deliveries_failed = await failed_deliveries(conn, close.close_id)
    dead = await dead_letters(conn, close.close_id)
    return {
        "close_id": close.close_id,
        "entity": close.entity,
        "period": close.period,
        "status": close.status,
        "status_reason": status_reason,
        "tasks": [
            {
                "task": t.task,
                "title": t.title or t.task,
                "status": t.status,
                "attempt": int(t.attempt),
                "reason": t.reason,
            }
            for t in tasks
        ],
        "gates": [_gate_status(gate) for gate in gates],
        "deliveries_failed": deliveries_failed,
        "dead_letters": dead,
    }


def _gate_status(gate: GateRecord) -> dict[str, Any]:
    return {
        "gate_id": gate.gate_id,
        "task": gate.task,
        "title": gate.title or gate.task,
        "attempt": gate.attempt,
        "kind": gate.kind,
        "tier": gate.tier,
        "quorum": gate.quorum,
        "status": gate.status.value,
        "approver_role": gate.approver_role,
        "rule": gate.rule,
        "opened_at": gate.opened_at.isoformat(),
        "due_at": gate.due_at.isoformat(),
        "approvals": gate.approvals,
        "prepared_by": gate.prepared_by,
        "requested_by": list(gate.requested_by),
        "expires_at": gate.expires_at.isoformat() if gate.expires_at else None,
        "accepted_proofs": list(gate.accepted_proofs),
        "summary_digest": digest_of_gate(gate.facts.digest_fields(), gate.facts.summary_json),
        "overdue": bool(gate.overdue),
        "decisions": [
            {
                "principal": d.principal_id,
                "name": d.display_name,
                "decision": d.decision.value,
                "reason": d.reason,
                "decided_at": d.decided_at.isoformat(),
                "channel": d.channel,
            }
            for d in gate.decisions
        ],
    }
