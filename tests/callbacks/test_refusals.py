"""Refusal reasons beyond identity: separation of duties, gate lifecycle, concurrent votes. All over HTTP."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.support import count, person_signature, post_decision, rewrite_gate_as_owner, start_default_close


@pytest.fixture
async def close_and_gate(conn: Any, runtime: Any, engine_ctx: Any, default_books: Any) -> tuple[str, str]:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    return close_id, next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals")


async def _refusal(api: Any, gate_id: str, principal: str, decision: str = "approve") -> tuple[int, str]:
    response = await post_decision(api, gate_id, principal, decision)
    return response.status_code, response.json().get("error", "")


async def test_the_person_who_started_the_close_cannot_approve_its_work(
    api: Any, conn: Any, close_and_gate: tuple[str, str]
) -> None:
    _, gate_id = close_and_gate
    await rewrite_gate_as_owner(conn, gate_id, "requested_by = '{bob.osei}'")
    assert await _refusal(api, gate_id, "bob.osei") == (403, "preparer")
    assert await _refusal(api, gate_id, " Bob.Osei\u200b") == (403, "preparer")
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE payload->>'code' = 'preparer'") == 2


async def test_a_close_started_by_a_person_records_them_as_requester(
    conn: Any, runtime: Any, engine_ctx: Any, api: Any, default_books: Any
) -> None:
    from countersign.engine.books import load_books
    from countersign.engine.runs import start_close
    from tests.support import import_default_principals

    await import_default_principals(conn)
    loaded = await load_books(conn, default_books, loaded_by="test")
    close_id = await start_close(
        conn,
        entity=loaded.entity,
        period=loaded.period,
        book_set_id=loaded.book_set_id,
        policy=runtime.policy,
        workflow=runtime.workflow,
        started_by="alice.chen",
    )
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    accruals = next(g for g in status["gates"] if g["task"] == "accruals")
    assert "alice.chen" in accruals["requested_by"]
    assert await _refusal(api, accruals["gate_id"], "alice.chen") == (403, "preparer")
    assert (await post_decision(api, accruals["gate_id"], "bob.osei")).status_code == 200


async def test_an_expired_gate_refuses_decisions(api: Any, conn: Any, close_and_gate: tuple[str, str]) -> None:
    _, gate_id = close_and_gate
    await rewrite_gate_as_owner(
        conn, gate_id, "due_at = now() - interval '2 days', expires_at = now() - interval '1 day'"
    )
    assert await _refusal(api, gate_id, "alice.chen") == (403, "gate_expired")
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


async def test_a_cancelled_gate_refuses_decisions(api: Any, conn: Any, close_and_gate: tuple[str, str]) -> None:
    _, gate_id = close_and_gate
    await conn.execute("UPDATE gate SET lifecycle = 'cancelled' WHERE gate_id = %s", (gate_id,))
    assert await _refusal(api, gate_id, "alice.chen") == (403, "gate_cancelled")


async def test_a_decided_gate_refuses_a_further_vote_the_same_way(
    api: Any, conn: Any, close_and_gate: tuple[str, str]
) -> None:
    _, gate_id = close_and_gate
    assert (await post_decision(api, gate_id, "alice.chen")).status_code == 200
    assert await _refusal(api, gate_id, "bob.osei") == (403, "already_decided")
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 1


async def test_any_rejection_rejects_a_quorum_gate(api: Any, conn: Any, close_and_gate: tuple[str, str]) -> None:
    _, gate_id = close_and_gate
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2")
    first = await post_decision(api, gate_id, "alice.chen", "approve")
    second = await post_decision(api, gate_id, "bob.osei", "reject")
    assert first.json()["status"] == "open"
    assert second.status_code == 200 and second.json()["status"] == "rejected"


async def test_concurrent_votes_by_one_person_record_one_decision(
    api: Any, conn: Any, close_and_gate: tuple[str, str]
) -> None:
    _, gate_id = close_and_gate
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2")
    responses = await asyncio.gather(*(post_decision(api, gate_id, "alice.chen") for _ in range(8)))
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [403] * 7
    assert {r.json()["error"] for r in responses if r.status_code == 403} == {"already_voted"}
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 1


async def test_a_nonce_committed_meanwhile_for_another_gate_is_a_conflict_and_records_nothing(
    conn: Any, database: Any, close_and_gate: tuple[str, str]
) -> None:
    """Two gates take two different locks, so both can pass the replay check; the nonce's unique key decides."""
    import psycopg
    from psycopg.types.json import Jsonb

    from countersign.callbacks.decision_writer import DecisionConflict, DecisionRequest, record_decision
    from countersign.callbacks.person_signature import ed25519_proof

    close_id, gate_id = close_and_gate
    async with conn.cursor() as cur:
        await cur.execute("SELECT gate_id FROM gate WHERE close_id = %s AND gate_id <> %s LIMIT 1", (close_id, gate_id))
        row = await cur.fetchone()
    assert row is not None, "the default close opens more than one gate"
    now = int(time.time())
    rival_proof = {
        "kind": "ed25519",
        "signature": person_signature(str(row[0]), "bob.osei", "approve", "r", "shared-nonce", now),
        "signed_at": now,
    }
    async with await psycopg.AsyncConnection.connect(database.url) as rival:  # holds the nonce, not yet committed
        await rival.execute(
            "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel, proof)"
            " VALUES (%s, 'bob.osei', 'approve', 'r', 'shared-nonce', 'x', 'signed_callback', %s)",
            (row[0], Jsonb(rival_proof)),
        )
        signature = person_signature(gate_id, "alice.chen", "approve", "looks right", "shared-nonce", now)
        request = DecisionRequest(
            gate_id,
            "alice.chen",
            "approve",
            "looks right",
            "shared-nonce",
            "signed_callback",
            ed25519_proof(signature, now),
        )
        attempt = asyncio.create_task(record_decision(conn, request))
        await asyncio.sleep(0.3)  # the attempt has passed the replay check and waits on the rival's nonce
        assert not attempt.done()
        await rival.commit()
        with pytest.raises(DecisionConflict, match="nonce already used"):
            await attempt
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate_id) == 0
    traced = "SELECT count(*) FROM trace_event WHERE kind = 'gate_decided' AND payload->>'gate_id' = %s"
    assert await count(conn, traced, gate_id) == 0
