"""Exactly-once counts over the engine's tables and the trace: what the drills check after a storm or a kill.

Each count is a query here, never in the composition root; the drills only compare the numbers with what they expect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from audit.trace import close_event_counts


class NotPostgres(RuntimeError):
    """A drill ran against something that is not PostgreSQL: its counts prove nothing."""


@dataclass(frozen=True)
class ServerIdentity:
    version: str  # "PostgreSQL 16.4", without the build details
    host: str  # the server's address, or "unix socket"
    database: str


@dataclass(frozen=True)
class _ServerRow:
    version: str
    host: str
    database: str


async def server_identity(conn: AsyncConnection[Any]) -> ServerIdentity:
    """Which server and database `conn` reaches; raises NotPostgres unless it is PostgreSQL."""
    async with conn.cursor(row_factory=class_row(_ServerRow)) as cur:
        await cur.execute(
            "SELECT version() AS version, COALESCE(host(inet_server_addr()), 'unix socket') AS host,"
            " current_database() AS database"
        )
        row = await cur.fetchone()
    assert row is not None
    if not row.version.startswith("PostgreSQL"):
        raise NotPostgres(f"the drill ran against {row.version!r}, which is not PostgreSQL: not a proof")
    return ServerIdentity(row.version.split(" on ")[0], row.host, row.database)


@dataclass(frozen=True)
class PostingCounts:
    """What a close's dispatches and postings left behind."""

    dispatch_rows: int
    specialist_calls: int  # sum of `dispatch.calls`: how often a specialist was actually asked
    journals: int
    journal_lines: int


async def posting_counts(conn: AsyncConnection[Any], close_id: str) -> PostingCounts:
    async with conn.cursor(row_factory=class_row(PostingCounts)) as cur:
        await cur.execute(
            "SELECT (SELECT count(*) FROM dispatch WHERE close_id = %(c)s) AS dispatch_rows,"
            "       (SELECT COALESCE(sum(calls), 0) FROM dispatch WHERE close_id = %(c)s) AS specialist_calls,"
            "       (SELECT count(*) FROM journal WHERE source_close = %(c)s) AS journals,"
            "       (SELECT count(*) FROM journal_line JOIN journal USING (journal_id)"
            "         WHERE source_close = %(c)s) AS journal_lines",
            {"c": close_id},
        )
        row = await cur.fetchone()
    assert row is not None
    return row


@dataclass(frozen=True)
class _GateCounts:
    gates: int
    cards_not_sent_once: int  # (gate, platform, channel) with other than one gate card, or one not sent


async def _gate_counts(conn: AsyncConnection[Any], close_id: str) -> _GateCounts:
    async with conn.cursor(row_factory=class_row(_GateCounts)) as cur:
        await cur.execute(
            "SELECT (SELECT count(*) FROM gate WHERE close_id = %(c)s) AS gates,"
            "       (SELECT count(*) FROM (SELECT gate_id, platform, channel FROM outbox_message"
            "          WHERE close_id = %(c)s AND kind = 'gate_card' GROUP BY 1, 2, 3"
            "         HAVING count(*) <> 1 OR bool_or(status <> 'sent')) bad) AS cards_not_sent_once",
            {"c": close_id},
        )
        row = await cur.fetchone()
    assert row is not None
    return row


@dataclass(frozen=True)
class OnceCheck:
    label: str
    value: int
    expected: int

    @property
    def holds(self) -> bool:
        return self.value == self.expected


async def exactly_once_checks(conn: AsyncConnection[Any], close_id: str) -> list[OnceCheck]:
    """Every effect of a finished close exactly once: one accrual journal and its event, one sign-off, one
    `task_done` per task, one `gate_opened` per gate, one sent card per gate and channel, nothing left unsealed."""
    postings = await posting_counts(conn, close_id)
    gates = await _gate_counts(conn, close_id)
    events = await close_event_counts(conn, close_id)
    return [
        OnceCheck("accrual journals", postings.journals, 1),
        OnceCheck("journal_posted events", events.journals_posted, 1),
        OnceCheck("period_closed events", events.periods_closed, 1),
        OnceCheck("task_done events per task", events.tasks_not_done_once, 0),
        OnceCheck("gate_opened events per gate", abs(gates.gates - events.gates_opened), 0),
        OnceCheck("gate cards per gate and channel", gates.cards_not_sent_once, 0),
        OnceCheck("events left unsealed", events.unsealed, 0),
    ]


async def closed_count(conn: AsyncConnection[Any], close_ids: list[str]) -> int:
    """How many of `close_ids` are closed."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT count(*) FROM close_run WHERE close_id = ANY(%s::uuid[]) AND status = 'closed'", (close_ids,)
        )
        count: int | None = await cur.fetchone()
    return count or 0
