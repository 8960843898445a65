"""The engine's gate statements (countersign.store.gates) against real PostgreSQL, as the engine role runs them: a
gate inserts once per task attempt, an open gate is marked escalated once, and a gate's decisions read back with
their Enums and what re-checking their proofs needs (the principal's key, its login aliases, its identities)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from countersign.callbacks.decision_writer import DecisionRequest, stored_proof
from countersign.callbacks.person_signature import ed25519_proof
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.states import (
    Channel,
    Decision,
    DecisionProof,
    GateKind,
    GateLifecycle,
    GateStatus,
    IdentityChannel,
    RunState,
    TaskState,
)
from countersign.store import board_reads
from countersign.store import decisions as decisions_store
from countersign.store import gates as store
from countersign.store.principals import Identity
from tests.support import person_public_key, person_signature, start_default_close


@pytest_asyncio.fixture
async def engine(database: Any) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as connection:
        yield connection


@pytest_asyncio.fixture
async def gate(conn: Any, runtime: Any, engine_ctx: Any, default_books: Any) -> store.GateRecord:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    gate_id = str(next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals"))
    record = await store.read_gate(conn, gate_id)
    assert record is not None
    return record


def _new_gate(gate: store.GateRecord, gate_id: str, attempt: int) -> store.NewGate:
    """A gate with the requirement of `gate`, for another attempt of its task."""
    now = datetime.now(UTC)
    return store.NewGate(
        gate_id=gate_id,
        close_id=gate.close_id,
        task=gate.task,
        attempt=attempt,
        kind=gate.kind,
        tier=gate.tier,
        quorum=gate.quorum,
        approver_role=gate.approver_role,
        rule=gate.rule,
        summary=dict(gate.summary or {}),
        prepared_by=gate.prepared_by,
        requested_by=list(gate.requested_by),
        opened_at=now,
        due_at=now + timedelta(hours=4),
        expires_at=None,
        amount=gate.amount,
    )


async def test_a_gate_inserts_once_per_task_attempt(engine: Any, gate: store.GateRecord) -> None:
    assert await store.gate_of_attempt(engine, gate.close_id, gate.task, gate.attempt) == gate.gate_id
    assert await store.gate_of_attempt(engine, gate.close_id, gate.task, gate.attempt + 1) is None

    duplicate = "00000000-0000-4000-8000-000000000001"
    assert await store.insert_gate(engine, _new_gate(gate, duplicate, gate.attempt)) is False
    assert await store.read_gate(engine, duplicate) is None  # nothing written
    assert await store.gate_of_attempt(engine, gate.close_id, gate.task, gate.attempt) == gate.gate_id

    later = "00000000-0000-4000-8000-000000000002"
    new = replace(_new_gate(gate, later, gate.attempt + 1), summary={"note": "second attempt", "total": 1.5})
    assert await store.insert_gate(engine, new) is True
    assert await store.gate_of_attempt(engine, gate.close_id, gate.task, gate.attempt + 1) == later
    written = await store.read_gate(engine, later)
    assert written is not None
    assert (written.attempt, written.quorum) == (gate.attempt + 1, gate.quorum)
    assert written.approver_role == gate.approver_role
    assert written.summary == {"note": "second attempt", "total": 1.5}
    assert written.requested_by == gate.requested_by and not written.escalated


async def test_an_open_gate_is_marked_escalated_once(engine: Any, gate: store.GateRecord) -> None:
    assert not gate.escalated
    assert await store.mark_escalated(engine, gate.gate_id) is True
    assert await store.mark_escalated(engine, gate.gate_id) is False
    escalated = await store.read_gate(engine, gate.gate_id)
    assert escalated is not None and escalated.escalated
    assert await store.mark_escalated(engine, "00000000-0000-4000-8000-000000000003") is False


async def test_a_decision_reads_back_with_what_its_proof_check_needs(
    database: Any, engine: Any, gate: store.GateRecord
) -> None:
    assert await store.recorded_decisions(engine, gate.gate_id) == []
    now = int(time.time())
    signature = person_signature(gate.gate_id, "alice.chen", "approve", "reviewed", "n-1", now)
    request = DecisionRequest(
        gate.gate_id, "alice.chen", "approve", "reviewed", "n-1", Channel.SIGNED_CALLBACK, ed25519_proof(signature, now)
    )
    new = decisions_store.NewDecision(
        gate.gate_id,
        "alice.chen",
        Decision.APPROVE,
        "reviewed",
        "n-1",
        request.digest(),
        Channel.SIGNED_CALLBACK,
        stored_proof(request),
    )
    async with await psycopg.AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        async with callbacks.transaction():
            inserted, _ = await decisions_store.insert_decision(
                callbacks, new, meanwhile=lambda: store.read_gate(callbacks, gate.gate_id)
            )
        assert inserted is not None

    (recorded,) = await store.recorded_decisions(engine, gate.gate_id)
    assert recorded.decision is Decision.APPROVE and recorded.channel is Channel.SIGNED_CALLBACK
    decided = await store.read_gate(engine, gate.gate_id)
    assert decided is not None and [type(d.channel) for d in decided.decisions] == [Channel]
    proofs = await board_reads.decision_proofs(engine, gate.gate_id)
    assert proofs == {"alice.chen": DecisionProof.ED25519} and type(proofs["alice.chen"]) is DecisionProof
    assert (recorded.gate_id, recorded.principal_id, recorded.reason, recorded.nonce) == (
        gate.gate_id,
        "alice.chen",
        "reviewed",
        "n-1",
    )
    assert recorded.public_key == person_public_key("alice.chen")
    assert recorded.proof["signature"] == signature
    assert isinstance(recorded.logins, tuple)
    assert recorded.identity_matches is False  # a signed callback names no chat identity
    assert recorded.passkey_public_key is None  # nor a passkey


async def test_a_gate_and_the_boards_rows_carry_their_states_as_enums(engine: Any, gate: store.GateRecord) -> None:
    """Not bare strings: the gate's kind, lifecycle and status, and the board's runs and tasks (store.board_reads)."""
    assert (type(gate.kind), type(gate.lifecycle), type(gate.status)) == (GateKind, GateLifecycle, GateStatus)
    assert gate.kind is GateKind.APPROVAL and gate.lifecycle is GateLifecycle.OPEN
    facts = await store.read_gate_facts(engine, gate.gate_id)
    assert facts is not None and type(facts.kind) is GateKind
    (run,) = [r for r in await board_reads.latest_runs(engine, 500) if r.close_id == gate.close_id]
    header = await board_reads.close_header(engine, gate.close_id)
    assert header is not None and type(run.status) is RunState and type(header.status) is RunState
    tasks = await board_reads.task_lines(engine, gate.close_id)
    assert tasks and {type(t.status) for t in tasks} == {TaskState}
    (waiting,) = [g for g in await board_reads.open_gates_of_runs(engine, [gate.close_id]) if g.gate_id == gate.gate_id]
    assert waiting.missing == gate.quorum - gate.approvals


def test_a_row_refuses_a_word_its_column_never_holds() -> None:
    """The conversion is a check: a row with a state its column never admits does not build."""
    with pytest.raises(ValueError, match="'web' is not a valid IdentityChannel"):
        Identity("web", "", "someone")  # type: ignore[arg-type]
    assert Identity("login", "", "someone").channel is IdentityChannel.LOGIN  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'paused' is not a valid RunState"):
        board_reads.RunRow("c", "close", "E", "2026-01", "paused", None, datetime.now(UTC), "GBP")  # type: ignore[arg-type]
