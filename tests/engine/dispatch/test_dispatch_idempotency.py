"""Dispatch: one row per key, stored results returned, no work done twice — including under concurrency."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from countersign.engine.dispatch import DispatchConflict, dispatch_key, dispatch_once, input_digest
from countersign.specialists.client import open_in_process
from tests.support import count, start_default_close


class CountingSpecialist:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[str] = []
        self.delay_s = delay_s

    async def __call__(self, specialist: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
        self.calls.append(key)
        await asyncio.sleep(self.delay_s)
        return {"kind": "echo", "n": payload["n"], "halted": False}


@pytest.fixture
async def close_id(conn: Any, runtime: Any, default_books: Any) -> str:
    return await start_default_close(conn, runtime, default_books)


async def test_repeated_dispatch_returns_the_stored_result_without_calling_again(conn: Any, close_id: str) -> None:
    specialist = CountingSpecialist()
    args = dict(
        close_id=close_id,
        task="ap_reconciliation",
        attempt=1,
        specialist="reconciliation",
        payload={"n": 1},
        actor="orchestrator",
    )
    first = await dispatch_once(conn, specialist, **args)  # type: ignore[arg-type]
    second = await dispatch_once(conn, specialist, **args)  # type: ignore[arg-type]
    assert not first.reused and second.reused
    assert first.result == second.result
    assert len(specialist.calls) == 1
    assert await count(conn, "SELECT count(*) FROM dispatch") == 1


async def test_key_derives_from_close_task_attempt_and_input_digest(conn: Any, close_id: str) -> None:
    specialist = CountingSpecialist()
    base = dict(close_id=close_id, task="ap_reconciliation", specialist="reconciliation", actor="orchestrator")
    a = await dispatch_once(conn, specialist, attempt=1, payload={"n": 1}, **base)  # type: ignore[arg-type]
    b = await dispatch_once(conn, specialist, attempt=2, payload={"n": 1}, **base)  # type: ignore[arg-type]
    c = await dispatch_once(conn, specialist, attempt=1, payload={"n": 2}, **base)  # type: ignore[arg-type]
    assert len({a.idempotency_key, b.idempotency_key, c.idempotency_key}) == 3
    assert a.idempotency_key == dispatch_key(close_id, "ap_reconciliation", 1, input_digest({"n": 1}))
    assert specialist.calls == [a.idempotency_key, b.idempotency_key, c.idempotency_key]


async def test_concurrent_duplicate_dispatches_do_the_work_once(database: Any, close_id: str) -> None:
    specialist = CountingSpecialist(delay_s=0.2)

    async def one() -> Any:
        async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as own:
            return await dispatch_once(
                own,
                specialist,
                close_id=close_id,
                task="ap_reconciliation",
                attempt=1,
                specialist="reconciliation",
                payload={"n": 7},
                actor="orchestrator",
            )

    outcomes = await asyncio.gather(*(one() for _ in range(12)))
    assert len(specialist.calls) == 1
    assert sum(not o.reused for o in outcomes) == 1
    assert {o.result["n"] for o in outcomes} == {7}
    async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as check:
        assert await count(check, "SELECT count(*) FROM dispatch") == 1
        assert await count(check, "SELECT calls FROM dispatch") == 1


async def test_a_stored_key_with_a_different_input_digest_is_refused(conn: Any, close_id: str) -> None:
    key = dispatch_key(close_id, "ap_reconciliation", 1, input_digest({"n": 1}))
    await conn.execute(
        "INSERT INTO dispatch (idempotency_key, close_id, task, attempt, specialist, input_digest)"
        " VALUES (%s, %s, 'ap_reconciliation', 1, 'reconciliation', 'tampered')",
        (key, close_id),
    )
    with pytest.raises(DispatchConflict):
        await dispatch_once(
            conn,
            CountingSpecialist(),
            close_id=close_id,
            task="ap_reconciliation",
            attempt=1,
            specialist="reconciliation",
            payload={"n": 1},
            actor="orchestrator",
        )


async def test_the_idempotency_key_travels_to_the_a2a_specialist(conn: Any, close_id: str) -> None:
    seen: list[dict[str, Any]] = []

    def handler(payload: dict[str, Any]) -> dict[str, Any]:
        from countersign.specialists.server import current_idempotency_key

        seen.append({"key": current_idempotency_key(), "payload": payload})
        return {"kind": "echo", "halted": False}

    async with open_in_process({"reconciliation": handler}) as client:
        outcome = await dispatch_once(
            conn,
            client.call,
            close_id=close_id,
            task="ap_reconciliation",
            attempt=1,
            specialist="reconciliation",
            payload={"marker": str(uuid.uuid4())},
            actor="orchestrator",
        )
    assert seen and seen[0]["key"] == outcome.idempotency_key
