"""Exactly-once counts over the engine's tables and the trace: what the drills check after a storm or a kill.

Each count is a query of `countersign.store.integrity`, never in the composition root; the rules are here (what
exactly once means for a close, when sealing fell behind, which closes a checkpoint must cover), and the drills only
compare the numbers with what they expect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from countersign.store import integrity as store
from countersign.store.integrity import PostingCounts, SealingSample, closed_count, posting_counts, sealing_sample
from countersign.store.trace import close_event_counts

__all__ = ["PostingCounts", "SealingSample", "closed_count", "posting_counts", "sealing_sample"]  # the store's counts


class NotPostgres(RuntimeError):
    """A drill ran against something that is not PostgreSQL: its counts prove nothing."""


@dataclass(frozen=True)
class ServerIdentity:
    version: str  # "PostgreSQL 16.4", without the build details
    host: str  # the server's address, or "unix socket"
    database: str


async def server_identity(conn: AsyncConnection[Any]) -> ServerIdentity:
    """Which server and database `conn` reaches; raises NotPostgres unless it is PostgreSQL."""
    row = await store.read_server(conn)
    if not row.version.startswith("PostgreSQL"):
        raise NotPostgres(f"the drill ran against {row.version!r}, which is not PostgreSQL: not a proof")
    return ServerIdentity(row.version.split(" on ")[0], row.host, row.database)


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
    gates = await store.gate_counts(conn, close_id)
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


# --- the trace keeping up ----------------------------------------------------------------------------------------


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


async def closing_checkpoint_problems(conn: AsyncConnection[Any], close_ids: list[str]) -> list[str]:
    """Each of `close_ids` that closed (its `period_closed` event is sealed) must be covered by a signed checkpoint:
    sign-off ends with one. One line per close that is not."""
    rows = await store.closing_rows(conn, close_ids)
    return [
        f"{row.close_id[:8]} closed at trace seq {row.closed_seq} but no signed checkpoint covers it"
        f" (the newest covers {row.signed_size} events)"
        for row in rows
        if row.signed_size < row.closed_seq
    ]
