"""The dispatch table: one row per idempotency key of a specialist call, its lease, its failures and its result.

Reads and writes `dispatch`; reads `close_task` (a dead letter counts only for its task's current attempt). Called
by countersign/engine/dispatch.py (the claim, the lease, the result and the failure count, the dead letters and
their replay: the engine owns the rules, the keys, the backoff and the cap on failures), by
countersign/engine/task_runner.py through it (a live lease) and by countersign/engine/jobs.py (when a run left
`running` can move next), and by countersign/engine/reproduce.py (the completed calls it re-runs). Every function
runs on the caller's connection, in the caller's transaction; the claim's row lock (FOR UPDATE) is held until that
transaction ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.states import DispatchStatus


@dataclass(frozen=True)
class DispatchState:
    """A dispatch row as a claim reads it, locked FOR UPDATE."""

    dispatch_id: int
    input_digest: str
    status: DispatchStatus
    result: dict[str, Any] | None
    error: str | None
    retry_in_s: float | None  # seconds until the next attempt is due (negative: overdue), None when not scheduled
    leased_by: str | None
    lease_live: bool | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", DispatchStatus(self.status))  # the column's word, as its Enum


@dataclass(frozen=True)
class CountedFailure:
    dispatch_id: int
    failures: int
    status: DispatchStatus  # failed, or dead once the cap on failures is reached

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", DispatchStatus(self.status))  # the column's word, as its Enum


@dataclass(frozen=True)
class DeadLetter:
    dispatch_id: int
    task: str
    attempt: int
    specialist: str
    failures: int
    error: str | None
    dead_lettered_at: datetime | None


async def insert_dispatch(
    conn: AsyncConnection[Any], key: str, *, close_id: str, task: str, attempt: int, specialist: str, digest: str
) -> None:
    """The dispatch row for `key`, unless one is already there (then nothing changes)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO dispatch (idempotency_key, close_id, task, attempt, specialist, input_digest)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (idempotency_key) DO NOTHING",
            (key, close_id, task, attempt, specialist, digest),
        )


async def lock_dispatch(conn: AsyncConnection[Any], key: str) -> DispatchState | None:
    """The dispatch row for `key`, locked FOR UPDATE until the caller's transaction ends; None when there is none."""
    async with conn.cursor(row_factory=class_row(DispatchState)) as cur:
        await cur.execute(
            "SELECT dispatch_id, input_digest, status, result, error,"
            " extract(epoch FROM next_attempt_at - now())::float8 AS retry_in_s,"
            " leased_by, lease_until > now() AS lease_live FROM dispatch WHERE idempotency_key = %s FOR UPDATE",
            (key,),
        )
        return await cur.fetchone()


async def lease_dispatch(conn: AsyncConnection[Any], key: str, *, holder: str, lease_s: float) -> None:
    """Count a call and lease the dispatch to `holder` until `lease_s` from now."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE dispatch SET calls = calls + 1, leased_by = %s, lease_until = now() + make_interval(secs => %s)"
            " WHERE idempotency_key = %s",
            (holder, lease_s, key),
        )


async def renew_dispatch_lease(conn: AsyncConnection[Any], key: str, *, holder: str, lease_s: float) -> bool:
    """Extend `holder`'s lease of an unfinished dispatch to `lease_s` from now; False when the lease is not theirs."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "UPDATE dispatch SET lease_until = now() + make_interval(secs => %s)"
            " WHERE idempotency_key = %s AND leased_by = %s AND status IN ('pending', 'failed') RETURNING dispatch_id",
            (lease_s, key, holder),
        )
        return await cur.fetchone() is not None


async def complete_dispatch(conn: AsyncConnection[Any], key: str, result: dict[str, Any]) -> bool:
    """Store the result of a dispatch not completed yet (whoever holds its lease); False when it already was."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "UPDATE dispatch SET status = 'completed', result = %s, completed_at = now(), error = NULL,"
            " next_attempt_at = NULL, dead_lettered_at = NULL, leased_by = NULL, lease_until = NULL"
            " WHERE idempotency_key = %s AND status <> 'completed' RETURNING dispatch_id",
            (Jsonb(result), key),
        )
        return await cur.fetchone() is not None


async def dispatch_result(conn: AsyncConnection[Any], key: str) -> dict[str, Any] | None:
    """The stored result of the dispatch for `key` (None while it has none)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT result FROM dispatch WHERE idempotency_key = %s", (key,))
        stored: dict[str, Any] | None = await cur.fetchone()
    return stored


async def count_dispatch_failure(
    conn: AsyncConnection[Any],
    key: str,
    *,
    holder: str,
    reason: str,
    waits: list[float],
    max_failures: int,
) -> CountedFailure | None:
    """Count a failure of `holder`'s leased, unfinished dispatch and end the lease: `dead` at `max_failures`, else
    `failed` with its next attempt `waits[failures - 1]` seconds from now (the last wait past the list's end).
    None when the lease is no longer `holder`'s (nothing was counted)."""
    async with conn.cursor(row_factory=class_row(CountedFailure)) as cur:
        await cur.execute(
            "UPDATE dispatch SET failures = failures + 1,"
            " status = CASE WHEN failures + 1 >= %s THEN 'dead' ELSE 'failed' END, error = %s, completed_at = now(),"
            " next_attempt_at = now() + make_interval(secs => CASE WHEN failures + 1 >= %s THEN 0"
            "   ELSE (%s::float8[])[LEAST(failures + 1, %s)] END),"
            " dead_lettered_at = CASE WHEN failures + 1 >= %s THEN now() END, leased_by = NULL, lease_until = NULL"
            " WHERE idempotency_key = %s AND leased_by = %s AND status IN ('pending', 'failed')"
            " RETURNING dispatch_id, failures, status",
            (max_failures, reason, max_failures, waits, len(waits), max_failures, key, holder),
        )
        return await cur.fetchone()


async def dispatch_in_flight(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> bool:
    """Whether a live lease says another worker is calling the specialist for this task's attempt right now."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT 1 FROM dispatch WHERE close_id = %s AND task = %s AND attempt = %s"
            " AND status IN ('pending', 'failed') AND lease_until > now() LIMIT 1",
            (close_id, task, attempt),
        )
        return await cur.fetchone() is not None


async def dead_letters(conn: AsyncConnection[Any], close_id: str) -> list[DeadLetter]:
    """The close's dead-lettered dispatches of its tasks' current attempts, in dispatch order."""
    async with conn.cursor(row_factory=class_row(DeadLetter)) as cur:
        await cur.execute(
            "SELECT d.dispatch_id, d.task, d.attempt, d.specialist, d.failures, d.error, d.dead_lettered_at"
            " FROM dispatch d JOIN close_task t"
            "   ON t.close_id = d.close_id AND t.task = d.task AND t.attempt = d.attempt"
            " WHERE d.close_id = %s AND d.status = 'dead' ORDER BY d.dispatch_id",
            (close_id,),
        )
        return await cur.fetchall()


async def release_dispatch_leases(conn: AsyncConnection[Any], holder_prefix: str) -> int:
    """End now every live lease whose holder id starts with `holder_prefix` (a stopping process's); returns how many."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE dispatch SET lease_until = now()"
            " WHERE left(leased_by, length(%(p)s)) = %(p)s AND lease_until > now()",
            {"p": holder_prefix},
        )
        return max(cur.rowcount, 0)


async def revive_dead_letter(conn: AsyncConnection[Any], dispatch_id: int) -> tuple[str, str] | None:
    """Put a dead-lettered dispatch back to `failed` with no failures counted and no attempt scheduled; returns its
    close and task, or None when it is not dead-lettered (or does not exist)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE dispatch SET status = 'failed', failures = 0, next_attempt_at = NULL, dead_lettered_at = NULL"
            " WHERE dispatch_id = %s AND status = 'dead' RETURNING close_id::text, task",
            (dispatch_id,),
        )
        row = await cur.fetchone()
    return None if row is None else (row[0], row[1])


async def next_move_in_s(conn: AsyncConnection[Any], close_id: str) -> float | None:
    """Seconds until the close's earliest unfinished dispatch can move (its retry is due or its lease ends); None
    when none of them is waiting on a time."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT extract(epoch FROM min(greatest(coalesce(next_attempt_at, now()), coalesce(lease_until, now())))"
            " - now())::float8 FROM dispatch WHERE close_id = %s AND status IN ('pending', 'failed')"
            " AND (next_attempt_at > now() OR lease_until > now())",
            (close_id,),
        )
        seconds: float | None = await cur.fetchone()
    return seconds


@dataclass(frozen=True)
class CompletedDispatch:
    """A specialist call that answered: what `trace reproduce` re-runs (countersign/engine/reproduce.py)."""

    idempotency_key: str
    task: str
    attempt: int
    specialist: str
    input_digest: str
    result: dict[str, Any]


async def completed_dispatches(conn: AsyncConnection[Any], close_id: str) -> list[CompletedDispatch]:
    """The close's completed dispatches, in the order they were made."""
    async with conn.cursor(row_factory=class_row(CompletedDispatch)) as cur:
        await cur.execute(
            "SELECT idempotency_key, task, attempt, specialist, input_digest, result FROM dispatch"
            " WHERE close_id = %s AND status = 'completed' ORDER BY dispatch_id",
            (close_id,),
        )
        return await cur.fetchall()
