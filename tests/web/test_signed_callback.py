"""The signed decision callback over the FastAPI app's ASGI interface, on real PostgreSQL."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.support import (
    count,
    decision_body,
    post_decision,
    rewrite_gate_as_owner,
    signed_headers,
    start_default_close,
)

MACHINE_SPELLINGS = [
    "orchestrator",
    "Orchestrator",
    "ORCHESTRATOR",
    " orchestrator",
    "orchestrator ",
    "\torchestrator\n",
    "orchestrator\u200b",
    "\u200borchestrator",
    "orche\u200dstrator",
    "orchestrator\ufeff",
    "ｏｒｃｈｅｓｔｒａｔｏｒ",
    "Ｏｒｃｈｅｓｔｒａｔｏｒ",
    "reconciliation-agent",
    "Reconciliation-Agent",
    "accruals-agent\u2060",
    "VARIANCE-AGENT",
    "countersign-bot",
    "Countersign-Bot ",
    "ｃｏｕｎｔｅｒｓｉｇｎ－ｂｏｔ",
    "orchestrator\u00ad",
    "\u2060orchestrator\u200c",
]


@pytest.fixture
async def gate_id(conn: Any, runtime: Any, engine_ctx: Any, default_books: Any) -> str:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    return str(next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals"))


async def _decisions(conn: Any) -> int:
    return await count(conn, "SELECT count(*) FROM gate_decision")


async def test_a_human_with_the_role_decides_and_gets_the_gate_state(api: Any, conn: Any, gate_id: str) -> None:
    response = await post_decision(api, gate_id, "alice.chen")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "approved" and body["approvals"] == 1 and body["quorum"] == 1
    assert body["decisions"][0]["principal"] == "alice.chen"
    assert await _decisions(conn) == 1
    assert (
        await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'gate_decided' AND actor = 'alice.chen'") == 1
    )


@pytest.mark.parametrize("spelling", MACHINE_SPELLINGS)
async def test_machine_principals_are_refused_however_they_are_spelled(
    api: Any, conn: Any, gate_id: str, spelling: str
) -> None:
    response = await post_decision(api, gate_id, spelling)
    assert response.status_code == 403
    assert response.json()["error"] == "machine_principal"
    assert await _decisions(conn) == 0
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'decision_refused'") == 1


async def test_unknown_principal_is_refused(api: Any, conn: Any, gate_id: str) -> None:
    response = await post_decision(api, gate_id, "mallory")
    assert response.status_code == 403 and response.json()["error"] == "unknown_principal"
    assert await _decisions(conn) == 0


async def test_a_human_without_the_tier_role_is_refused(api: Any, conn: Any, gate_id: str) -> None:
    response = await post_decision(api, gate_id, "carol.main")  # cfo only; accruals needs controller
    assert response.status_code == 403 and response.json()["error"] == "missing_role"
    assert await _decisions(conn) == 0


async def test_a_second_vote_by_the_same_person_is_refused(api: Any, conn: Any, runtime: Any, gate_id: str) -> None:
    # Use the two-person sign-off tier so the gate stays open after the first vote.
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2")
    assert (await post_decision(api, gate_id, "alice.chen")).status_code == 200
    again = await post_decision(api, gate_id, "alice.chen")
    assert again.status_code == 403 and again.json()["error"] == "already_voted"
    assert await _decisions(conn) == 1


async def test_replayed_request_returns_the_original_outcome_and_records_nothing(
    api: Any, conn: Any, gate_id: str
) -> None:
    body = decision_body("alice.chen", nonce="nonce-1", gate_id=gate_id)
    first = await api.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))
    replay = await api.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))
    assert first.status_code == replay.status_code == 200
    assert replay.json()["status"] == first.json()["status"] == "approved"
    assert replay.json()["recorded"] is False
    assert await _decisions(conn) == 1
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'gate_decided'") == 1


async def test_replay_while_the_gate_is_still_open_is_not_a_second_vote(api: Any, conn: Any, gate_id: str) -> None:
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2")
    body = decision_body("alice.chen", nonce="nonce-open", gate_id=gate_id)
    url = f"/callbacks/gates/{gate_id}/decisions"
    first = await api.post(url, content=body, headers=signed_headers(body))
    replay = await api.post(url, content=body, headers=signed_headers(body))
    assert first.status_code == replay.status_code == 200
    assert replay.json()["status"] == "open" and replay.json()["approvals"] == 1
    assert await _decisions(conn) == 1


async def test_a_reused_nonce_with_a_different_body_is_refused(api: Any, conn: Any, gate_id: str) -> None:
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2")
    assert (await post_decision(api, gate_id, "alice.chen", nonce="shared")).status_code == 200
    other = await post_decision(api, gate_id, "bob.osei", nonce="shared")
    assert other.status_code == 409
    assert await _decisions(conn) == 1


async def test_a_decided_gate_answers_409_to_the_other_outcome(api: Any, conn: Any, gate_id: str) -> None:
    assert (await post_decision(api, gate_id, "alice.chen", "approve")).status_code == 200
    late = await post_decision(api, gate_id, "bob.osei", "reject")
    assert late.status_code == 409
    assert await _decisions(conn) == 1


async def test_forged_and_stale_signatures_get_401_and_record_nothing(api: Any, conn: Any, gate_id: str) -> None:
    body = decision_body("alice.chen", gate_id=gate_id)
    url = f"/callbacks/gates/{gate_id}/decisions"
    forged = await api.post(url, content=body, headers=signed_headers(body, secret="not-the-secret"))
    stale = await api.post(url, content=body, headers=signed_headers(body, timestamp=int(time.time()) - 301))
    unsigned = await api.post(url, content=body, headers={"content-type": "application/json"})
    tampered_headers = signed_headers(body)
    tampered = await api.post(url, content=body.replace(b"approve", b"reject"), headers=tampered_headers)
    assert [r.status_code for r in (forged, stale, unsigned, tampered)] == [401, 401, 401, 401]
    assert await _decisions(conn) == 0


async def test_unknown_gate_is_404(api: Any) -> None:
    for gate in (str(uuid.uuid4()), "not-a-uuid"):
        response = await post_decision(api, gate, "alice.chen")
        assert response.status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b"[]", "body"),
        (json.dumps({"decision": "approve", "reason": "r", "nonce": "n"}).encode(), "principal"),
        (
            json.dumps({"principal": "alice.chen", "decision": "maybe", "reason": "r", "nonce": "n"}).encode(),
            "decision",
        ),
        (
            json.dumps({"principal": "alice.chen", "decision": "approve", "reason": "", "nonce": "n"}).encode(),
            "reason",
        ),
        (
            json.dumps({"principal": "alice.chen", "decision": "approve", "reason": "r", "nonce": 5}).encode(),
            "nonce",
        ),
        (
            json.dumps({"principal": "a", "decision": "approve", "reason": "r", "nonce": "n", "x": 1}).encode(),
            "x",
        ),
    ],
)
async def test_malformed_body_is_422_naming_the_field(
    api: Any, conn: Any, gate_id: str, body: bytes, field: str
) -> None:
    response = await api.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))
    assert response.status_code == 422
    assert response.json()["field"] == field
    assert await _decisions(conn) == 0


async def test_oversized_body_is_refused_before_parsing(api: Any, conn: Any, gate_id: str) -> None:
    body = decision_body("alice.chen", gate_id=gate_id, reason="x" * 20_000)
    response = await api.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))
    assert response.status_code == 413
    assert await _decisions(conn) == 0


async def test_the_server_refuses_to_start_without_a_callback_secret(runtime: Any) -> None:
    from dataclasses import replace

    from countersign.bootstrap.app import MissingSecret, create_app

    with pytest.raises(MissingSecret):
        create_app(replace(runtime, settings=runtime.settings.model_copy(update=dict(callback_secret=None))))
