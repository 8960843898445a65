"""The close workflow's own reads and writes beyond the specialist inputs, returning typed rows.

Reads `bank_feed` (who loaded the newest feed), `close_task` (the sign-off's task summary) and `journal` with
`journal_line` (the period's journals); writes `accounting_period` (closing the period). Called by
`countersign.engine.workflows.close.queries`, which the close workflow's steps (reconciliation, sign-off) use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from countersign.store.states import TaskState


@dataclass(frozen=True)
class TaskLine:
    task: str
    title: str | None
    status: TaskState
    attempt: int


@dataclass(frozen=True)
class JournalLine:
    journal_id: int
    memo: str
    debits: str


@dataclass(frozen=True)
class _StoredTaskLine:
    task: str
    title: str | None
    status: str
    attempt: int


async def latest_feed_loader(conn: AsyncConnection[Any], book_set_id: int) -> str | None:
    """Returns who loaded the newest bank feed of the book set, or None when no feed is loaded."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT loaded_by FROM bank_feed WHERE book_set_id = %s ORDER BY feed_version DESC LIMIT 1",
            (book_set_id,),
        )
        loaded_by: str | None = await cur.fetchone()
    return loaded_by


async def task_lines(conn: AsyncConnection[Any], close_id: str) -> list[TaskLine]:
    """Returns the close's tasks in task order, each with its title, status and attempt."""
    async with conn.cursor(row_factory=class_row(_StoredTaskLine)) as cur:
        await cur.execute(
            "SELECT task, title, status, attempt FROM close_task WHERE close_id = %s ORDER BY task",
            (close_id,),
        )
        stored = await cur.fetchall()
    return [TaskLine(line.task, line.title, TaskState(line.status), line.attempt) for line in stored]


async def period_journals(conn: AsyncConnection[Any], entity: str, period: str) -> list[JournalLine]:
    """Returns the entity's journals of the period in journal order, each with its memo and debit total as text."""
    async with conn.cursor(row_factory=class_row(JournalLine)) as cur:
        await cur.execute(
            "SELECT j.journal_id, j.memo, (sum(l.amount) FILTER (WHERE l.amount > 0))::text AS debits"
            " FROM journal j JOIN journal_line l USING (journal_id)"
            " WHERE j.entity = %s AND j.period = %s GROUP BY j.journal_id ORDER BY j.journal_id",
            (entity, period),
        )
        return await cur.fetchall()


async def close_period(conn: AsyncConnection[Any], entity: str, period: str, close_id: str) -> None:
    """Marks the entity's open period closed by the close; returns nothing (a period not open is left as it is)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE accounting_period SET status = 'closed', closed_at = now(), closed_by_close = %s"
            " WHERE entity = %s AND period = %s AND status = 'open'",
            (close_id, entity, period),
        )
