"""The decision writer's statements (countersign.store.decisions) against real PostgreSQL, as the callbacks role runs
them: the gate's lock is held to the transaction's end, the context row reads Enums, an insert writes once (a
second insert under the same nonce writes nothing), and the counts and the gate's close read what was written."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from countersign.callbacks.decision_writer import DecisionRequest, stored_proof
from countersign.callbacks.person_signature import ed25519_proof
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.states import Channel, Decision, GateStatus, PrincipalKind
from countersign.store import decisions as store
from countersign.store.gates import read_gate
from tests.support import count, person_signature, rewrite_gate_as_owner, start_default_close


@pytest_asyncio.fixture
async def gate_id(conn: Any, runtime: Any, engine_ctx: Any, default_books: Any) -> str:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    return str(next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals"))


@pytest_asyncio.fixture
async def callbacks(database: Any) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database.callbacks_url, autocommit=True) as connection:
        yield connection


def _new(gate_id: str, principal: str, nonce: str) -> store.NewDecision:
    """A signed-callback approval as the decision writer would store it (a valid signature over the gate)."""
    now = int(time.time())
    signature = person_signature(gate_id, principal, "approve", "reviewed", nonce, now)
    request = DecisionRequest(
        gate_id, principal, "approve", "reviewed", nonce, Channel.SIGNED_CALLBACK, ed25519_proof(signature, now)
    )
    return store.NewDecision(
        gate_id,
        principal,
        Decision.APPROVE,
        "reviewed",
        nonce,
        request.digest(),
        Channel.SIGNED_CALLBACK,
        stored_proof(request),
    )


def test_the_gate_lock_key_is_the_signed_first_eight_bytes_of_its_digest() -> None:
    digest = hashlib.sha256(b"gate:g-1").digest()
    assert store.gate_lock_key("g-1") == int.from_bytes(digest[:8], "big", signed=True)
    assert store.gate_lock_key("g-1") != store.gate_lock_key("g-2")


async def test_the_gate_lock_is_held_until_the_transaction_ends(conn: Any, callbacks: Any) -> None:
    gate = str(uuid.uuid4())
    key = store.gate_lock_key(gate)
    try_lock = "SELECT pg_try_advisory_xact_lock(%s)"
    async with callbacks.transaction():
        await store.lock_gate(callbacks, gate)
        async with conn.transaction():
            assert await (await conn.execute(try_lock, (key,))).fetchone() == (False,)
    async with conn.transaction():
        assert await (await conn.execute(try_lock, (key,))).fetchone() == (True,)


async def test_the_context_of_an_unknown_gate_and_person_is_one_row_of_nothing(callbacks: Any) -> None:
    row = await store.read_decision_context(
        callbacks, nonce="n-1", gate_id=str(uuid.uuid4()), key="nobody", credential_id=None
    )
    assert row.status is None and row.replay_gate is None and row.principal is None and row.previous is None


async def test_a_decision_is_inserted_once_and_its_context_then_shows_the_vote(
    conn: Any, callbacks: Any, gate_id: str
) -> None:
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2")  # alice's approval leaves it open for bob
    before = await store.read_decision_context(
        callbacks, nonce="n-alice", gate_id=gate_id, key="alice.chen", credential_id=None
    )
    assert before.status is GateStatus.OPEN and before.replay_gate is None and before.previous is None
    assert before.kind is PrincipalKind.HUMAN
    principal = before.principal
    assert principal is not None and principal.is_human and principal.principal_id == "alice.chen"
    assert before.gate_facts(gate_id).gate_id == gate_id

    alice = _new(gate_id, "alice.chen", "n-alice")  # built once: its digest covers the second it was signed in
    async with callbacks.transaction():
        inserted, gate = await store.insert_decision(callbacks, alice, meanwhile=lambda: read_gate(callbacks, gate_id))
    assert inserted is not None and inserted.decision_id > 0
    assert gate is not None and gate.approvals == 1  # read after the insert, in the same transaction

    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="already decided"):  # the database's own check
        async with callbacks.transaction():
            await store.insert_decision(
                callbacks, _new(gate_id, "alice.chen", "n-again"), meanwhile=lambda: read_gate(callbacks, gate_id)
            )
    async with callbacks.transaction():
        again, unchanged = await store.insert_decision(
            callbacks, _new(gate_id, "bob.osei", "n-alice"), meanwhile=lambda: read_gate(callbacks, gate_id)
        )
    assert again is None  # the unique nonce held: nothing written
    assert unchanged is not None and unchanged.approvals == 1
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate_id) == 1

    after = await store.read_decision_context(
        callbacks, nonce="n-alice", gate_id=gate_id, key="alice.chen", credential_id=None
    )
    assert after.replay_gate == gate_id and after.replay_digest == alice.request_digest
    assert after.previous is Decision.APPROVE
    assert after.status is GateStatus.OPEN  # one approval of two

    assert await store.count_decisions_by_channel(callbacks) == [store.ChannelCount("signed_callback", 1)]


async def test_the_close_of_a_gate(conn: Any, callbacks: Any, gate_id: str) -> None:
    expected = await (await conn.execute("SELECT close_id::text FROM gate WHERE gate_id = %s", (gate_id,))).fetchone()
    assert await store.read_close_of(callbacks, gate_id) == expected[0]
    assert await store.read_close_of(callbacks, str(uuid.uuid4())) is None
