"""The decision writer sends its transaction as one pipeline (issue 25): every check still holds in it.

The database's own refusal must still surface as a traced `refused_by_database` with nothing written, and the
connection must be fit for the next decision after the aborted pipeline. The gate's summary digest, now read in the
decision's one context query, must still be the one the person signed.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from countersign.callbacks.decision_writer import DecisionRefused, DecisionRequest, record_decision
from countersign.callbacks.person_signature import ed25519_proof
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.support import count, person_signature, start_default_close


@pytest.fixture
async def gate_id(conn: Any, runtime: Any, engine_ctx: Any, default_books: Any) -> str:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    return str(next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals"))


def _signed(gate_id: str, principal: str, nonce: str, summary_digest: str | None = None) -> DecisionRequest:
    now = int(time.time())
    signature = person_signature(gate_id, principal, "approve", "reviewed", nonce, now, summary_digest=summary_digest)
    return DecisionRequest(
        gate_id, principal, "approve", "reviewed", nonce, "signed_callback", ed25519_proof(signature, now)
    )


async def test_a_refusal_by_the_database_inside_the_pipeline_is_traced_and_the_connection_decides_next(
    database: Any, conn: Any, gate_id: str
) -> None:
    """An inactive person passes the writer's own checks (it does not read `active`); the admission trigger refuses."""
    await conn.execute("UPDATE principal SET active = false WHERE principal_id = 'bob.osei'")
    async with await psycopg.AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        with pytest.raises(DecisionRefused) as refused:
            await record_decision(callbacks, _signed(gate_id, "bob.osei", "n-bob"))
        assert refused.value.code == "refused_by_database"
        assert "not an active human" in str(refused.value)
        outcome = await record_decision(callbacks, _signed(gate_id, "alice.chen", "n-alice"))
    assert outcome.recorded and outcome.status == "approved" and outcome.approvals == 1
    assert [d["principal"] for d in outcome.decisions] == ["alice.chen"]
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate_id) == 1
    refusals = "SELECT count(*) FROM trace_event WHERE kind = 'decision_refused' AND payload->>'code' = %s"
    assert await count(conn, refusals, "refused_by_database") == 1
    assert await count(conn, "SELECT count(*) FROM trace_pending") == 0  # both sealed before returning


async def test_a_signature_over_another_summary_is_refused_from_the_context_query(
    database: Any, conn: Any, gate_id: str
) -> None:
    async with await psycopg.AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        with pytest.raises(DecisionRefused) as refused:
            await record_decision(callbacks, _signed(gate_id, "alice.chen", "n-1", summary_digest="0" * 64))
        assert refused.value.code == "person_signature_rejected"
        assert (await record_decision(callbacks, _signed(gate_id, "alice.chen", "n-2"))).recorded
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate_id) == 1
