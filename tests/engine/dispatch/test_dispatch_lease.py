"""Dispatch claims a lease row, not a connection: a hung specialist holds no connection and no lock.

Issue 9: `dispatch` held a pool connection and an advisory lock across an A2A call of up to 120 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from countersign.engine.dispatch import DispatchInFlight, _call_and_record, dispatch_key, dispatch_once, input_digest
from countersign.engine.orchestrator import EngineContext, advance
from countersign.specialists.client import open_in_process
from tests.support import count, start_default_close

ENGINE_ROLE = "countersign_engine"
SHORT_LEASE_S = 3.0  # renewed every second; a loaded machine still renews well inside it
BOUND_S = 300.0  # hang guard on waits for a state; no assertion here is about speed


async def _lease_until(owner: Any) -> Any:
    row = await (await owner.execute("SELECT max(lease_until) FROM dispatch WHERE leased_by IS NOT NULL")).fetchone()
    assert row is not None and row[0] is not None
    return row[0]


async def _outlived(owner: Any, until: Any) -> bool:
    row = await (await owner.execute("SELECT clock_timestamp() > %s", (until,))).fetchone()
    return bool(row and row[0])


class HangingSpecialist:
    """Blocks the first call until released; answers like the real specialists after that."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def __call__(self, specialist: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
        self.calls += 1
        self.entered.set()
        await self.release.wait()
        return dict(await self.client.call(specialist, payload, key))


async def _engine_sessions(owner: Any) -> tuple[int, int, int]:
    """(engine connections, of those idle in a transaction, advisory locks held by anyone) in this database."""
    row = await (
        await owner.execute(
            "SELECT count(*), count(*) FILTER (WHERE state LIKE 'idle in transaction%%'),"
            " (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database ="
            "   (SELECT oid FROM pg_database WHERE datname = current_database()))"
            " FROM pg_stat_activity WHERE usename = %s AND datname = current_database()",
            (ENGINE_ROLE,),
        )
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


async def test_a_hanging_specialist_holds_no_engine_connection_and_no_lock(
    conn: Any, database: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)

    @asynccontextmanager
    async def connect() -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
            yield engine

    async with open_in_process() as client:
        specialist = HangingSpecialist(client)
        ctx = EngineContext(runtime.policy, runtime.workflows, specialist)
        advancing = asyncio.create_task(advance(connect, close_id, ctx))
        await asyncio.wait_for(specialist.entered.wait(), timeout=BOUND_S)
        await asyncio.sleep(0.3)  # the specialist is "working"
        try:
            assert await _engine_sessions(conn) == (0, 0, 0)
            leased = await (await conn.execute("SELECT leased_by, lease_until > now() FROM dispatch")).fetchone()
            assert leased is not None and leased[0] and leased[1]  # the lease row is the claim
        finally:
            specialist.release.set()
        report = await asyncio.wait_for(advancing, timeout=BOUND_S)
    assert not report.busy and any("awaiting" in step or "HALTED" in step for step in report.steps)
    assert await count(conn, "SELECT count(*) FROM dispatch WHERE leased_by IS NOT NULL") == 0


async def test_a_borrowed_connection_is_idle_and_unlocked_while_the_specialist_works(
    conn: Any, database: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    async with (
        await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as engine,
        open_in_process() as client,
    ):
        specialist = HangingSpecialist(client)
        advancing = asyncio.create_task(
            advance(engine, close_id, EngineContext(runtime.policy, runtime.workflows, specialist))
        )
        await asyncio.wait_for(specialist.entered.wait(), timeout=BOUND_S)
        try:
            assert await _engine_sessions(conn) == (1, 0, 0)  # the caller's connection: idle, no lock
        finally:
            specialist.release.set()
        await asyncio.wait_for(advancing, timeout=BOUND_S)


async def _echo(specialist: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
    return {"kind": "echo", "n": payload["n"], "halted": False}


ARGS = dict(task="ap_reconciliation", attempt=1, specialist="reconciliation", actor="orchestrator")


async def test_a_dead_holders_lease_expires_and_another_worker_takes_the_call_over(
    conn: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    key = dispatch_key(close_id, "ap_reconciliation", 1, input_digest({"n": 3}))
    await conn.execute(
        "INSERT INTO dispatch (idempotency_key, close_id, task, attempt, specialist, input_digest, calls, leased_by,"
        " lease_until) VALUES (%s, %s, 'ap_reconciliation', 1, 'reconciliation', %s, 1, 'killed-worker',"
        " now() + interval '1 hour')",
        (key, close_id, input_digest({"n": 3})),
    )
    with pytest.raises(DispatchInFlight, match="killed-worker"):
        await dispatch_once(conn, _echo, close_id=close_id, payload={"n": 3}, wait=False, **ARGS)  # type: ignore[arg-type]
    assert await count(conn, "SELECT calls FROM dispatch") == 1  # nobody called while the lease was live

    await conn.execute("UPDATE dispatch SET lease_until = now() - interval '1 second'")  # the holder died
    outcome = await dispatch_once(conn, _echo, close_id=close_id, payload={"n": 3}, **ARGS)  # type: ignore[arg-type]
    assert not outcome.reused and outcome.result["n"] == 3
    row = await (await conn.execute("SELECT status, calls, leased_by FROM dispatch")).fetchone()
    assert row == ("completed", 2, None)

    # The dead worker's answer arrives late: a second result for a completed dispatch changes nothing.
    async def late(specialist: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
        return {"kind": "echo", "n": 999, "halted": False}

    @asynccontextmanager
    async def lend() -> AsyncIterator[Any]:
        yield conn

    stale = await _call_and_record(
        lend,
        late,
        key,
        "killed-worker",
        close_id,
        "ap_reconciliation",
        "reconciliation",
        {"n": 3},
        "orchestrator",
        15.0,
    )
    assert stale.reused and stale.result["n"] == 3
    assert await count(conn, "SELECT (result->>'n')::int FROM dispatch") == 3
    assert (
        await count(conn, "SELECT count(*) FROM trace_pending WHERE kind = 'specialist_result'")
        + await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'specialist_result'")
        == 1
    )


async def test_a_duplicate_waits_for_the_live_holders_result_without_calling(
    conn: Any, database: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    release = asyncio.Event()
    calls: list[str] = []

    async def slow(specialist: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
        calls.append(key)
        await release.wait()
        return {"kind": "echo", "n": payload["n"], "halted": False}

    async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as other:
        first = asyncio.create_task(
            dispatch_once(conn, slow, close_id=close_id, payload={"n": 5}, lease_s=SHORT_LEASE_S, **ARGS)
        )  # type: ignore[arg-type]
        while not calls:
            await asyncio.sleep(0.05)
        first_until = await _lease_until(conn)
        second = asyncio.create_task(dispatch_once(other, slow, close_id=close_id, payload={"n": 5}, **ARGS))  # type: ignore[arg-type]
        # Past the first claim's expiry by the database's clock: only the holder's renewals can keep the lease.
        deadline = time.monotonic() + BOUND_S
        while not await _outlived(conn, first_until):
            assert time.monotonic() < deadline, "the first lease never expired by the database's clock"
            await asyncio.sleep(0.1)
        release.set()
        a, b = await asyncio.gather(first, second)
    assert len(calls) == 1
    assert not a.reused and b.reused and a.result == b.result
