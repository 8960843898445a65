"""Counts the metrics endpoint reads from the engine's tables: each a count over an index or a small view.

Reads `outbox_message`, `dispatch`, `close_task`, `gate_state`, `trace_head` and `trace_checkpoint`, and bounds the
scrape's transaction (`limit_scrape`); called by countersign/bootstrap/metrics.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row

from countersign.states import GateStatus


async def limit_scrape(conn: AsyncConnection[Any], statement_timeout_ms: int) -> None:
    """Make the caller's transaction read-only, each of its statements cancelled after `statement_timeout_ms`."""
    await conn.execute(f"SET LOCAL statement_timeout = {int(statement_timeout_ms)}")
    await conn.execute("SET LOCAL transaction_read_only = on")


@dataclass(frozen=True)
class EngineCounts:
    outbox_backlog: int
    outbox_failed: int
    outbox_oldest_pending_age_s: float  # 0 when nothing is pending
    outbox_over_budget: int  # pending messages whose retry budget (from `budget_from`) has run out
    dispatch_retrying: int
    dispatch_failures: int
    dispatch_dead: int
    gates_overdue: int  # open gates past their due time
    trace_unsigned_events: int  # sealed trace events after the last signed checkpoint (1 right after a signing)


@dataclass(frozen=True)
class GateCount:
    status: GateStatus
    gates: int

    def __post_init__(self) -> None:  # the stored word becomes its Enum at the store's edge
        object.__setattr__(self, "status", GateStatus(self.status))


async def engine_counts(conn: AsyncConnection[Any], *, outbox_budget_s: float) -> EngineCounts:
    """The engine's gauges in one statement. A message's age runs from `created_at`, when it was enqueued; its retry
    budget from `budget_from` (its creation, or the last redrive: migration 0021). A pending message past its budget
    is one the deliverer should have dead-lettered at its last attempt: no worker is delivering. Signing a checkpoint
    appends its own event, so the log has one unsigned event right after a signing (trace_head.seq counts from 1)."""
    async with conn.cursor(row_factory=class_row(EngineCounts)) as cur:
        await cur.execute(
            "SELECT (SELECT count(*) FROM outbox_message WHERE status = 'pending') AS outbox_backlog,"
            "       (SELECT count(*) FROM outbox_message WHERE status = 'failed') AS outbox_failed,"
            "       (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8"
            "          FROM outbox_message WHERE status = 'pending') AS outbox_oldest_pending_age_s,"
            "       (SELECT count(*) FROM outbox_message WHERE status = 'pending'"
            "           AND budget_from < now() - make_interval(secs => %(budget_s)s)) AS outbox_over_budget,"
            "       (SELECT count(*) FROM dispatch WHERE status = 'failed') AS dispatch_retrying,"
            "       (SELECT coalesce(sum(failures), 0)::bigint FROM dispatch) AS dispatch_failures,"
            "       (SELECT count(*) FROM dispatch d JOIN close_task t"
            "          ON t.close_id = d.close_id AND t.task = d.task AND t.attempt = d.attempt"
            "         WHERE d.status = 'dead') AS dispatch_dead,"
            "       (SELECT count(*) FROM gate_state WHERE status = 'open' AND overdue) AS gates_overdue,"
            "       (SELECT seq FROM trace_head)"
            "         - (SELECT coalesce(max(tree_size), 0) FROM trace_checkpoint) AS trace_unsigned_events",
            {"budget_s": outbox_budget_s},
        )
        row = await cur.fetchone()
    assert row is not None
    return row


async def gates_by_status(conn: AsyncConnection[Any]) -> dict[str, int]:
    """Returns how many gates are in each status (only the statuses some gate is in)."""
    async with conn.cursor(row_factory=class_row(GateCount)) as cur:
        await cur.execute("SELECT status, count(*) AS gates FROM gate_state GROUP BY status")
        return {row.status.value: row.gates for row in await cur.fetchall()}
