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
    def __init__(self, specialist: str, task: str, reason: str) -> None:
        super().__init__(f"{specialist} failed on {task}: {reason}")
        self.specialist = specialist
        self.task = task
        self.reason = reason


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
        await cur.execute("SELECT status, result FROM dispatch WHERE idempotency_key = %s", (key,))
        row = await cur.fetchone()
    assert row is not None
    status, stored_result = row
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
        async with conn.transaction():
            async with conn.cursor() as cur:
                await cur.execute(
                    "UPDATE dispatch SET status = 'failed', error = %s, completed_at = now()"
                    " WHERE idempotency_key = %s AND status = 'pending'",
                    (str(exc)[:2000], key),
                )
            await append_event(
                conn,
                actor=AGENT_PRINCIPALS.get(specialist, specialist),
                close_id=close_id,
                kind="dispatch_failed",
                payload={
                    "task": task,
                    "specialist": specialist,
                    "idempotency_key": key,
                    "error": str(exc)[:500],
                },
            )
        raise DispatchFailed(specialist, task, str(exc)) from exc
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
