"""Counts the metrics endpoint reads from the engine's tables: each a count over an index or a small view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row


@dataclass(frozen=True)
class EngineCounts:
    outbox_backlog: int
    outbox_failed: int
    dispatch_retrying: int
    dispatch_failures: int
    dispatch_dead: int


@dataclass(frozen=True)
class GateCount:
    status: str
    gates: int


async def engine_counts(conn: AsyncConnection[Any]) -> EngineCounts:
    async with conn.cursor(row_factory=class_row(EngineCounts)) as cur:
        await cur.execute(
            "SELECT (SELECT count(*) FROM outbox_message WHERE status = 'pending') AS outbox_backlog,"
            "       (SELECT count(*) FROM outbox_message WHERE status = 'failed') AS outbox_failed,"
            "       (SELECT count(*) FROM dispatch WHERE status = 'failed') AS dispatch_retrying,"
            "       (SELECT coalesce(sum(failures), 0)::bigint FROM dispatch) AS dispatch_failures,"
            "       (SELECT count(*) FROM dispatch d JOIN close_task t"
            "          ON t.close_id = d.close_id AND t.task = d.task AND t.attempt = d.attempt"
            "         WHERE d.status = 'dead') AS dispatch_dead"
        )
        row = await cur.fetchone()
    assert row is not None
    return row


async def gates_by_status(conn: AsyncConnection[Any]) -> dict[str, int]:
    async with conn.cursor(row_factory=class_row(GateCount)) as cur:
        await cur.execute("SELECT status, count(*) AS gates FROM gate_state GROUP BY status")
        return {row.status: row.gates for row in await cur.fetchall()}
