"""The close workflow's own reads and writes beyond the specialist inputs, returning named rows."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row


@dataclass(frozen=True)
class TaskLine:
    task: str
    title: str | None
    status: str
    attempt: int


@dataclass(frozen=True)
class JournalLine:
    journal_id: int
    memo: str
    debits: str


async def latest_feed_loader(conn: AsyncConnection[Any], book_set_id: int) -> str | None:
    """Who loaded the newest bank feed of the book set, if anyone did."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT loaded_by FROM bank_feed WHERE book_set_id = %s ORDER BY feed_version DESC LIMIT 1",
            (book_set_id,),
        )
        loaded_by: str | None = await cur.fetchone()
    return loaded_by


async def task_summary(conn: AsyncConnection[Any], close_id: str) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=class_row(TaskLine)) as cur:
        await cur.execute(
            "SELECT task, title, status, attempt FROM close_task WHERE close_id = %s ORDER BY task",
            (close_id,),
        )
        return [asdict(line) for line in await cur.fetchall()]


async def period_journals(conn: AsyncConnection[Any], entity: str, period: str) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=class_row(JournalLine)) as cur:
        await cur.execute(
            "SELECT j.journal_id, j.memo, (sum(l.amount) FILTER (WHERE l.amount > 0))::text AS debits"
            " FROM journal j JOIN journal_line l USING (journal_id)"
            " WHERE j.entity = %s AND j.period = %s GROUP BY j.journal_id ORDER BY j.journal_id",
            (entity, period),
        )
        return [asdict(line) for line in await cur.fetchall()]


async def close_period(conn: AsyncConnection[Any], entity: str, period: str, close_id: str) -> None:
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE accounting_period SET status = 'closed', closed_at = now(), closed_by_close = %s"
            " WHERE entity = %s AND period = %s AND status = 'open'",
            (close_id, entity, period),
        )
