"""A person's decision carries that person's own proof (issue 9): attacks by a holder of the shared secret.

The shared HMAC (`COUNTERSIGN_CALLBACK_SECRET`) authenticates the door. Every test here holds that secret, so the
transport signature is always valid; what it lacks is the deciding person's own Ed25519 key. The engine side of the
guarantee (a recorded decision without valid proof never counts) is attacked in the second half, with raw SQL.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from psycopg.types.json import Jsonb

from countersign.engine.books import load_bank_feed
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.support import (
    APPROVERS,
    count,
    decision_body,
    person_key,
    person_signature,
    post_decision,
    signed_headers,
    start_default_close,
)

CFOS = ("bob.osei", "carol.main")
ATTACKER = Ed25519PrivateKey.from_private_bytes(b"\x07" * 32)  # the secret holder's own key, registered nowhere


async def _decisions(conn: Any) -> int:
    return await count(conn, "SELECT count(*) FROM gate_decision")


async def _post(api: Any, gate_id: str, body: bytes) -> Any:
    return await api.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))


async def _drive_to_signoff(api: Any, conn: Any, runtime: Any, engine_ctx: Any, books: Any) -> tuple[str, str]:
    """Decide every gate before the critical sign-off the legitimate way; return (close id, sign-off gate id)."""
    close_id = await start_default_close(conn, runtime, books)
    await advance(conn, close_id, engine_ctx)
    book_set = await count(conn, "SELECT book_set_id FROM close_run WHERE close_id = %s", close_id)
    await load_bank_feed(
        conn, book_set, books / "corrected" / "bank_lines.csv", loaded_by="alice.chen", close_id=close_id
    )
    for _ in range(10):
        status = await close_status(conn, close_id)
        signoff = [g for g in status["gates"] if g["tier"] == "critical" and g["status"] == "open"]
        if signoff:
            assert signoff[0]["quorum"] == 2 and signoff[0]["approver_role"] == "cfo"
            return close_id, signoff[0]["gate_id"]
        for gate in (g for g in status["gates"] if g["status"] == "open"):
            excluded = {gate["prepared_by"], *gate["requested_by"]}
            eligible = [p for p in APPROVERS[gate["approver_role"]] if p not in excluded]
            for principal in eligible[: gate["quorum"] - gate["approvals"]]:
                assert (await post_decision(api, gate["gate_id"], principal)).status_code == 200
        await advance(conn, close_id, engine_ctx)
    raise AssertionError("the default close never opened its critical sign-off gate")


@pytest.fixture
async def signoff(api: Any, conn: Any, runtime: Any, engine_ctx: Any, default_books: Any) -> tuple[str, str]:
    return await _drive_to_signoff(api, conn, runtime, engine_ctx, default_books)


# --- the door: one secret holder, no person's key -----------------------------------------------------------


async def test_one_secret_holder_cannot_approve_for_two_cfos(
    api: Any, conn: Any, engine_ctx: Any, signoff: tuple[str, str]
) -> None:
    close_id, gate_id = signoff
    before = await _decisions(conn)
    unsigned_field = await _post(api, gate_id, decision_body("bob.osei", gate_id=gate_id, key=ATTACKER))
    second = await _post(api, gate_id, decision_body("carol.main", gate_id=gate_id, key=ATTACKER))
    assert [unsigned_field.status_code, second.status_code] == [401, 401]
    assert {unsigned_field.json()["error"], second.json()["error"]} == {"person_signature_rejected"}
    assert await _decisions(conn) == before
    refused = await count(
        conn,
        "SELECT count(*) FROM trace_event WHERE kind = 'decision_refused'"
        " AND payload->>'code' = 'person_signature_rejected' AND payload->>'gate_id' = %s",
        gate_id,
    )
    assert refused == 2
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    gate = next(g for g in status["gates"] if g["gate_id"] == gate_id)
    assert gate["status"] == "open" and gate["approvals"] == 0
    assert status["status"] != "closed"


async def test_a_person_without_a_registered_key_is_refused_403(api: Any, conn: Any, signoff: tuple[str, str]) -> None:
    _, gate_id = signoff
    await conn.execute("UPDATE principal SET public_key = NULL WHERE principal_id = 'carol.main'")
    response = await post_decision(api, gate_id, "carol.main")
    assert response.status_code == 403 and response.json()["error"] == "no_person_key"
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate_id) == 0


async def test_cfo_a_key_claiming_cfo_b_is_refused(api: Any, conn: Any, signoff: tuple[str, str]) -> None:
    _, gate_id = signoff
    response = await _post(api, gate_id, decision_body("carol.main", gate_id=gate_id, key=person_key("bob.osei")))
    assert response.status_code == 401 and response.json()["error"] == "person_signature_rejected"
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate_id) == 0


@pytest.mark.parametrize("changed", ["gate", "decision", "reason", "nonce", "signed_at", "principal"])
async def test_a_valid_signature_replayed_for_anything_else_is_refused(
    api: Any, conn: Any, signoff: tuple[str, str], changed: str
) -> None:
    close_id, gate_id = signoff
    async with conn.cursor() as cur:
        await cur.execute("SELECT gate_id FROM gate WHERE close_id = %s AND gate_id <> %s LIMIT 1", (close_id, gate_id))
        row = await cur.fetchone()
    other_gate = str(row[0])
    now = int(time.time())
    signed = {"principal": "bob.osei", "decision": "approve", "reason": "reviewed", "nonce": "n-1", "signed_at": now}
    signature = person_signature(gate_id, **signed)  # type: ignore[arg-type]
    sent = {**signed, "signature": signature}
    target = gate_id
    if changed == "gate":
        target = other_gate
    elif changed == "decision":
        sent["decision"] = "reject"
    elif changed == "reason":
        sent["reason"] = "rubber stamp"
    elif changed == "nonce":
        sent["nonce"] = "n-2"
    elif changed == "signed_at":
        sent["signed_at"] = now - 1
    else:
        sent["principal"] = "carol.main"
    before = await _decisions(conn)
    response = await _post(api, target, json.dumps(sent).encode())
    # A decided gate answers 403/409 before looking at proof only when no row could be written anyway.
    assert response.status_code in (401, 403, 409), response.text
    if target == gate_id:
        assert response.status_code == 401 and response.json()["error"] == "person_signature_rejected"
    assert await _decisions(conn) == before
    # The untouched original still works: the refusal was about the change, not the key.
    assert (await _post(api, gate_id, json.dumps({**signed, "signature": signature}).encode())).status_code == 200


async def test_same_nonce_with_another_signature_is_a_conflict_not_a_replay(
    api: Any, conn: Any, signoff: tuple[str, str]
) -> None:
    _, gate_id = signoff
    first = decision_body("bob.osei", gate_id=gate_id, nonce="once", signed_at=int(time.time()))
    again = decision_body("bob.osei", gate_id=gate_id, nonce="once", signed_at=int(time.time()) - 5)
    assert (await _post(api, gate_id, first)).status_code == 200
    assert (await _post(api, gate_id, first)).json()["recorded"] is False  # the same body is a replay
    assert (await _post(api, gate_id, again)).status_code == 409
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate_id) == 1


async def test_the_recorded_decision_keeps_the_persons_proof(api: Any, conn: Any, signoff: tuple[str, str]) -> None:
    _, gate_id = signoff
    stamp = int(time.time())
    body = decision_body("bob.osei", gate_id=gate_id, signed_at=stamp)
    assert (await _post(api, gate_id, body)).status_code == 200
    async with conn.cursor() as cur:
        await cur.execute("SELECT proof FROM gate_decision WHERE gate_id = %s", (gate_id,))
        row = await cur.fetchone()
    assert row[0] == {"kind": "ed25519", "signature": json.loads(body)["signature"], "signed_at": stamp}


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        ({"signature": None}, 422, "signature"),
        ({"signature": ""}, 422, "signature"),
        ({"signature": "A" * 5000}, 422, "signature"),
        ({"signature": 5}, 422, "signature"),
        ({"signature": "é" * 10}, 422, "signature"),
        ({"signature": "not base64 at all!!"}, 401, None),
        ({"signature": base64.b64encode(b"\x00" * 64).decode()}, 401, None),
        ({"signature": base64.b64encode(b"\x00" * 63).decode()}, 401, None),
        ({"signature": "AAAA"}, 401, None),
        ({"signed_at": None}, 422, "signed_at"),
        ({"signed_at": "1700000000"}, 422, "signed_at"),
        ({"signed_at": True}, 422, "signed_at"),
        ({"signed_at": 1.5}, 422, "signed_at"),
        ({"signed_at": -1}, 422, "signed_at"),
        ({"signed_at": 10**400}, 422, "signed_at"),
        ({"signed_at": 1_000_000_000}, 401, None),  # well-formed but stale
    ],
)
async def test_missing_oversized_or_malformed_proof_is_4xx_never_5xx(
    api: Any, conn: Any, signoff: tuple[str, str], change: dict[str, Any], status: int, field: str | None
) -> None:
    _, gate_id = signoff
    body = json.loads(decision_body("bob.osei", gate_id=gate_id))
    for key, value in change.items():
        if value is None:
            del body[key]
        else:
            body[key] = value
    before = await _decisions(conn)
    response = await _post(api, gate_id, json.dumps(body).encode())
    assert response.status_code == status, response.text
    if field is not None:
        assert response.json()["field"] == field
    else:
        assert response.json()["error"] == "person_signature_rejected"
    assert await _decisions(conn) == before


# --- the engine: a recorded decision without valid proof never counts -------------------------------------------


def _forged_proof(gate_id: str) -> dict[str, Any]:
    stamp = int(time.time())
    signature = person_signature(gate_id, "carol.main", "approve", "ok", "forged-nonce", stamp, ATTACKER)
    return {"kind": "ed25519", "signature": signature, "signed_at": stamp}


def _insert_forged(url: str, gate_id: str, proof: dict[str, Any], *, channel: str, setup: str) -> None:
    with psycopg.connect(url, autocommit=True) as attacker, attacker.transaction():
        if setup:
            attacker.execute(setup)
        attacker.execute(
            "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel,"
            " proof) VALUES (%s, 'carol.main', 'approve', 'ok', 'forged-nonce', 'x', %s, %s)",
            (gate_id, channel, Jsonb(proof)),
        )
        if "DISABLE" in setup:
            attacker.execute("ALTER TABLE gate_decision ENABLE ALWAYS TRIGGER gate_decision_admitted")


ATTACKS = {
    # the callbacks role writes a well-shaped row the trigger admits: only the signature itself is forged
    "callbacks role, forged signature": ("callbacks", "signed_callback", "forged", ""),
    # the owner in replica mode (ordinary triggers off): the same forged signature
    "owner in replica mode, forged signature": (
        "owner",
        "signed_callback",
        "forged",
        "SET LOCAL session_replication_role = replica",
    ),
    # worst case: the owner switches the admission trigger off and writes a row with no proof at all
    "owner without the trigger, no proof": (
        "owner",
        "signed_callback",
        "empty",
        "ALTER TABLE gate_decision DISABLE TRIGGER gate_decision_admitted",
    ),
    # ... or claims a Slack click from somebody else's Slack identity
    "owner without the trigger, someone else's slack identity": (
        "owner",
        "slack",
        "slack",
        "ALTER TABLE gate_decision DISABLE TRIGGER gate_decision_admitted",
    ),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_a_forged_second_cfo_decision_in_the_table_does_not_close_the_period(
    api: Any, conn: Any, database: Any, engine_ctx: Any, signoff: tuple[str, str], attack: str
) -> None:
    close_id, gate_id = signoff
    role, channel, proof_kind, setup = ATTACKS[attack]
    assert (await post_decision(api, gate_id, "bob.osei")).status_code == 200  # one real CFO
    proof = {
        "forged": _forged_proof(gate_id),
        "empty": {},
        "slack": {"kind": "slack", "tenant": "t01acme", "external_id": f"u-{uuid.uuid4().hex[:6]}"},
    }[proof_kind]
    _insert_forged(database.url_for(role), gate_id, proof, channel=channel, setup=setup)
    status = await close_status(conn, close_id)
    assert next(g for g in status["gates"] if g["gate_id"] == gate_id)["status"] == "approved"  # the view is fooled

    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        report = await advance(engine, close_id, engine_ctx)
        again = await advance(engine, close_id, engine_ctx)

    assert report.status == again.status == "blocked"
    status = await close_status(conn, close_id)
    assert status["status"] == "blocked"
    assert gate_id in status["status_reason"] and "carol.main" in status["status_reason"]
    assert await count(conn, "SELECT count(*) FROM accounting_period WHERE status = 'closed'") == 0
    events = await count(
        conn,
        "SELECT count(*) FROM trace_event WHERE kind = 'decision_proof_invalid' AND actor = 'orchestrator'"
        " AND payload->>'gate_id' = %s AND payload->'decisions'->0->>'principal' = 'carol.main'",
        gate_id,
    )
    assert events == 1  # traced once, not at every advance
    assert await count(conn, "SELECT count(*) FROM gate WHERE gate_id = %s AND lifecycle = 'open'", gate_id) == 1


async def test_two_real_cfos_close_the_period(
    api: Any, conn: Any, database: Any, engine_ctx: Any, signoff: tuple[str, str]
) -> None:
    """The control for the attack above: the same path with both CFOs' own signatures closes."""
    close_id, gate_id = signoff
    for cfo in CFOS:
        assert (await post_decision(api, gate_id, cfo)).status_code == 200
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        report = await advance(engine, close_id, engine_ctx)
    assert report.status == "closed"
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'decision_proof_invalid'") == 0
