"""A construction set is received when it is loaded (migration 0032): no service role dates it.

Every notice deadline follows from the day an application was received (the set's `loaded_at`), so a role that could
choose it could make a late payment notice read as timely (dated forward) or a timely one as late (dated back).
Real PostgreSQL; the inserts run as the engine's and the callbacks' own roles, and the owner's hand-written history
is the control that the trigger does not just ignore what it is given.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection

_INSERT = (
    "INSERT INTO construction_set (source, digest, loaded_by, loaded_at)"
    " VALUES (%s, %s, 'attacker', now() + make_interval(days => %s)) RETURNING set_id, loaded_at, now()"
)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("days", [30, -30])
async def test_the_engine_role_cannot_date_a_set_forward_or_back(database: Any, days: int) -> None:
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        cur = await engine.execute(_INSERT, (f"dated {days}", _digest(f"dated {days}"), days))
        ((_, loaded_at, now),) = await cur.fetchall()
    assert loaded_at == now  # the transaction's own time, not the one it asked for


async def test_the_callbacks_role_cannot_insert_a_set_at_all(database: Any) -> None:
    async with await AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await callbacks.execute(_INSERT, ("doors", _digest("doors"), 30))


async def test_the_engine_role_cannot_switch_the_trigger_off_or_replace_it(database: Any) -> None:
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        for statement in (
            "ALTER TABLE construction_set DISABLE TRIGGER construction_set_received_now",
            "DROP TRIGGER construction_set_received_now ON construction_set",
            "CREATE OR REPLACE FUNCTION public.construction_set_received_now() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN NEW; END $$",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await engine.execute(statement)


async def test_the_owner_may_still_write_history_by_hand(conn: Any) -> None:
    """Control: the owner (restores, the tests' late sets) keeps the date it writes."""
    cur = await conn.execute(_INSERT, ("history", _digest("history"), -30))
    ((_, loaded_at, now),) = await cur.fetchall()
    assert (now - loaded_at).days == 30
