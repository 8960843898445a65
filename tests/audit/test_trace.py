"""The close trace: append-only in the database, hash-chained, and verification names the first bad event."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.audit.canonical import NonCanonicalValue, canonical_bytes
from countersign.audit.trace import append_event, seal_pending, verify_chain
from tests.support import count


async def _append(conn: Any, n: int) -> None:
    for i in range(n):
        async with conn.transaction():
            await append_event(conn, actor="orchestrator", kind="step", payload={"i": i, "amount": Decimal("1.50")})
    await seal_pending(conn)


async def test_update_delete_and_truncate_raise(conn: Any) -> None:
    await _append(conn, 2)
    for statement in (
        "UPDATE trace_event SET actor = 'x'",
        "DELETE FROM trace_event",
        "TRUNCATE trace_event",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            await conn.execute(statement)
    assert await count(conn, "SELECT count(*) FROM trace_event") == 2


async def test_triggers_fire_even_in_replica_mode(conn: Any) -> None:
    await _append(conn, 1)
    await conn.execute("SET session_replication_role = replica")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await conn.execute("DELETE FROM trace_event")


async def test_verify_accepts_an_untouched_chain(conn: Any) -> None:
    await _append(conn, 5)
    result = await verify_chain(conn)
    assert result.ok and result.size == 5


async def test_verify_names_the_first_edited_event(conn: Any) -> None:
    await _append(conn, 5)
    await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER trace_event_append_only")
    await conn.execute("""UPDATE trace_event SET payload = '{"i": 99, "amount": "1.50"}' WHERE seq = 3""")
    result = await verify_chain(conn)
    assert not result.ok and result.first_bad_seq == 3


async def test_verify_notices_a_dropped_tail(conn: Any) -> None:
    await _append(conn, 5)
    await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER trace_event_append_only")
    await conn.execute("DELETE FROM trace_event WHERE seq = 5")
    result = await verify_chain(conn)
    assert not result.ok and result.first_bad_seq == 5


async def test_rolled_back_effects_leave_no_gap(conn: Any) -> None:
    await _append(conn, 1)
    with pytest.raises(RuntimeError):
        async with conn.transaction():
            await append_event(conn, actor="orchestrator", kind="doomed", payload={})
            raise RuntimeError("effect failed")
    await _append(conn, 1)
    assert [r[0] for r in await (await conn.execute("SELECT seq FROM trace_event ORDER BY seq")).fetchall()] == [1, 2]
    assert (await verify_chain(conn)).ok


async def test_concurrent_appends_stay_gap_free_and_verifiable(database: Any, conn: Any) -> None:
    async def writer(n: int) -> None:
        async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as own:
            await _append(own, n)

    await asyncio.gather(*(writer(10) for _ in range(8)))
    assert await count(conn, "SELECT max(seq) FROM trace_event") == 80
    assert (await verify_chain(conn)).ok


def test_floats_have_no_canonical_form() -> None:
    with pytest.raises(NonCanonicalValue):
        canonical_bytes({"amount": 1.5})


@given(
    st.dictionaries(
        st.text(max_size=8),
        st.one_of(st.text(max_size=8), st.integers(-(2**53) + 1, 2**53 - 1), st.booleans(), st.none()),
        max_size=6,
    )
)
def test_canonical_bytes_ignore_key_order(data: dict[str, Any]) -> None:
    reordered = dict(reversed(list(data.items())))
    assert canonical_bytes(data) == canonical_bytes(reordered)
