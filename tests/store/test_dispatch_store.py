"""The dispatch table's statements (countersign.store.dispatch) against real PostgreSQL, as the engine role runs them:
a key inserts once, a lease is renewed only by its holder, a result is stored once, a failure counts only under the
lease and dead-letters at the cap, and a dead letter is listed and revived once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from countersign.states import DispatchStatus
from countersign.store import dispatch as store
from tests.support import start_default_close

KEY = "k-accruals-1"
HOLDER = "host-a:101:x1"


@pytest_asyncio.fixture
async def engine(database: Any) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as connection:
        yield connection


@pytest_asyncio.fixture
async def close_id(conn: Any, runtime: Any, default_books: Path) -> str:
    return await start_default_close(conn, runtime, default_books)


async def _inserted(engine: Any, close_id: str, key: str = KEY, digest: str = "d1") -> None:
    await store.insert_dispatch(
        engine, key, close_id=close_id, task="accruals", attempt=1, specialist="accruals", digest=digest
    )


async def test_a_key_inserts_once_and_reads_back_pending_with_its_digest(engine: Any, close_id: str) -> None:
    assert await store.lock_dispatch(engine, KEY) is None
    await _inserted(engine, close_id)
    await _inserted(engine, close_id, digest="another")  # the key is taken: nothing changes
    row = await store.lock_dispatch(engine, KEY)
    assert row is not None
    assert row.status is DispatchStatus.PENDING
    assert (row.input_digest, row.result, row.retry_in_s) == ("d1", None, None)
    assert (row.leased_by, row.lease_live) == (None, None)


async def test_the_claim_holds_its_row_until_the_transaction_ends(database: Any, engine: Any, close_id: str) -> None:
    await _inserted(engine, close_id)
    async with (
        await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as other,
        engine.transaction(),
    ):
        assert await store.lock_dispatch(engine, KEY) is not None
        await other.execute("SET lock_timeout = '200ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            await store.lock_dispatch(other, KEY)


async def test_a_lease_is_renewed_by_its_holder_only_and_a_result_is_stored_once(engine: Any, close_id: str) -> None:
    await _inserted(engine, close_id)
    await store.lease_dispatch(engine, KEY, holder=HOLDER, lease_s=30)
    row = await store.lock_dispatch(engine, KEY)
    assert row is not None and (row.leased_by, row.lease_live) == (HOLDER, True)
    assert await store.dispatch_in_flight(engine, close_id, "accruals", 1)
    assert not await store.dispatch_in_flight(engine, close_id, "accruals", 2)
    assert await store.renew_dispatch_lease(engine, KEY, holder=HOLDER, lease_s=30)
    assert not await store.renew_dispatch_lease(engine, KEY, holder="host-b:7:y", lease_s=30)

    assert await store.complete_dispatch(engine, KEY, {"total": 3})
    assert not await store.complete_dispatch(engine, KEY, {"total": 4})  # a second result changes nothing
    assert await store.dispatch_result(engine, KEY) == {"total": 3}
    done = await store.lock_dispatch(engine, KEY)
    assert done is not None and done.status is DispatchStatus.COMPLETED and done.leased_by is None
    assert not await store.renew_dispatch_lease(engine, KEY, holder=HOLDER, lease_s=30)  # completed
    assert not await store.dispatch_in_flight(engine, close_id, "accruals", 1)


async def test_a_failure_counts_under_the_lease_then_dead_letters_at_the_cap(engine: Any, close_id: str) -> None:
    await _inserted(engine, close_id)
    assert await store.next_move_in_s(engine, close_id) is None
    unleased = await store.count_dispatch_failure(engine, KEY, holder=HOLDER, reason="x", waits=[9.0], max_failures=2)
    assert unleased is None  # nothing is counted without the lease

    await store.lease_dispatch(engine, KEY, holder=HOLDER, lease_s=30)
    first = await store.count_dispatch_failure(engine, KEY, holder=HOLDER, reason="boom", waits=[9.0], max_failures=2)
    assert first is not None and (first.failures, first.status) == (1, DispatchStatus.FAILED)
    row = await store.lock_dispatch(engine, KEY)
    assert row is not None and row.error == "boom" and row.leased_by is None
    assert row.retry_in_s is not None and 8.0 < row.retry_in_s <= 9.0
    seconds = await store.next_move_in_s(engine, close_id)
    assert seconds is not None and 8.0 < seconds <= 9.0
    assert await store.dead_letters(engine, close_id) == []

    await store.lease_dispatch(engine, KEY, holder=HOLDER, lease_s=30)
    second = await store.count_dispatch_failure(engine, KEY, holder=HOLDER, reason="bang", waits=[9.0], max_failures=2)
    assert second is not None and (second.failures, second.status) == (2, DispatchStatus.DEAD)
    (dead,) = await store.dead_letters(engine, close_id)
    assert (dead.dispatch_id, dead.task, dead.attempt, dead.failures, dead.error) == (
        second.dispatch_id,
        "accruals",
        1,
        2,
        "bang",
    )
    assert dead.dead_lettered_at is not None

    assert await store.revive_dead_letter(engine, dead.dispatch_id) == (close_id, "accruals")
    assert await store.revive_dead_letter(engine, dead.dispatch_id) is None  # no longer dead
    revived = await store.lock_dispatch(engine, KEY)
    assert revived is not None and revived.status is DispatchStatus.FAILED and revived.retry_in_s is None
    assert await store.dead_letters(engine, close_id) == []


async def test_a_dead_letter_of_an_earlier_attempt_is_not_listed(conn: Any, engine: Any, close_id: str) -> None:
    await store.insert_dispatch(
        engine, "k-old", close_id=close_id, task="accruals", attempt=2, specialist="accruals", digest="d"
    )
    await store.lease_dispatch(engine, "k-old", holder=HOLDER, lease_s=30)
    assert await store.count_dispatch_failure(engine, "k-old", holder=HOLDER, reason="r", waits=[], max_failures=1)
    assert await store.dead_letters(engine, close_id) == []  # the task's current attempt is 1


async def test_releasing_leases_ends_only_the_prefix_holders(engine: Any, close_id: str) -> None:
    await _inserted(engine, close_id)
    await _inserted(engine, close_id, key="k-theirs")
    await store.lease_dispatch(engine, KEY, holder="host-a:101:x1", lease_s=60)
    await store.lease_dispatch(engine, "k-theirs", holder="host-a:1010:x2", lease_s=60)
    assert await store.release_dispatch_leases(engine, "host-a:101:") == 1
    assert await store.release_dispatch_leases(engine, "host-a:101:") == 0
    ours, theirs = await store.lock_dispatch(engine, KEY), await store.lock_dispatch(engine, "k-theirs")
    assert ours is not None and ours.lease_live is False
    assert theirs is not None and theirs.lease_live is True
