"""Passkeys on the Close Board over HTTP, with a software authenticator in place of the person's device: enrolment
from an owner's one-time link, sign-in, and a decision on a high-tier gate signed over the gate's summary digest.
Each ceremony is also attacked: a used link, a replayed assertion, a missing CSRF token, a stranger, a person without
the role, another origin, and a passkey revoked mid-session. (In a real browser: test_board_browser.py.)"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import psycopg
import pytest
import pytest_asyncio

from countersign.bootstrap.app import create_app
from countersign.bootstrap.runtime import Runtime
from countersign.callbacks.passkeys import issue_enrolment
from countersign.engine.gates import unproven_decisions
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.scenarios.software_authenticator import Misbehaviour, SoftwareAuthenticator
from countersign.states import GateStatus
from tests.support import count, import_default_principals, start_default_close

BOARD = "http://localhost:8000"


@dataclass
class Person:
    name: str
    device: SoftwareAuthenticator
    client: httpx.AsyncClient
    csrf: str = ""


@pytest_asyncio.fixture
async def board_app(runtime: Runtime) -> AsyncIterator[Any]:
    rt = replace(runtime, settings=runtime.settings.model_copy(update={"board_url": BOARD}))
    app = create_app(rt)
    async with app.router.lifespan_context(app):
        yield app


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BOARD)


async def _enrol(conn: Any, app: Any, name: str) -> Person:
    async with conn.transaction():
        token = await issue_enrolment(conn, name, issued_by="test-owner")
    person = Person(name, SoftwareAuthenticator("localhost", BOARD), _client(app))
    begun = await person.client.post("/board/enrol/options", json={"token": token})
    assert begun.status_code == 200, begun.text
    response = person.device.register(begun.json()["options"])
    done = await person.client.post("/board/enrol", json={"token": token, "response": response, "label": "laptop"})
    assert done.status_code == 200, done.text
    assert done.json()["enrolled"] == name
    return person


async def _sign_in(person: Person, misbehave: Misbehaviour | None = None) -> httpx.Response:
    begun = await person.client.post("/board/sign-in/options")
    assert begun.status_code == 200
    answer = person.device.assert_(begun.json()["options"], **({"misbehave": misbehave} if misbehave else {}))
    response = await person.client.post("/board/sign-in", json={"response": answer})
    if response.status_code == 200:
        page = await person.client.get("/board/inbox")
        found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert found, page.text[:500]
        person.csrf = found.group(1)
    return response


async def _escalation_gate(conn: Any, runtime: Runtime, engine_ctx: Any, books: Any) -> dict[str, Any]:
    close_id = await start_default_close(conn, runtime, books)
    assert (await advance(conn, close_id, engine_ctx)).status == "halted"
    gate: dict[str, Any] = next(g for g in (await close_status(conn, close_id))["gates"] if g["kind"] == "escalation")
    assert gate["tier"] == "high" and gate["accepted_proofs"] == ["ed25519", "passkey"]
    return {**gate, "close_id": close_id}


async def _sign_decision(person: Person, gate_id: str, decision: str, reason: str) -> tuple[httpx.Response, Any]:
    headers = {"x-csrf-token": person.csrf}
    begun = await person.client.post(
        f"/board/gates/{gate_id}/decision/options", json={"decision": decision, "reason": reason}, headers=headers
    )
    assert begun.status_code == 200, begun.text
    assertion = person.device.assert_(begun.json()["options"])
    done = await person.client.post(f"/board/gates/{gate_id}/decision", json={"response": assertion}, headers=headers)
    return done, assertion


async def test_enrol_sign_in_and_sign_a_high_gate_with_a_passkey_and_every_replay_is_refused(
    conn: Any, board_app: Any, runtime: Runtime, engine_ctx: Any, default_books: Any
) -> None:
    gate = await _escalation_gate(conn, runtime, engine_ctx, default_books)
    alice = await _enrol(conn, board_app, "alice.chen")
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'passkey_enrolled'") == 1

    assert (await _sign_in(alice)).status_code == 200
    page = await alice.client.get(f"/board/gates/{gate['gate_id']}")
    assert page.status_code == 200 and "Approve and sign" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'")

    done, assertion = await _sign_decision(alice, gate["gate_id"], "approve", "corrected feed reviewed")
    assert done.status_code == 200, done.text
    assert done.json()["status"] == GateStatus.APPROVED
    proof = await count(
        conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s AND channel = 'board'", gate["gate_id"]
    )
    assert proof == 1

    replayed = await alice.client.post(
        f"/board/gates/{gate['gate_id']}/decision", json={"response": assertion}, headers={"x-csrf-token": alice.csrf}
    )
    assert replayed.status_code == 409 and "already used" in replayed.json()["error"]
    # The engine re-verifies the assertion before the decision counts, then acts on the gate.
    await advance(conn, gate["close_id"], engine_ctx)
    lifecycle = await conn.execute("SELECT lifecycle FROM gate WHERE gate_id = %s", (gate["gate_id"],))
    assert await lifecycle.fetchone() == ("applied",)


async def test_an_enrolment_link_works_once_and_a_sign_in_is_refused_for_lies_and_revoked_keys(
    conn: Any, board_app: Any
) -> None:
    await import_default_principals(conn)
    async with conn.transaction():
        token = await issue_enrolment(conn, "bob.osei", issued_by="test-owner")
    bob = Person("bob.osei", SoftwareAuthenticator("localhost", BOARD), _client(board_app))
    begun = await bob.client.post("/board/enrol/options", json={"token": token})
    first = bob.device.register(begun.json()["options"])
    assert (await bob.client.post("/board/enrol", json={"token": token, "response": first})).status_code == 200
    again = await bob.client.post("/board/enrol/options", json={"token": token})
    assert again.status_code == 403 and "already used" in again.json()["error"]
    stranger = await bob.client.post("/board/enrol/options", json={"token": "not-a-token"})
    assert stranger.status_code == 403

    wrong_origin = await _sign_in(bob, Misbehaviour(origin="https://evil.example"))
    assert wrong_origin.status_code == 401
    unverified = await _sign_in(bob, Misbehaviour(user_verified=False))
    assert unverified.status_code == 401
    assert (await _sign_in(bob)).status_code == 200
    assert (await bob.client.get("/board/passkeys")).status_code == 200

    credential = next(iter(bob.device.credentials.values()))
    from countersign.scenarios.software_authenticator import b64url

    revoke_without_csrf = await bob.client.post(f"/board/passkeys/{b64url(credential.credential_id)}/revoke")
    assert revoke_without_csrf.status_code == 403
    revoked = await bob.client.post(
        f"/board/passkeys/{b64url(credential.credential_id)}/revoke", data={"csrf_token": bob.csrf}
    )
    assert revoked.status_code == 303
    after = await bob.client.get("/board/inbox", headers={"accept": "text/html"})
    assert after.status_code == 303 and after.headers["location"] == "/board/sign-in"  # its session ended
    assert (await _sign_in(bob)).status_code == 401  # the revoked key no longer signs in


async def test_strangers_other_origins_missing_csrf_and_people_without_the_role_are_refused(
    conn: Any, board_app: Any, runtime: Runtime, engine_ctx: Any, default_books: Any
) -> None:
    gate = await _escalation_gate(conn, runtime, engine_ctx, default_books)
    stranger = _client(board_app)
    assert (await stranger.get("/board/", headers={"accept": "text/html"})).headers["location"] == "/board/sign-in"
    refused = await stranger.post(f"/board/gates/{gate['gate_id']}/decision/options", json={"decision": "approve"})
    assert refused.status_code == 401

    alice = await _enrol(conn, board_app, "alice.chen")
    assert (await _sign_in(alice)).status_code == 200
    no_csrf = await alice.client.post(
        f"/board/gates/{gate['gate_id']}/decision/options", json={"decision": "approve", "reason": "ok"}
    )
    assert no_csrf.status_code == 403
    other_origin = await alice.client.post(
        f"/board/gates/{gate['gate_id']}/decision/options",
        json={"decision": "approve", "reason": "ok"},
        headers={"x-csrf-token": alice.csrf, "origin": "https://evil.example"},
    )
    assert other_origin.status_code == 403
    no_reason = await alice.client.post(
        f"/board/gates/{gate['gate_id']}/decision/options",
        json={"decision": "reject", "reason": "  "},
        headers={"x-csrf-token": alice.csrf},
    )
    assert no_reason.status_code == 409 and "reason" in no_reason.json()["error"]

    dana = await _enrol(conn, board_app, "dana.reyes")  # an accountant: no read role, no approver role
    assert (await _sign_in(dana)).status_code == 200
    assert (await dana.client.get(f"/board/gates/{gate['gate_id']}")).status_code == 403
    done, _ = await _sign_decision(dana, gate["gate_id"], "approve", "looks fine")
    assert done.status_code == 403
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate["gate_id"]) == 0


def test_the_callbacks_role_cannot_write_a_passkey_or_mark_a_used_enrolment_fresh(database: Any) -> None:
    """The tables a person's key lives in take no direct writes from a service role: only the owner's functions."""
    from tests.test_database_boundary import _as

    with _as(database, "callbacks") as callbacks:
        for statement in (
            "INSERT INTO principal_passkey (credential_id, principal_id, public_key, label, enrolment_id, user_handle)"
            " VALUES ('AAAAAAAAAAAAAAAAAAAAAA', 'alice.chen', '\\x00', 'x', gen_random_uuid(), '\\x00')",
            "UPDATE principal_passkey SET revoked_at = NULL",
            "UPDATE principal_passkey SET public_key = '\\x00'",
            "SELECT * FROM passkey_enrolment",
            "UPDATE passkey_enrolment SET redeemed_at = NULL",
            "UPDATE webauthn_challenge SET expires_at = now() + interval '1 day'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                callbacks.execute(statement)


async def test_a_forged_assertion_written_as_the_callbacks_role_never_counts(
    conn: Any, board_app: Any, database: Any, runtime: Runtime, engine_ctx: Any, default_books: Any
) -> None:
    """The database admits a board row naming a live passkey of the person (it cannot check ECDSA); the engine
    re-verifies the assertion over the gate's summary digest and refuses to count a forgery."""
    from tests.test_database_boundary import _as

    gate = await _escalation_gate(conn, runtime, engine_ctx, default_books)
    alice = await _enrol(conn, board_app, "alice.chen")
    credential = next(iter(alice.device.credentials.values()))
    real = alice.device.assertion_for_challenge(b"\x01" * 32)  # a real signature, over another message
    forged = {
        "kind": "passkey",
        "credential_id": real["id"],
        "authenticator_data": real["response"]["authenticatorData"],
        "client_data_json": real["response"]["clientDataJSON"],
        "signature": real["response"]["signature"],
        "signed_at": 1_900_000_000,
        "rp_id": "localhost",
        "origin": BOARD,
    }
    assert credential.sign_count == 1
    with _as(database, "callbacks") as callbacks:
        callbacks.execute(
            "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel, proof)"
            " VALUES (%s, 'alice.chen', 'approve', 'forged', 'forged-nonce', 'd', 'board', %s)",
            (gate["gate_id"], psycopg.types.json.Jsonb(forged)),
        )
    unproven = await unproven_decisions(conn, gate["gate_id"])
    assert [(u.principal_id, u.channel) for u in unproven] == [("alice.chen", "board")]
    assert "does not verify" in unproven[0].problem
    await advance(conn, gate["close_id"], engine_ctx)
    lifecycle = await conn.execute("SELECT lifecycle FROM gate WHERE gate_id = %s", (gate["gate_id"],))
    assert await lifecycle.fetchone() != ("applied",)


async def test_a_flood_of_sign_in_requests_is_bounded(conn: Any, board_app: Any, monkeypatch: Any) -> None:
    """Anyone may ask for sign-in options: expired challenges are swept and live ones capped (a 503 past the cap)."""
    from countersign.callbacks import passkeys as store

    monkeypatch.setattr(store, "MAX_LIVE_SIGN_INS", 5)
    stranger = _client(board_app)
    answers = [(await stranger.post("/board/sign-in/options")).status_code for _ in range(7)]
    assert answers == [200] * 5 + [503] * 2
    await conn.execute("UPDATE webauthn_challenge SET expires_at = created_at + interval '1 second'")
    # the expiry check (expires_at > created_at) still holds; the swept rows are gone at the next request
    await conn.execute("SELECT pg_sleep(1.1)")
    assert (await stranger.post("/board/sign-in/options")).status_code == 200
    assert await count(conn, "SELECT count(*) FROM webauthn_challenge") == 1


async def test_oversized_and_malformed_ceremony_bodies_are_refused_naming_what_is_wrong(board_app: Any) -> None:
    stranger = _client(board_app)
    huge = await stranger.post(
        "/board/sign-in", content=b"x" * (70 * 1024), headers={"content-type": "application/json"}
    )
    assert huge.status_code == 413  # the door's body limit, before anything is parsed
    padded = {"id": "a" * 20, "response": {"clientDataJSON": "A" * 20_000}}
    too_big = await stranger.post("/board/sign-in", json={"response": padded})
    assert too_big.status_code == 401 and "larger than any authenticator" in too_big.json()["error"]
    not_json = await stranger.post("/board/sign-in", content=b"{", headers={"content-type": "application/json"})
    assert not_json.status_code == 401 and "not JSON" in not_json.json()["error"]
    no_data = await stranger.post("/board/sign-in", json={"response": {"id": "a" * 20, "response": {}}})
    assert no_data.status_code == 401 and "client data" in no_data.json()["error"]


JSON = {"content-type": "application/json"}
HOSTILE_TEXTS = ("a\x00b", "\ud800", "é" * 3, "a" * 5_000, "../../etc", "")


async def _post_escaped(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> int:
    """POST `body` as ASCII JSON (a lone surrogate travels as its escape, as a hostile client sends it)."""
    answer = await client.post(path, content=json.dumps(body).encode(), headers=JSON)
    return answer.status_code


async def test_hostile_text_in_every_ceremony_field_is_refused_never_a_server_error(conn: Any, board_app: Any) -> None:
    """A NUL, a lone surrogate, a non-base64url or overlong credential id, token or label, and JSON nested past
    Python's recursion limit: each gets one 4xx naming what was wrong, and nothing is written."""
    stranger = _client(board_app)
    before = await count(conn, "SELECT count(*) FROM principal_passkey")
    answers: dict[str, int] = {}
    for text in HOSTILE_TEXTS:
        credential = {"id": text, "response": {"clientDataJSON": "e30"}}
        answers[f"sign-in id {text[:8]!r}"] = await _post_escaped(stranger, "/board/sign-in", {"response": credential})
        answers[f"enrol options token {text[:8]!r}"] = await _post_escaped(
            stranger, "/board/enrol/options", {"token": text}
        )
        answers[f"enrol token and label {text[:8]!r}"] = await _post_escaped(
            stranger, "/board/enrol", {"token": text, "response": credential, "label": text}
        )
    deep = b'{"response": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    nested = await stranger.post("/board/sign-in", content=deep, headers={"content-type": "application/json"})
    answers["sign-in nested past the recursion limit"] = nested.status_code
    await import_default_principals(conn)
    async with conn.transaction():  # a real link and a real authenticator: only the name it gives is hostile
        token = await issue_enrolment(conn, "alice.chen", issued_by="test-owner")
    device = SoftwareAuthenticator("localhost", BOARD)
    begun = await stranger.post("/board/enrol/options", json={"token": token})
    assert begun.status_code == 200, begun.text
    named = {"token": token, "response": device.register(begun.json()["options"]), "label": "lap\x00top"}
    refused = await stranger.post("/board/enrol", content=json.dumps(named).encode(), headers=JSON)
    answers["enrol with a NUL in the passkey's name"] = refused.status_code
    assert "NUL" in refused.json()["error"]
    for text in ("a\x00b", "\ud800"):  # a live sign-in challenge, answered with a hostile credential id
        options = await stranger.post("/board/sign-in/options")
        answer = {**device.assert_(options.json()["options"]), "id": text}
        answers[f"sign-in on a live challenge, id {text!r}"] = await _post_escaped(
            stranger, "/board/sign-in", {"response": answer}
        )
    server_errors = {what: code for what, code in answers.items() if not 400 <= code < 500}
    assert not server_errors, f"answered outside 4xx: {server_errors}"
    assert await count(conn, "SELECT count(*) FROM principal_passkey") == before
