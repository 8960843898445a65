"""Group sealing: a caller's committed events are chained when `seal()` returns, and concurrent callers share runs."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

import countersign.audit.sealer as sealer_module
from countersign.audit.sealer import GroupSealer
from countersign.audit.trace import append_event, verify_chain
from tests.support import count


def _sealer(database: Any) -> GroupSealer:
    return GroupSealer(lambda: psycopg.AsyncConnection.connect(database.url, autocommit=True))


async def _append(conn: Any, label: str) -> None:
    async with conn.transaction():
        await append_event(conn, actor="alice.chen", kind="step", payload={"label": label})


async def _sealed(conn: Any, label: str) -> bool:
    return bool(await count(conn, "SELECT count(*) FROM trace_event WHERE payload->>'label' = %s", label))


async def test_many_concurrent_callers_are_all_sealed_by_few_runs(conn: Any, database: Any) -> None:
    sealer = _sealer(database)
    connections = [await psycopg.AsyncConnection.connect(database.url, autocommit=True) for _ in range(16)]

    async def decide(own: Any, first: int) -> None:
        for index in range(first, first + 4):
            await _append(own, f"event-{index}")
            await sealer.seal()
            assert await _sealed(own, f"event-{index}"), f"event-{index} not chained when seal() returned"

    try:
        await asyncio.gather(*(decide(own, 4 * number) for number, own in enumerate(connections)))
    finally:
        for own in connections:
            await own.close()
        await sealer.close()
    assert await count(conn, "SELECT count(*) FROM trace_event") == 64
    assert await count(conn, "SELECT count(*) FROM trace_pending") == 0
    assert sealer.runs < 64
    assert (await verify_chain(conn)).ok


async def test_a_caller_arriving_during_a_run_waits_for_the_next_one(
    conn: Any, database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run in progress may have read the queue before the caller's event committed; joining it would be wrong."""
    real_seal_pending = sealer_module.seal_pending
    first_run_has_read = asyncio.Event()
    let_first_run_finish = asyncio.Event()

    async def slow_first_run(connection: Any) -> int:
        sealed = await real_seal_pending(connection)
        if not first_run_has_read.is_set():
            first_run_has_read.set()
            await let_first_run_finish.wait()
        return sealed

    monkeypatch.setattr(sealer_module, "seal_pending", slow_first_run)
    sealer = _sealer(database)
    try:
        await _append(conn, "early")
        first = asyncio.create_task(sealer.seal())
        await first_run_has_read.wait()
        await _append(conn, "late")
        second = asyncio.create_task(sealer.seal())
        await asyncio.sleep(0)
        let_first_run_finish.set()
        await first
        await second
        assert await _sealed(conn, "late")
        assert sealer.runs == 2
    finally:
        await sealer.close()


async def test_a_failed_run_reaches_its_callers_and_the_next_run_recovers(
    conn: Any, database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_seal_pending = sealer_module.seal_pending
    failures = [RuntimeError("database went away")]

    async def fail_once(connection: Any) -> int:
        if failures:
            raise failures.pop()
        return await real_seal_pending(connection)

    monkeypatch.setattr(sealer_module, "seal_pending", fail_once)
    sealer = _sealer(database)
    try:
        await _append(conn, "kept")
        with pytest.raises(RuntimeError, match="database went away"):
            await sealer.seal()
        assert await count(conn, "SELECT count(*) FROM trace_pending") == 1  # nothing lost: still queued
        assert await sealer.seal() == 1
        assert await _sealed(conn, "kept")
    finally:
        await sealer.close()
