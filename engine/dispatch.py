"""Idempotent dispatch to specialists.

A2A cannot carry idempotency (the server assigns task ids, and a finished task cannot be continued), so the key
travels in the message metadata and the guarantee lives in our own table: `dispatch.idempotency_key` is UNIQUE.
A repeated dispatch with a completed row returns the stored result and calls nobody.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from audit.killpoints import kill_point
from audit.trace import append_event

from .leases import Connect, connect_to, holder_id, renewing

SpecialistCall = Callable[[str, dict[str, Any], str], Awaitable[dict[str, Any]]]


def input_digest(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


def dispatch_key(close_id: str, task: str, attempt: int, digest: str) -> str:
    return hashlib.sha256(f"dispatch:v1:{close_id}:{task}:{attempt}:{digest}".encode()).hexdigest()


class DispatchConflict(Exception):
    def __init__(self, idempotency_key: str, stored_digest: str, new_digest: str) -> None:
        super().__init__(
            f"dispatch key {idempotency_key} was used for input {stored_digest[:12]}…,"
            f" refusing input {new_digest[:12]}…"
        )
        self.idempotency_key = idempotency_key


class DispatchFailed(Exception):
    """The specialist failed; the dispatch will be retried after a backoff."""

    def __init__(self, specialist: str, task: str, reason: str, failures: int = 1) -> None:
        super().__init__(f"{specialist} failed on {task} ({failures} of {MAX_DISPATCH_FAILURES}): {reason}")
        self.specialist = specialist
        self.task = task
        self.reason = reason
        self.failures = failures


class DispatchBackingOff(Exception):
    """A failed dispatch whose next attempt is not due yet: nothing was called."""

    def __init__(self, task: str, retry_in_s: float) -> None:
        super().__init__(f"{task}: next attempt in {retry_in_s:.1f}s")
        self.task = task
        self.retry_in_s = retry_in_s


class DispatchDeadLettered(Exception):
    """The dispatch failed MAX_DISPATCH_FAILURES times; it waits for a person to replay it."""

    def __init__(self, dispatch_id: int, task: str, reason: str) -> None:
        super().__init__(
            f"dispatch {dispatch_id} for {task} dead-lettered after {MAX_DISPATCH_FAILURES} failures: {reason}"
        )
        self.dispatch_id = dispatch_id
        self.task = task
        self.reason = reason


MAX_DISPATCH_FAILURES = 3
RETRY_BACKOFF_S = (1.0, 4.0)  # before the 2nd and 3rd attempts


def retry_backoff_s(failures: int) -> float:
    return RETRY_BACKOFF_S[min(failures, len(RETRY_BACKOFF_S)) - 1]


@dataclass(frozen=True)
class DispatchOutcome:
    idempotency_key: str
    result: dict[str, Any]
    reused: bool


AGENT_PRINCIPALS = {
    "reconciliation": "reconciliation-agent",
    "accruals": "accruals-agent",
    "variance": "variance-agent",
}


class DispatchInFlight(Exception):
    """Another worker holds the dispatch's lease and is calling the specialist now: nothing was called."""

    def __init__(self, task: str, holder: str) -> None:
        super().__init__(f"{task}: another worker ({holder}) is calling the specialist")
        self.task = task
        self.holder = holder


# A claim on a dispatch lasts LEASE_S and is renewed every LEASE_S / 3 while the call runs, so a live caller keeps it
# through a call of any (bounded) length and a dead caller's claim passes to another worker within LEASE_S.
LEASE_S = 15.0
WAIT_POLL_S = 0.1  # how often a duplicate caller looks for the holder's result
MAX_WAIT_S = 600.0  # a duplicate caller waits at most this long for a holder that keeps renewing


async def dispatch_once(
    db: AsyncConnection[Any] | Connect,
    call: SpecialistCall,
    *,
    close_id: str,
    task: str,
    attempt: int,
    specialist: str,
    payload: dict[str, Any],
    actor: str,
    wait: bool = True,
    lease_s: float = LEASE_S,
) -> DispatchOutcome:
    """Call the specialist once per key, holding no connection and no lock while it works.

    `db` is a way to connect (each step takes a connection for one short transaction and gives it back) or a
    connection the caller keeps (used the same way; the caller holds it, we hold nothing on it during the call).
    The call is claimed with a lease row (`leased_by`, `lease_until`). A duplicate that finds a live lease waits for
    the holder's result when `wait` is true, or raises DispatchInFlight.
    """
    connect = connect_to(db)
    digest = input_digest(payload)
    key = dispatch_key(close_id, task, attempt, digest)
    holder = holder_id()
    waited_s = 0.0
    while True:
        async with connect() as conn:
            claim = await _claim(conn, key, close_id, task, attempt, specialist, digest, actor, holder, lease_s)
        if isinstance(claim, DispatchOutcome):
            return claim
        if claim is None:
            break
        if not wait or waited_s >= MAX_WAIT_S:
            raise DispatchInFlight(task, claim)
        await asyncio.sleep(WAIT_POLL_S)
        waited_s += WAIT_POLL_S
    return await _call_and_record(connect, call, key, holder, close_id, task, specialist, payload, actor, lease_s)


async def _claim(
    conn: AsyncConnection[Any],
    key: str,
    close_id: str,
    task: str,
    attempt: int,
    specialist: str,
    digest: str,
    actor: str,
    holder: str,
    lease_s: float,
) -> DispatchOutcome | str | None:
    """One short transaction: the stored result, or the live lease's holder (str), or None when the call is ours."""
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO dispatch (idempotency_key, close_id, task, attempt, specialist, input_digest)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (idempotency_key) DO NOTHING",
            (key, close_id, task, attempt, specialist, digest),
        )
        await cur.execute(
            "SELECT input_digest, status, result, dispatch_id, error, extract(epoch FROM next_attempt_at - now()),"
            " leased_by, lease_until > now() FROM dispatch WHERE idempotency_key = %s FOR UPDATE",
            (key,),
        )
        row = await cur.fetchone()
        assert row is not None
        stored_digest, status, stored_result, dispatch_id, error, wait_s, leased_by, lease_live = row
        if stored_digest != digest:
            raise DispatchConflict(key, stored_digest, digest)
        if status == "dead":
            raise DispatchDeadLettered(int(dispatch_id), task, str(error))
        if status == "completed":
            await append_event(
                conn,
                actor=actor,
                close_id=close_id,
                kind="dispatch_reused",
                payload={"task": task, "specialist": specialist, "idempotency_key": key},
            )
            return DispatchOutcome(key, dict(stored_result), reused=True)
        if lease_live:
            return str(leased_by)
        if status == "failed" and wait_s is not None and float(wait_s) > 0:
            raise DispatchBackingOff(task, float(wait_s))
        await cur.execute(
            "UPDATE dispatch SET calls = calls + 1, leased_by = %s, lease_until = now() + make_interval(secs => %s)"
            " WHERE idempotency_key = %s",
            (holder, lease_s, key),
        )
        await append_event(
            conn,
            actor=actor,
            close_id=close_id,
            kind="dispatched",
            payload={
                "task": task,
                "attempt": attempt,
                "to": AGENT_PRINCIPALS.get(specialist, specialist),
                "specialist": specialist,
                "idempotency_key": key,
                "input_digest": digest,
            },
        )
    return None


async def _renew_lease(connect: Connect, key: str, holder: str, lease_s: float) -> bool:
    async with connect() as conn, conn.cursor() as cur:
        await cur.execute(
            "UPDATE dispatch SET lease_until = now() + make_interval(secs => %s)"
            " WHERE idempotency_key = %s AND leased_by = %s AND status IN ('pending', 'failed') RETURNING dispatch_id",
            (lease_s, key, holder),
        )
        return await cur.fetchone() is not None


async def _call_and_record(
    connect: Connect,
    call: SpecialistCall,
    key: str,
    holder: str,
    close_id: str,
    task: str,
    specialist: str,
    payload: dict[str, Any],
    actor: str,
    lease_s: float,
) -> DispatchOutcome:
    try:
        async with renewing(lambda: _renew_lease(connect, key, holder, lease_s), every_s=lease_s / 3):
            result = await call(specialist, payload, key)
        kill_point("dispatch.after_call")
    except Exception as exc:
        raise await _record_failure(connect, key, holder, close_id, task, specialist, actor, exc) from exc
    async with connect() as conn, conn.transaction(), conn.cursor() as cur:
        # Ours if the row is not completed yet: our lease, or a lease that passed to a worker still calling (both
        # asked the same question under the same key). A second result for a completed dispatch changes nothing.
        await cur.execute(
            "UPDATE dispatch SET status = 'completed', result = %s, completed_at = now(), error = NULL,"
            " next_attempt_at = NULL, dead_lettered_at = NULL, leased_by = NULL, lease_until = NULL"
            " WHERE idempotency_key = %s AND status <> 'completed' RETURNING dispatch_id",
            (Jsonb(result), key),
        )
        if await cur.fetchone() is None:
            await cur.execute("SELECT result FROM dispatch WHERE idempotency_key = %s", (key,))
            stored = await cur.fetchone()
            assert stored is not None
            return DispatchOutcome(key, dict(stored[0]), reused=True)
        await append_event(
            conn,
            actor=AGENT_PRINCIPALS.get(specialist, specialist),
            close_id=close_id,
            kind="specialist_result",
            payload={"task": task, "to": actor, "idempotency_key": key, "summary": summarise(result)},
        )
    return DispatchOutcome(key, result, reused=False)


async def _record_failure(
    connect: Connect,
    key: str,
    holder: str,
    close_id: str,
    task: str,
    specialist: str,
    actor: str,
    exc: Exception,
) -> DispatchFailed | DispatchDeadLettered:
    """Count the failure (only while the lease is still ours); returns the DispatchFailed or DispatchDeadLettered to
    raise."""
    reason = f"{type(exc).__name__}: {exc}"[:2000]
    async with connect() as conn, conn.transaction(), conn.cursor() as cur:
        await cur.execute(
            "UPDATE dispatch SET failures = failures + 1,"
            " status = CASE WHEN failures + 1 >= %s THEN 'dead' ELSE 'failed' END, error = %s, completed_at = now(),"
            " next_attempt_at = now() + make_interval(secs => CASE WHEN failures + 1 >= %s THEN 0"
            "   ELSE (%s::float8[])[LEAST(failures + 1, %s)] END),"
            " dead_lettered_at = CASE WHEN failures + 1 >= %s THEN now() END, leased_by = NULL, lease_until = NULL"
            " WHERE idempotency_key = %s AND leased_by = %s AND status IN ('pending', 'failed')"
            " RETURNING dispatch_id, failures, status",
            (
                MAX_DISPATCH_FAILURES,
                reason,
                MAX_DISPATCH_FAILURES,
                list(RETRY_BACKOFF_S),
                len(RETRY_BACKOFF_S),
                MAX_DISPATCH_FAILURES,
                key,
                holder,
            ),
        )
        row = await cur.fetchone()
        if row is None:  # the lease passed to another worker, whose outcome counts: report ours, record nothing
            return DispatchFailed(specialist, task, f"{reason} (lease lost; not counted)")
        dispatch_id, failures, status = int(row[0]), int(row[1]), str(row[2])
        dead = status == "dead"
        await append_event(
            conn,
            actor=AGENT_PRINCIPALS.get(specialist, specialist),
            close_id=close_id,
            kind="dispatch_dead_lettered" if dead else "dispatch_failed",
            payload={
                "task": task,
                "specialist": specialist,
                "idempotency_key": key,
                "failures": failures,
                "error": reason[:500],
                "to": actor,
            },
        )
    if dead:
        return DispatchDeadLettered(dispatch_id, task, reason)
    return DispatchFailed(specialist, task, reason, failures)


async def dispatch_in_flight(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> bool:
    """Whether a live lease says another worker is calling the specialist for this task's attempt right now."""
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT 1 FROM dispatch WHERE close_id = %s AND task = %s AND attempt = %s"
            " AND status IN ('pending', 'failed') AND lease_until > now() LIMIT 1",
            (close_id, task, attempt),
        )
        return await cur.fetchone() is not None


def summarise(result: Mapping[str, Any]) -> dict[str, Any]:
    """A short, trace-sized view of a specialist result (the full result is in the dispatch row)."""
    keep = ("kind", "halted", "halt_reason", "total", "receipts", "difference", "within_tolerance")
    summary = {key: result[key] for key in keep if key in result}
    if "accounts" in result:
        summary["accounts"] = [
            {k: a.get(k) for k in ("account", "bank_lines", "matched", "unmatched_share", "halt")}
            for a in result["accounts"]
        ]
    if "flagged" in result:
        summary["flagged"] = len(result["flagged"])
    return summary


async def dead_letters(conn: AsyncConnection[Any], close_id: str) -> list[dict[str, Any]]:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT dispatch_id, task, attempt, specialist, failures, error, dead_lettered_at FROM dispatch"
            " WHERE close_id = %s AND status = 'dead' ORDER BY dispatch_id",
            (close_id,),
        )
        rows = await cur.fetchall()
    return [
        {
            "dispatch_id": int(r[0]),
            "task": r[1],
            "attempt": int(r[2]),
            "specialist": r[3],
            "failures": int(r[4]),
            "error": r[5],
            "dead_lettered_at": r[6].isoformat() if r[6] else None,
        }
        for r in rows
    ]


class NotDeadLettered(LookupError):
    def __init__(self, dispatch_id: int) -> None:
        super().__init__(f"dispatch {dispatch_id} is not dead-lettered (or does not exist)")
        self.dispatch_id = dispatch_id


async def replay_dead_letter(conn: AsyncConnection[Any], dispatch_id: int, *, actor: str) -> tuple[str, str]:
    """Give a dead-lettered dispatch three fresh attempts and put its task back in the queue."""
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(
            "UPDATE dispatch SET status = 'failed', failures = 0, next_attempt_at = NULL, dead_lettered_at = NULL"
            " WHERE dispatch_id = %s AND status = 'dead' RETURNING close_id, task",
            (dispatch_id,),
        )
        row = await cur.fetchone()
        if row is None:
            raise NotDeadLettered(dispatch_id)
        close_id, task = str(row[0]), str(row[1])
        await cur.execute(
            "UPDATE close_task SET status = 'pending', reason = %s, updated_at = now()"
            " WHERE close_id = %s AND task = %s AND status = 'failed'",
            (f"replayed dispatch {dispatch_id}", close_id, task),
        )
        await append_event(
            conn,
            actor=actor,
            close_id=close_id,
            kind="dispatch_replayed",
            payload={"dispatch_id": dispatch_id, "task": task, "to": "orchestrator"},
        )
    return close_id, task
