"""A close's session advisory lock: the lock that keeps two workers from interleaving the database steps of one close.

Touches no table. Called by countersign/engine/close_session.py on the close's own connection, which holds the lock
for as long as it is open (a session lock: a transaction's end does not release it).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection


async def lock_close(conn: AsyncConnection[Any], key: int) -> None:
    """Waits until this connection holds the close's lock `key`."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_advisory_lock(%s)", (key,))


async def try_lock_close(conn: AsyncConnection[Any], key: int) -> bool:
    """Returns whether this connection now holds the close's lock `key` (False at once when another holds it)."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_try_advisory_lock(%s) AS locked", (key,))
        (locked,) = await cur.fetchone() or (False,)
    return bool(locked)


async def unlock_close(conn: AsyncConnection[Any], key: int) -> None:
    """Lets go of the close's lock `key` held by this connection."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
