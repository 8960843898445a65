"""Exactly-once counts over the engine's tables and the trace: what the drills check after a storm or a kill.

Each count is a query here, never in the composition root; the drills only compare the numbers with what they expect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from countersign.audit.trace import close_event_counts


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


# --- the trace keeping up ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SealingSample:
    """One look at the trace's queue: how far sealing and signing have come."""

    head_seq: int  # the last sealed event's sequence number (0: none sealed)
    pending: int  # events committed but not yet chained
    oldest_pending_id: int | None  # the queue's oldest entry, None when the queue is empty
    checkpoint_size: int  # the tree size of the newest signed checkpoint (0: none)


async def sealing_sample(conn: AsyncConnection[Any]) -> SealingSample:
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


class SealingWatch:
    """Judges samples taken while a drill runs: sealing keeps up while no event waits in the queue longer than
    `max_wait_s`. A queue that only ever grows, or an oldest entry that never leaves, is what a stalled sealer looks
    like from outside (the drill's own final seal would otherwise hide it)."""

    def __init__(self, max_wait_s: float = 30.0) -> None:
        self.max_wait_s = max_wait_s
        self.samples = 0
        self.longest_wait_s = 0.0
        self.most_pending = 0
        self._oldest: tuple[int, float] | None = None  # (pending id, when first seen oldest)
        self._problem: str | None = None

    def observe(self, sample: SealingSample, now: float) -> None:
        self.samples += 1
        self.most_pending = max(self.most_pending, sample.pending)
        if sample.oldest_pending_id is None:
            self._oldest = None
            return
        if self._oldest is None or self._oldest[0] != sample.oldest_pending_id:
            self._oldest = (sample.oldest_pending_id, now)
            return
        waited = now - self._oldest[1]
        self.longest_wait_s = max(self.longest_wait_s, waited)
        if waited > self.max_wait_s and self._problem is None:
            self._problem = (
                f"sealing fell behind: the oldest queued trace event waited {waited:.0f}s"
                f" (limit {self.max_wait_s:.0f}s)"
                f" with {sample.pending} queued, the head at seq {sample.head_seq}"
                f" and the newest checkpoint at tree size {sample.checkpoint_size}"
            )

    def problems(self) -> list[str]:
        return [] if self._problem is None else [self._problem]


@dataclass(frozen=True)
class _ClosingRow:
    close_id: str
    closed_seq: int
    signed_size: int


async def closing_checkpoint_problems(conn: AsyncConnection[Any], close_ids: list[str]) -> list[str]:
    """Each of `close_ids` that closed (its `period_closed` event is sealed) must be covered by a signed checkpoint:
    sign-off ends with one. One line per close that is not."""
    async with conn.cursor(row_factory=class_row(_ClosingRow)) as cur:
        await cur.execute(
            "SELECT e.close_id::text AS close_id, e.seq AS closed_seq,"
            "       COALESCE((SELECT max(tree_size) FROM trace_checkpoint), 0) AS signed_size"
            "  FROM trace_event e WHERE e.kind = 'period_closed' AND e.close_id = ANY(%s::uuid[]) ORDER BY e.seq",
            (close_ids,),
        )
        rows = await cur.fetchall()
    return [
        f"{row.close_id[:8]} closed at trace seq {row.closed_seq} but no signed checkpoint covers it"
        f" (the newest covers {row.signed_size} events)"
        for row in rows
        if row.signed_size < row.closed_seq
    ]
