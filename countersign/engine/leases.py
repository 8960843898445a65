"""Leases: how a worker claims a row for a call to a third party without holding a connection or a lock through it.

A claim is a short transaction that writes who holds the row (`holder_id()`) and until when; the connection goes back
before the call starts. While the call runs, `renewing` extends the lease in the background with brief transactions,
so a live holder keeps its claim however long the (bounded) call takes, and a holder that dies loses it within one
lease period: another worker then takes the row over.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Any

from psycopg import AsyncConnection

log = logging.getLogger("countersign.leases")

# A way to get a connection for one short piece of work: a pool's `connection()`, or a fresh connect. Functions that
# call third parties take one of these instead of a connection, so they can give the connection back around the call.
Connect = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]


def holder_id() -> str:
    """Names one claim: host, process and a random part, so two claims in one process never look alike."""
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def connect_to(db: AsyncConnection[Any] | Connect) -> Connect:
    """A `Connect` for either form: a borrowed connection (the caller keeps it) or a way to connect."""
    if isinstance(db, AsyncConnection):
        borrowed = db

        @asynccontextmanager
        async def lend() -> AsyncIterator[AsyncConnection[Any]]:
            yield borrowed

        return lend
    return db


@asynccontextmanager
async def renewing(renew: Callable[[], Awaitable[bool]], *, every_s: float) -> AsyncIterator[None]:
    """Call `renew` every `every_s` seconds while the body runs; stop when it returns False (the lease is gone)."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                if not await renew():
                    return
            except Exception:  # a failed renewal only shortens the lease; the call itself goes on
                log.warning("renewing a lease failed", exc_info=True)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
