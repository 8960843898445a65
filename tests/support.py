"""Helpers shared by tests: signed requests, principals, a loaded close."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from psycopg import AsyncConnection

from countersign.audit.person_proof import decision_message, digest_of_gate, public_key_raw
from countersign.audit.person_proof import sign as person_sign
from countersign.bootstrap.runtime import Runtime
from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.callbacks.principals import normalise_identity, parse_principals, upsert_principals
from countersign.callbacks.signature import sign
from countersign.engine.books import load_books
from countersign.engine.runs import start_close

SECRET = "test-callback-secret"
# Who holds each role in config/principals.yaml (the shipped test principals).
APPROVERS = {"controller": ["alice.chen", "bob.osei"], "cfo": ["bob.osei", "carol.main"]}


def signed_headers(body: bytes, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    return {
        "content-type": "application/json",
        "x-countersign-timestamp": stamp,
        "x-countersign-signature": sign(secret, stamp, body),
    }


def person_key(principal: str) -> Ed25519PrivateKey:
    """A deterministic test key per person: the Ed25519 seed is sha256 of the normalised principal name."""
    seed = hashlib.sha256(f"countersign-test-person-key:{normalise_identity(principal)}".encode()).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


def person_public_key(principal: str) -> bytes:
    return public_key_raw(person_key(principal))


# The test's database (tests/conftest.py `database` sets it), so a signer can read the gate it signs as a client
# reads it from the status API: with its summary digest.
CURRENT_DATABASE: list[str] = []
NO_SUCH_GATE_DIGEST = "0" * 64


def gate_digest(gate_id: str) -> str:
    """The summary digest of the gate as the test database holds it (all zeros when there is no such gate)."""
    if not CURRENT_DATABASE or not _is_uuid(gate_id):
        return NO_SUCH_GATE_DIGEST
    with psycopg.connect(CURRENT_DATABASE[-1], autocommit=True) as conn:
        row = conn.execute(
            "SELECT g.gate_id::text, g.close_id::text, g.task, g.attempt, g.kind, g.tier, g.quorum, g.approver_role,"
            " g.rule, g.subject, g.amount, coalesce(g.summary, 'null'::jsonb)::text FROM gate g WHERE g.gate_id = %s",
            (gate_id,),
        ).fetchone()
    if row is None:
        return NO_SUCH_GATE_DIGEST
    names = ("gate_id", "close_id", "task", "attempt", "kind", "tier", "quorum", "approver_role", "rule", "subject")
    return digest_of_gate({**dict(zip(names, row[:10], strict=True)), "amount": row[10]}, row[11])


def person_signature(
    gate_id: str,
    principal: str,
    decision: str,
    reason: str,
    nonce: str,
    signed_at: int,
    key: Ed25519PrivateKey | None = None,
    summary_digest: str | None = None,
) -> str:
    """The person's own signature over a decision, as a client computes it (gate id and principal canonical), over
    the gate's summary digest as the database holds it unless `summary_digest` says otherwise."""
    message = decision_message(
        gate_id=str(uuid.UUID(gate_id)) if _is_uuid(gate_id) else gate_id,
        principal=normalise_identity(principal),
        decision=decision,
        reason=reason,
        nonce=nonce,
        signed_at=signed_at,
        summary_digest=gate_digest(gate_id) if summary_digest is None else summary_digest,
    )
    return person_sign(key or person_key(principal), message)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def decision_body(
    principal: str,
    decision: str = "approve",
    nonce: str | None = None,
    *,
    gate_id: str,
    reason: str = "reviewed",
    signed_at: int | None = None,
    key: Ed25519PrivateKey | None = None,
    summary_digest: str | None = None,
    **extra: Any,
) -> bytes:
    """A decision body signed by the person's own test key (or `key`); `extra` fields override after signing."""
    nonce = nonce or uuid.uuid4().hex
    stamp = int(time.time()) if signed_at is None else signed_at
    body: dict[str, Any] = {
        "principal": principal,
        "decision": decision,
        "reason": reason,
        "nonce": nonce,
        "signed_at": stamp,
        "signature": person_signature(gate_id, principal, decision, reason, nonce, stamp, key, summary_digest),
    }
    body.update(extra)
    return json.dumps(body).encode()


async def post_decision(
    client: httpx.AsyncClient,
    gate_id: str,
    principal: str,
    decision: str = "approve",
    nonce: str | None = None,
    **body_fields: Any,
) -> httpx.Response:
    body = decision_body(principal, decision, nonce, gate_id=gate_id, **body_fields)
    return await client.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))


def with_test_keys(principals: list[Any]) -> list[Any]:
    """Every human gets its deterministic test key (`person_key`) registered."""
    return [
        dataclasses.replace(p, public_key=person_public_key(p.principal_id)) if p.is_human else p for p in principals
    ]


async def import_default_principals(conn: AsyncConnection[Any]) -> None:
    """The shipped principals, each human with its test key registered."""
    await upsert_principals(conn, with_test_keys(parse_principals(PROJECT_ROOT / "config" / "principals.yaml")))


async def start_default_close(conn: AsyncConnection[Any], runtime: Runtime, books: Path) -> str:
    await import_default_principals(conn)
    loaded = await load_books(conn, books, loaded_by="test")
    return await start_close(
        conn,
        entity=loaded.entity,
        period=loaded.period,
        book_set_id=loaded.book_set_id,
        policy=runtime.policy,
        workflow=runtime.workflow,
        started_by="test-starter",
    )


async def count(conn: AsyncConnection[Any], sql: str, *params: Any) -> int:
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def rewrite_gate_as_owner(conn: AsyncConnection[Any], gate_id: str, assignment: str, *params: Any) -> None:
    """Test set-up only: the owner changes an open gate's requirements past the trigger that forbids it
    (migration 0006), e.g. `rewrite_gate_as_owner(conn, gate_id, "quorum = 2")`."""
    async with conn.transaction():
        await conn.execute("ALTER TABLE gate DISABLE TRIGGER gate_requirements_fixed")
        await conn.execute(f"UPDATE gate SET {assignment} WHERE gate_id = %s", (*params, gate_id))
        await conn.execute("ALTER TABLE gate ENABLE ALWAYS TRIGGER gate_requirements_fixed")
