"""One worker pass: advance every runnable close, then announce and deliver; a stopping worker starts nothing new."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from countersign.engine.leases import Connect
from countersign.engine.runs import runnable_close_ids
from countersign.engine.worker import run_worker_pass
from tests.support import start_default_close


@dataclass
class Delivered:
    sent: int = 0
    retried: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


class RecordingDeliverer:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, connect: Connect) -> Delivered:
        self.calls += 1
        async with connect() as conn:  # the deliverer gets a way to connect, not a held connection
            await conn.execute("SELECT 1")
        return Delivered(sent=3)


def _connect(url: str) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            yield conn

    return connect


async def test_a_pass_advances_each_runnable_close_then_delivers_once(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    deliver = RecordingDeliverer()
    heard: list[str] = []

    report = await run_worker_pass(
        _connect(runtime.database.engine_url), engine_ctx, deliver, on_advanced=lambda r: heard.append(r.close_id)
    )

    assert [advanced.close_id for advanced in report.advanced] == [close_id] == heard
    assert report.advanced[0].steps  # the close moved
    assert deliver.calls == 1 and report.delivery is not None and report.delivery.sent == 3
    assert not report.stopped


async def test_a_stopping_worker_advances_nothing_and_delivers_nothing(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path
) -> None:
    await start_default_close(conn, runtime, default_books)
    deliver = RecordingDeliverer()

    report = await run_worker_pass(_connect(runtime.database.engine_url), engine_ctx, deliver, should_stop=lambda: True)

    assert report.stopped and report.advanced == [] and report.delivery is None and deliver.calls == 0


async def test_a_pass_limited_to_one_close_leaves_the_others_alone(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    other = str(uuid.uuid4())
    assert await runnable_close_ids(conn) == [close_id]
    assert await runnable_close_ids(conn, other) == []

    report = await run_worker_pass(
        _connect(runtime.database.engine_url), engine_ctx, RecordingDeliverer(), only_close=other
    )

    assert report.advanced == [] and report.delivery is not None
