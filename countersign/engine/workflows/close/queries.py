"""The close workflow's own reads and writes beyond the specialist inputs; the SQL lives in
`countersign.store.close_inputs`, and this module hands the steps plain values and dicts."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from psycopg import AsyncConnection

from countersign.store import close_inputs
from countersign.store.close_inputs import JournalLine as JournalLine
from countersign.store.close_inputs import TaskLine as TaskLine


async def latest_feed_loader(conn: AsyncConnection[Any], book_set_id: int) -> str | None:
    """Who loaded the newest bank feed of the book set, if anyone did."""
    return await close_inputs.latest_feed_loader(conn, book_set_id)


async def task_summary(conn: AsyncConnection[Any], close_id: str) -> list[dict[str, Any]]:
    return [asdict(line) for line in await close_inputs.task_lines(conn, close_id)]


async def period_journals(conn: AsyncConnection[Any], entity: str, period: str) -> list[dict[str, Any]]:
    return [asdict(line) for line in await close_inputs.period_journals(conn, entity, period)]


async def close_period(conn: AsyncConnection[Any], entity: str, period: str, close_id: str) -> None:
    await close_inputs.close_period(conn, entity, period, close_id)
