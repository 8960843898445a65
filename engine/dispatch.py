"""Idempotent dispatch to specialists.

A2A cannot carry idempotency (the server assigns task ids, and a finished task cannot be continued), so the key
travels in the message metadata and the guarantee lives in our own table: `dispatch.idempotency_key` is UNIQUE.
A repeated dispatch with a completed row returns the stored result and calls nobody.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from audit.killpoints import kill_point
from audit.trace import append_event

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


async def dispatch_once(
    conn: AsyncConnection[Any],
    call: SpecialistCall,
    *,
    close_id: str,
    task: str,
    attempt: int,
    specialist: str,
    payload: dict[str, Any],
    actor: str,
) -> DispatchOutcome:
    digest = input_digest(payload)
    key = dispatch_key(close_id, task, attempt, digest)
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO dispatch (idempotency_key, close_id, task, attempt, specialist, input_digest)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (idempotency_key) DO NOTHING",
            (key, close_id, task, attempt, specialist, digest),
        )
        await cur.execute("SELECT input_digest, status, result FROM dispatch WHERE idempotency_key = %s", (key,))
        row = await cur.fetchone()
    assert row is not None
    if row[0] != digest:
        raise DispatchConflict(key, row[0], digest)
    # One caller at a time per key: a concurrent duplicate waits here, then finds the stored result.
    # A session lock dies with its connection, so a killed process never leaves a key stuck.
    lock = _lock_id(key)
    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_advisory_lock(%s)", (lock,))
    try:
        return await _dispatch_locked(conn, call, key, close_id, task, attempt, specialist, payload, digest, actor)
    finally:
        async with conn.cursor() as cur:
            await cur.execute("SELECT pg_advisory_unlock(%s)", (lock,))


def _lock_id(key: str) -> int:
    return int.from_bytes(bytes.fromhex(key)[:8], "big", signed=True)


async def _dispatch_locked(
    conn: AsyncConnection[Any],
    call: SpecialistCall,
    key: str,
    close_id: str,
    task: str,
    attempt: int,
    specialist: str,
    payload: dict[str, Any],
    digest: str,
    actor: str,
) -> DispatchOutcome:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT status, result, failures, dispatch_id, error,"
            " extract(epoch FROM next_attempt_at - now()) FROM dispatch WHERE idempotency_key = %s",
            (key,),
        )
        row = await cur.fetchone()
    assert row is not None
    status, stored_result, failures, dispatch_id, error, wait_s = row
    if status == "dead":
        raise DispatchDeadLettered(int(dispatch_id), task, str(error))
    if status == "failed" and wait_s is not None and float(wait_s) > 0:
        raise DispatchBackingOff(task, float(wait_s))
    if status == "completed":
        async with conn.transaction():
            await append_event(
                conn,
                actor=actor,
                close_id=close_id,
                kind="dispatch_reused",
                payload={"task": task, "specialist": specialist, "idempotency_key": key},
            )
        return DispatchOutcome(key, dict(stored_result), reused=True)

    async with conn.transaction():
        async with conn.cursor() as cur:
            await cur.execute("UPDATE dispatch SET calls = calls + 1 WHERE idempotency_key = %s", (key,))
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
    try:
        result = await call(specialist, payload, key)
        kill_point("dispatch.after_call")
    except Exception as exc:
        failures = int(failures) + 1
        dead = failures >= MAX_DISPATCH_FAILURES
        reason = f"{type(exc).__name__}: {exc}"[:2000]
        async with conn.transaction():
            async with conn.cursor() as cur:
                await cur.execute(
                    "UPDATE dispatch SET status = %s, error = %s, failures = %s, completed_at = now(),"
                    " next_attempt_at = now() + make_interval(secs => %s),"
                    " dead_lettered_at = CASE WHEN %s THEN now() END"
                    " WHERE idempotency_key = %s AND status IN ('pending', 'failed')",
                    (
                        "dead" if dead else "failed",
                        reason,
                        failures,
                        0 if dead else retry_backoff_s(failures),
                        dead,
                        key,
                    ),
                )
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
            raise DispatchDeadLettered(int(dispatch_id), task, reason) from exc
        raise DispatchFailed(specialist, task, reason, failures) from exc
    async with conn.transaction():
        async with conn.cursor() as cur:
            await cur.execute(
                "UPDATE dispatch SET status = 'completed', result = %s, completed_at = now()"
                " WHERE idempotency_key = %s AND status <> 'completed' RETURNING dispatch_id",
                (Jsonb(result), key),
            )
            won = await cur.fetchone()
            if won is None:  # another process completed the same dispatch first: its result is the result
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
