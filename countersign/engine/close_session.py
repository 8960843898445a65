"""The close's connection and advisory lock, held for database work only (the lock's statements:
countersign/store/close_locks.py)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.leases import Connect
from countersign.store import close_locks


def _lock_key(close_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"close:{close_id}".encode()).digest()[:8], "big", signed=True)


class CloseSession:
    """The close's connection and advisory lock, held for database work only.

    Both are let go around every call to a specialist (`let_go`): a slow or hung specialist holds no connection and
    no lock. The dispatch's own lease row keeps the call single; the lock keeps two workers from interleaving the
    database steps of one close.
    """

    def __init__(self, connect: Connect, close_id: str) -> None:
        self.connect = connect
        self._key = _lock_key(close_id)
        self._held: AbstractAsyncContextManager[AsyncConnection[Any]] | None = None
        self._conn: AsyncConnection[Any] | None = None

    @property
    def conn(self) -> AsyncConnection[Any]:
        assert self._conn is not None, "the close session is let go"
        return self._conn

    async def acquire(self, *, wait: bool) -> bool:
        held = self.connect()
        conn = await held.__aenter__()
        try:
            if wait:
                await close_locks.lock_close(conn, self._key)
                locked = True
            else:
                locked = await close_locks.try_lock_close(conn, self._key)
        except BaseException:
            await held.__aexit__(None, None, None)
            raise
        if not locked:
            await held.__aexit__(None, None, None)
            return False
        self._held, self._conn = held, conn
        return True

    async def release(self) -> None:
        held, conn = self._held, self._conn
        self._held = self._conn = None
        if held is None or conn is None:
            return
        try:
            if not conn.closed:
                await close_locks.unlock_close(conn, self._key)
        finally:
            await held.__aexit__(None, None, None)

    @asynccontextmanager
    async def let_go(self) -> AsyncIterator[None]:
        await self.release()
        try:
            yield
        finally:
            await self.acquire(wait=True)
