"""Group sealing: many concurrent requests share one `seal_pending` run instead of each running its own.

A request that appended trace events and committed calls `await sealer.seal()`. The call returns once a sealing run
that *started after the call* has finished, so every event the caller committed before calling has been chained
(or another process held the sealer's lock, in which case that process seals them, as with `seal_pending`). Calls
that arrive while a run is in progress are served together by the next run: under load one sealing transaction
chains the events of many decisions, and each request waits for at most two runs.

The sealer keeps its own connection, opened on first use and reopened after an error, so it never competes with
the requests it serves for a pool connection (a request may wait for the seal while holding one).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import seal_pending

Connect = Callable[[], Awaitable[AsyncConnection[Any]]]


class GroupSealer:
    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._conn: AsyncConnection[Any] | None = None
        self._next_run: asyncio.Future[int] | None = None
        self._runner: asyncio.Task[None] | None = None
        self.runs = 0

    async def seal(self) -> int:
        """Wait until a sealing run that started after this call has finished; return how many events it sealed.

        Raises what the run raised (e.g. the database went away); the events stay queued for the next run.
        """
        if self._next_run is None:
            self._next_run = asyncio.get_running_loop().create_future()
        waiting_for = self._next_run
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run_while_asked())
        return await asyncio.shield(waiting_for)

    async def _run_while_asked(self) -> None:
        while self._next_run is not None:
            current, self._next_run = self._next_run, None
            try:
                sealed = await self._seal_once()
            except Exception as exc:  # handed to every waiter of this run; the sealer itself carries on
                current.set_exception(exc)
                current.add_done_callback(_mark_retrieved)
            else:
                current.set_result(sealed)

    async def _seal_once(self) -> int:
        if self._conn is None or self._conn.closed:
            self._conn = await self._connect()
        try:
            sealed = await seal_pending(self._conn)
        except Exception:
            await self._drop_connection()
            raise
        self.runs += 1
        return sealed

    async def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
        self._conn = None

    async def close(self) -> None:
        """Finish the run in progress (its waiters get their answer), then close the connection."""
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner
        await self._drop_connection()


def _mark_retrieved(future: asyncio.Future[int]) -> None:
    if not future.cancelled():
        future.exception()  # every waiter may have gone away; do not log "exception was never retrieved"
