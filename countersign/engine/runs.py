"""Close records: starting a close, reading its status, deriving its overall state from its tasks and gates.

The rules live here (a close's keys, its books' currency, one close per entity and period, the run's derived
state); the statements are `countersign.store.runs`' and `countersign.store.books`', run in this module's
transactions.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection, errors

from countersign import installed_version
from countersign.audit.person_proof import digest_of_gate
from countersign.audit.trace import append_event, register_close_versions, seal_pending
from countersign.engine.actors import ENGINE_ACTOR
from countersign.engine.books import BooksError, book_rates
from countersign.engine.dispatch import dead_letters
from countersign.engine.outbox import failed_deliveries
from countersign.engine.supervisor import move_run
from countersign.policy import Policy, Workflow
from countersign.states import PeriodState, RunState, TaskState, TraceKind
from countersign.store import books as book_store
from countersign.store import runs as store
from countersign.store.gates import GateRecord, read_gates_of_close
from countersign.store.runs import CloseRecord, TaskOutcome, TaskRow

__all__ = ["CloseRecord", "TaskRow"]  # the store's rows, as the engine's callers read them

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


async def task_rows(conn: AsyncConnection[Any], close_id: str) -> dict[str, TaskRow]:
    return {row.task: row for row in await store.read_tasks(conn, close_id)}


async def lock_task(conn: AsyncConnection[Any], close_id: str, task: str) -> TaskRow:
    """The task's row, locked until the caller's transaction ends."""
    row = await store.lock_task(conn, close_id, task)
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
    row = await store.read_close(conn, _valid_uuid(close_id))
    if row is None:
        raise CloseNotFound(close_id)
    return row


async def latest_close_id(conn: AsyncConnection[Any], entity: str | None = None) -> str | None:
    return await store.latest_close_id(conn, entity)


async def runnable_close_ids(conn: AsyncConnection[Any], only: str | None = None) -> list[str]:
    """Every close not yet closed (or just `only`, when it is not closed), oldest first."""
    return await store.runnable_close_ids(conn, only)


async def count_closes_with_entity_prefix(conn: AsyncConnection[Any], prefix: str) -> int:
    """How many closes have an entity starting with `prefix` (the demo numbers its entities with it)."""
    return await store.count_closes_with_entity_prefix(conn, prefix)


async def find_close(conn: AsyncConnection[Any], entity: str, period: str) -> str | None:
    return await store.find_close(conn, entity, period)


async def _checked_currency(
    conn: AsyncConnection[Any], policy: Policy, entity: str, book_set_id: int
) -> list[dict[str, str]]:
    """The rates the close records (into its version set, and so its trace), after checking the books' currency is
    the entity's functional currency and, when its amounts meet the global thresholds in another currency, that the
    books record the rate to convert them at."""
    own = policy.entity(entity)
    books_currency = await book_store.book_set_currency(conn, book_set_id)
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
            if await store.open_period(conn, entity, period) is PeriodState.CLOSED:
                raise PeriodClosed(entity, period)
            await store.insert_close(
                conn,
                store.NewClose(
                    close_id, entity, period, book_set_id, policy.digest, workflow.digest, started_by, workflow.name
                ),
                [(task_id, workflow.title_of(task_id)) for task_id in workflow.topological_order()],
            )
            manifest = await book_store.book_set_manifest(conn, book_set_id) or {}
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


_STOPPED = (TaskState.REJECTED, TaskState.FAILED)


def derive_run_state(
    statuses: set[TaskState], tasks: Sequence[TaskOutcome], open_gates: int
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


async def refresh_close_status(conn: AsyncConnection[Any], close_id: str, actor: str) -> RunState:
    """Derive the close's status from its tasks and gates and store it when it changed."""
    async with conn.transaction():
        tasks = await store.lock_task_outcomes(conn, close_id)
        open_gates = await store.count_open_gates(conn, close_id)
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


async def close_status(conn: AsyncConnection[Any], close_id: str) -> dict[str, Any]:
    """The documented `close status --json` shape."""
    close = await load_close(conn, close_id)
    tasks = await store.read_task_status_lines(conn, close.close_id)
    status_reason = await store.read_status_reason(conn, close.close_id)
    gates = await read_gates_of_close(conn, close.close_id)
    deliveries_failed = await failed_deliveries(conn, close.close_id)
    dead = await dead_letters(conn, close.close_id)
    return {
        "close_id": close.close_id,
        "entity": close.entity,
        "period": close.period,
        "status": close.status.value,
        "status_reason": status_reason,
        "tasks": [
            {
                "task": t.task,
                "title": t.title or t.task,
                "status": t.status.value,
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
