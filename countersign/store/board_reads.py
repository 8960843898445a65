"""What the Close Board reads beyond a gate's one typed read (`countersign.store.gates`): read-only joins across the
table families, for one caller.

Reads `close_run` with its `book_set` (a run's currency), `close_task` (a close's tasks and their results),
`gate` with `gate_state` and `close_task` (the open gates a run waits on, the inbox's candidates), `gate_decision`
(what proved each decision), `dispatch` with `book_bank_line` and `bank_feed` (the bank lines of the feed a gate's own
reconciliation attempt ran on) and `journal` with `journal_line` (what a task posted). Writes nothing. Called by
countersign/services/board_reads.py alone, which checks the caller first and shapes these rows for the pages.

One module rather than a statement in each family's module: every read here is a projection only the board makes,
most of them joins across families, and the family modules keep the statements of their writers (`store.runs` the
supervisor's moves, `store.decisions` the decision writer's). Rows are frozen dataclasses whose state fields are the
Enums of `countersign.states`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from countersign.states import DecisionProof, DispatchStatus, GateLifecycle, GateStatus, RunState, TaskState

# --- runs ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow:
    """A close (or a payment run) as the front page lists it, with its books' currency."""

    close_id: str
    workflow: str
    entity: str
    period: str
    status: RunState
    status_reason: str | None
    updated_at: datetime
    currency: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunState(self.status))  # the column's word, as its Enum


async def latest_runs(conn: AsyncConnection[Any], limit: int) -> list[RunRow]:
    """Every close and payment run, most recently updated first, at most `limit`."""
    async with conn.cursor(row_factory=class_row(RunRow)) as cur:
        await cur.execute(
            "SELECT r.close_id::text AS close_id, r.workflow, r.entity, r.period, r.status, r.status_reason,"
            " r.updated_at, b.currency::text AS currency"
            " FROM public.close_run r JOIN public.book_set b ON b.book_set_id = r.book_set_id"
            " ORDER BY r.updated_at DESC, r.close_id LIMIT %s",
            (limit,),
        )
        return await cur.fetchall()


@dataclass(frozen=True)
class CloseHeader:
    """One close: its run row, who started it and when, and its book set (with the currency)."""

    close_id: str
    workflow: str
    entity: str
    period: str
    status: RunState
    status_reason: str | None
    started_by: str
    created_at: datetime
    updated_at: datetime
    currency: str
    book_set_id: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunState(self.status))


async def close_header(conn: AsyncConnection[Any], close_id: str) -> CloseHeader | None:
    """The close `close_id` (a UUID the caller checked), or None."""
    async with conn.cursor(row_factory=class_row(CloseHeader)) as cur:
        await cur.execute(
            "SELECT r.close_id::text AS close_id, r.workflow, r.entity, r.period, r.status, r.status_reason,"
            " r.started_by, r.created_at, r.updated_at, b.currency::text AS currency, r.book_set_id"
            " FROM public.close_run r JOIN public.book_set b ON b.book_set_id = r.book_set_id"
            " WHERE r.close_id = %s::uuid",
            (close_id,),
        )
        return await cur.fetchone()


# --- tasks ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskLine:
    """One task of a close, as its page lists it."""

    task: str
    title: str
    status: TaskState
    attempt: int
    reason: str | None
    escalation: str | None
    updated_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", TaskState(self.status))


async def task_lines(conn: AsyncConnection[Any], close_id: str) -> list[TaskLine]:
    """The close's tasks, in the order they last moved."""
    async with conn.cursor(row_factory=class_row(TaskLine)) as cur:
        await cur.execute(
            "SELECT task, COALESCE(title, task) AS title, status, attempt, reason, escalation, updated_at"
            " FROM public.close_task WHERE close_id = %s::uuid ORDER BY updated_at, task",
            (close_id,),
        )
        return await cur.fetchall()


@dataclass(frozen=True)
class _ResultRow:
    result: dict[str, Any] | None


def _mapping(row: _ResultRow | None) -> Mapping[str, Any]:
    return row.result if row is not None and isinstance(row.result, Mapping) else {}


async def task_result(conn: AsyncConnection[Any], close_id: str, task: str) -> Mapping[str, Any]:
    """The task's output (`close_task.result`); {} before it ran, or when it is not an object."""
    async with conn.cursor(row_factory=class_row(_ResultRow)) as cur:
        await cur.execute(
            "SELECT result FROM public.close_task WHERE close_id = %s::uuid AND task = %s", (close_id, task)
        )
        return _mapping(await cur.fetchone())


async def variance_result(conn: AsyncConnection[Any], close_id: str) -> Mapping[str, Any]:
    """The output of the close's variance task (the first task whose result flags lines); {} before it ran."""
    async with conn.cursor(row_factory=class_row(_ResultRow)) as cur:
        await cur.execute(
            "SELECT result FROM public.close_task WHERE close_id = %s::uuid AND result ? 'flagged'"
            " ORDER BY task LIMIT 1",
            (close_id,),
        )
        return _mapping(await cur.fetchone())


# --- gates ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenGateRow:
    """An open gate of a run: whom it waits on and how many approvals it still misses."""

    gate_id: str
    close_id: str
    task: str
    title: str
    approver_role: str
    missing: int


async def open_gates_of_runs(conn: AsyncConnection[Any], close_ids: Sequence[str]) -> list[OpenGateRow]:
    """The gates still open (the engine has not acted, no outcome yet) of the runs `close_ids`, oldest first."""
    async with conn.cursor(row_factory=class_row(OpenGateRow)) as cur:
        await cur.execute(
            "SELECT g.gate_id::text AS gate_id, g.close_id::text AS close_id, g.task,"
            " COALESCE(t.title, g.task) AS title, g.approver_role, (g.quorum - s.approvals)::int AS missing"
            " FROM public.gate g JOIN public.gate_state s ON s.gate_id = g.gate_id"
            " LEFT JOIN public.close_task t ON t.close_id = g.close_id AND t.task = g.task"
            " WHERE g.lifecycle = %s AND s.status = %s AND g.close_id = ANY(%s::uuid[])"
            " ORDER BY g.opened_at, g.gate_id",
            (GateLifecycle.OPEN, GateStatus.OPEN, list(close_ids)),
        )
        return await cur.fetchall()


async def open_gate_ids_for_roles(conn: AsyncConnection[Any], roles: Sequence[str], limit: int) -> list[str]:
    """The open gates whose approver role is one of `roles`, soonest due first, at most `limit`."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT g.gate_id::text FROM public.gate g JOIN public.gate_state s ON s.gate_id = g.gate_id"
            " WHERE g.lifecycle = %s AND s.status = %s AND g.approver_role = ANY(%s::text[])"
            " ORDER BY g.due_at, g.gate_id LIMIT %s",
            (GateLifecycle.OPEN, GateStatus.OPEN, list(roles), limit),
        )
        gate_ids: list[str] = await cur.fetchall()
    return gate_ids


@dataclass(frozen=True)
class _ProofRow:
    principal_id: str
    proof_kind: DecisionProof

    def __post_init__(self) -> None:
        object.__setattr__(self, "proof_kind", DecisionProof(self.proof_kind))


async def decision_proofs(conn: AsyncConnection[Any], gate_id: str) -> dict[str, DecisionProof]:
    """Each decider of the gate and what proved the decision was theirs (`gate_decision.proof.kind`, else its
    channel)."""
    async with conn.cursor(row_factory=class_row(_ProofRow)) as cur:
        await cur.execute(
            "SELECT principal_id, COALESCE(proof->>'kind', channel) AS proof_kind FROM public.gate_decision"
            " WHERE gate_id = %s::uuid ORDER BY decided_at, decision_id",
            (gate_id,),
        )
        return {row.principal_id: row.proof_kind for row in await cur.fetchall()}


# --- a gate's evidence ---------------------------------------------------------------------------------------------


async def attempt_result(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> Mapping[str, Any]:
    """What the specialist answered for the task's attempt (its last completed dispatch); {} when none did."""
    async with conn.cursor(row_factory=class_row(_ResultRow)) as cur:
        await cur.execute(
            "SELECT result FROM public.dispatch WHERE close_id = %s::uuid AND task = %s AND attempt = %s"
            " AND status = %s ORDER BY dispatch_id DESC LIMIT 1",
            (close_id, task, attempt, DispatchStatus.COMPLETED),
        )
        return _mapping(await cur.fetchone())


@dataclass(frozen=True)
class BankLine:
    account: str
    bank_line_id: str
    line_date: date
    amount: Decimal
    reference: str
    description: str


async def bank_lines_of_attempt(
    conn: AsyncConnection[Any], book_set_id: int, bank_line_ids: Sequence[str], close_id: str, task: str, attempt: int
) -> list[BankLine]:
    """The lines `bank_line_ids` of the bank feed that was the latest when the task's attempt was dispatched."""
    async with conn.cursor(row_factory=class_row(BankLine)) as cur:
        await cur.execute(
            "SELECT l.account, l.bank_line_id, l.line_date, l.amount, l.reference, l.description"
            " FROM public.book_bank_line l"
            " WHERE l.book_set_id = %(book_set_id)s AND l.bank_line_id = ANY(%(ids)s::text[])"
            "   AND l.feed_version = (SELECT max(f.feed_version) FROM public.bank_feed f"
            "                          WHERE f.book_set_id = %(book_set_id)s AND f.loaded_at <= ("
            "     SELECT d.created_at FROM public.dispatch d WHERE d.close_id = %(close_id)s::uuid"
            "        AND d.task = %(task)s AND d.attempt = %(attempt)s ORDER BY d.dispatch_id DESC LIMIT 1))"
            " ORDER BY l.account, l.line_date, l.bank_line_id",
            {
                "book_set_id": book_set_id,
                "ids": list(bank_line_ids),
                "close_id": close_id,
                "task": task,
                "attempt": attempt,
            },
        )
        return await cur.fetchall()


@dataclass(frozen=True)
class PostedJournalLine:
    journal_id: int
    memo: str
    line_no: int
    account: str
    amount: Decimal
    description: str
    posted_at: datetime


async def posted_journal(conn: AsyncConnection[Any], close_id: str, task: str) -> list[PostedJournalLine]:
    """The lines of every journal the close's task posted, journal by journal."""
    async with conn.cursor(row_factory=class_row(PostedJournalLine)) as cur:
        await cur.execute(
            "SELECT j.journal_id, j.memo, l.line_no, l.account, l.amount, l.description, j.posted_at"
            " FROM public.journal j JOIN public.journal_line l ON l.journal_id = j.journal_id"
            " WHERE j.source_close = %s::uuid AND j.source_task = %s ORDER BY j.journal_id, l.line_no",
            (close_id, task),
        )
        return await cur.fetchall()
