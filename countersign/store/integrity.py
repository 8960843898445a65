"""The drills' counts: what a close's dispatches, postings, gates and cards left behind, and how far the trace's
sealing and signing have come. Reads only.

Reads `dispatch`, `journal` and `journal_line`, `gate` and `outbox_message`, `close_run`, the trace's queue and head
(`trace_pending`, `trace_head`), its events (`trace_event`) and its signed checkpoints (`trace_checkpoint`), and asks
the server which server it is. Called by countersign/engine/integrity.py, which judges the numbers (exactly once, a
stalled sealer, a close no checkpoint covers); the drills (countersign/scenarios/drills.py) read them through it.
Every function runs on the caller's connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row


@dataclass(frozen=True)
class ServerRow:
    """The server as it names itself: its full version string, its address ("unix socket" without one), the database."""

    version: str
    host: str
    database: str


async def read_server(conn: AsyncConnection[Any]) -> ServerRow:
    """Which server and database `conn` reaches."""
    async with conn.cursor(row_factory=class_row(ServerRow)) as cur:
        await cur.execute(
            "SELECT version() AS version, COALESCE(host(inet_server_addr()), 'unix socket') AS host,"
            " current_database() AS database"
        )
        row = await cur.fetchone()
    assert row is not None  # a SELECT without FROM returns its one row
    return row


@dataclass(frozen=True)
class PostingCounts:
    """What a close's dispatches and postings left behind."""

    dispatch_rows: int
    specialist_calls: int  # sum of `dispatch.calls`: how often a specialist was actually asked
    journals: int
    journal_lines: int


async def posting_counts(conn: AsyncConnection[Any], close_id: str) -> PostingCounts:
    """The close's dispatch rows and specialist calls, and the journals and journal lines it posted."""
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
class GateCounts:
    gates: int
    cards_not_sent_once: int  # (gate, platform, channel) with other than one gate card, or one not sent


async def gate_counts(conn: AsyncConnection[Any], close_id: str) -> GateCounts:
    """The close's gates, and how many (gate, platform, channel) have other than exactly one gate card, sent."""
    async with conn.cursor(row_factory=class_row(GateCounts)) as cur:
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


async def closed_count(conn: AsyncConnection[Any], close_ids: list[str]) -> int:
    """How many of `close_ids` are closed."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT count(*) FROM close_run WHERE close_id = ANY(%s::uuid[]) AND status = 'closed'", (close_ids,)
        )
        count: int | None = await cur.fetchone()
    return count or 0


@dataclass(frozen=True)
class SealingSample:
    """One look at the trace's queue: how far sealing and signing have come."""

    head_seq: int  # the last sealed event's sequence number (0: none sealed)
    pending: int  # events committed but not yet chained
    oldest_pending_id: int | None  # the queue's oldest entry, None when the queue is empty
    checkpoint_size: int  # the tree size of the newest signed checkpoint (0: none)


async def sealing_sample(conn: AsyncConnection[Any]) -> SealingSample:
    """The trace's head, its queue's length and oldest entry, and the newest signed checkpoint's size, in one read."""
    async with conn.cursor(row_factory=class_row(SealingSample)) as cur:
        await cur.execute(
            "SELECT COALESCE((SELECT seq FROM trace_head), 0) AS head_seq,"
            "       (SELECT count(*) FROM trace_pending) AS pending,"
            "       (SELECT min(pending_id) FROM trace_pending) AS oldest_pending_id,"
            "       COALESCE((SELECT max(tree_size) FROM trace_checkpoint), 0) AS checkpoint_size"
        )
        row = await cur.fetchone()
    assert row is not None
    return row


@dataclass(frozen=True)
class ClosingRow:
    """A close's sealed `period_closed` event, and the tree size of the newest signed checkpoint."""

    close_id: str
    closed_seq: int
    signed_size: int


async def closing_rows(conn: AsyncConnection[Any], close_ids: list[str]) -> list[ClosingRow]:
    """Each of `close_ids` whose `period_closed` event is sealed, in trace order, with the newest checkpoint's
    size."""
    async with conn.cursor(row_factory=class_row(ClosingRow)) as cur:
        await cur.execute(
            "SELECT e.close_id::text AS close_id, e.seq AS closed_seq,"
            "       COALESCE((SELECT max(tree_size) FROM trace_checkpoint), 0) AS signed_size"
            "  FROM trace_event e WHERE e.kind = 'period_closed' AND e.close_id = ANY(%s::uuid[]) ORDER BY e.seq",
            (close_ids,),
        )
        return await cur.fetchall()
