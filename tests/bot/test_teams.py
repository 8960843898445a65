"""Teams through the FastAPI app: locally signed Bot Framework tokens, respx for the outbound connector."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from countersign.bootstrap.app import MissingSecret, create_app
from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import engine_context
from countersign.callbacks.principals import upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.bot.conftest import PEOPLE, SERVICE_URL, TEAMS_APP_ID, TEAMS_CONVERSATION, TENANT
from tests.support import count, rewrite_gate_as_owner, start_default_close


def invoke(
    gate_id: str,
    aad: str | None,
    decision: str = "approve",
    *,
    role: str = "user",
    sender_id: str = "29:user",
    activity_id: str = "invoke-1",
    reason: str | None = None,
    verb: str | None = None,
) -> dict[str, Any]:
    """An Action.Execute invoke; `reason` is what the card's reason box held (Teams adds it to the data)."""
    data: dict[str, Any] = {"gate_id": gate_id, "decision": decision}
    if reason is not None:
        data["reason"] = reason
    sender: dict[str, Any] = {"id": sender_id, "name": "Someone", "role": role}
    if aad:
        sender["aadObjectId"] = aad
    return {
        "type": "invoke",
        "name": "adaptiveCard/action",
        "id": activity_id,
        "channelId": "msteams",
        "serviceUrl": SERVICE_URL,
        "from": sender,
        "recipient": {"id": f"28:{TEAMS_APP_ID}", "name": "Countersign"},
        "conversation": {"id": TEAMS_CONVERSATION, "tenantId": TENANT, "conversationType": "channel"},
        "channelData": {"tenant": {"id": TENANT}},
        "replyToId": "activity-1",
        "value": {
            "action": {
                "type": "Action.Execute",
                "verb": verb or f"gate.{decision}",
                "data": data,
            },
            "trigger": "manual",
        },
    }


def message(text: str, aad: str = "aad-alice") -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg-1",
        "channelId": "msteams",
        "serviceUrl": SERVICE_URL,
        "text": text,
        "from": {"id": "29:alice", "name": "Alice", "aadObjectId": aad, "role": "user"},
        "recipient": {"id": f"28:{TEAMS_APP_ID}"},
        "conversation": {"id": TEAMS_CONVERSATION, "tenantId": TENANT},
        "channelData": {"tenant": {"id": TENANT}},
    }


# In the default close, intercompany is a medium gate (platform identity accepted); accruals is high (a person's key).
async def _gate(conn: Any, chat_runtime: Any, default_books: Any, task: str = "intercompany") -> tuple[str, str]:
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)  # the default import above knows no chat identities
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    status = await close_status(conn, close_id)
    return close_id, next(g["gate_id"] for g in status["gates"] if g["task"] == task)


def _auth(fake_teams_auth: Any, **kwargs: Any) -> dict[str, str]:
    return {"Authorization": "Bearer " + fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=SERVICE_URL, **kwargs)}


async def test_a_valid_token_decides_and_returns_the_updated_card(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    activity = invoke(gate_id, "aad-alice", reason="  Matched to ACME-US's statement  ")
    response = await chat_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))
    assert response.status_code == 200
    body = response.json()
    assert body["statusCode"] == 200 and body["type"] == "application/vnd.microsoft.card.adaptive"
    assert body["value"]["type"] == "AdaptiveCard"
    assert "Action.Execute" not in json.dumps(body["value"])  # decided: no buttons left, no refresh
    reasons = "SELECT reason FROM gate_decision WHERE principal_id = 'alice.chen'"
    assert [row[0] for row in await (await conn.execute(reasons)).fetchall()] == ["Matched to ACME-US's statement"]
    puts = [c for c in teams_connector.calls if c.request.method == "PUT"]
    assert len(puts) == 1  # the posted card updated for everyone
    assert b"alice" in puts[0].request.content.lower()


@pytest.mark.parametrize(
    "variant",
    ["forged", "expired", "wrong_audience", "wrong_issuer", "unknown_kid", "missing", "garbage"],
)
async def test_every_authentication_failure_is_401(
    conn: Any,
    chat_api: Any,
    chat_runtime: Any,
    default_books: Any,
    fake_teams_auth: Any,
    teams_connector: Any,
    variant: str,
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    headers = {
        "forged": lambda: _auth(
            fake_teams_auth, signing_key=rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ),
        "expired": lambda: _auth(fake_teams_auth, expires_in_s=-3600),
        "wrong_audience": lambda: _auth(fake_teams_auth, audience="someone-else"),
        "wrong_issuer": lambda: _auth(fake_teams_auth, issuer="https://evil.example"),
        "unknown_kid": lambda: _auth(fake_teams_auth, kid="not-a-key"),
        "missing": lambda: {},
        "garbage": lambda: {"Authorization": "Bearer not.a.jwt"},
    }[variant]()
    response = await chat_api.post("/api/messages", json=invoke(gate_id, "aad-alice"), headers=headers)
    assert response.status_code == 401
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


@pytest.mark.parametrize(
    ("role", "sender_id", "aad"),
    [("bot", "29:someone", "aad-alice"), ("user", f"28:{TEAMS_APP_ID}", "aad-alice"), ("user", "29:x", None)],
)
async def test_a_bot_sender_gets_a_403_card(
    conn: Any,
    chat_api: Any,
    chat_runtime: Any,
    default_books: Any,
    fake_teams_auth: Any,
    teams_connector: Any,
    role: str,
    sender_id: str,
    aad: str | None,
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    activity = invoke(gate_id, aad, role=role, sender_id=sender_id)
    response = await chat_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))
    assert response.status_code == 403
    assert response.json()["value"]["type"] == "AdaptiveCard"
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


async def test_a_refused_human_gets_a_card_saying_why(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    response = await chat_api.post("/api/messages", json=invoke(gate_id, "aad-carol"), headers=_auth(fake_teams_auth))
    assert response.status_code == 200
    assert "role" in json.dumps(response.json()["value"]).lower()
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


async def test_close_status_and_trace_export_messages_are_answered(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    await _gate(conn, chat_runtime, default_books)
    before = len(teams_connector.calls)
    for text in ("close status", "close trace export csv"):
        response = await chat_api.post("/api/messages", json=message(text), headers=_auth(fake_teams_auth))
        assert response.status_code == 200
    replies = [c for c in teams_connector.calls[before:] if c.request.url.path.endswith("/activities/msg-1")]
    assert len(replies) == 2
    assert b"AdaptiveCard" in replies[0].request.content
    assert b"data:text/csv;base64," in replies[1].request.content
    # The entity in the reply's text comes from the books (for a payment run, a contractor's certificate id): Teams
    # must not read it as markdown.
    assert json.loads(replies[1].request.content)["textFormat"] == "plain"


def test_an_empty_teams_app_id_refuses_to_start(chat_runtime: Any) -> None:
    from dataclasses import replace

    with pytest.raises(MissingSecret, match="TEAMS_APP_ID"):
        create_app(replace(chat_runtime, settings=chat_runtime.settings.model_copy(update=dict(teams_app_id=""))))
    with pytest.raises(MissingSecret, match="SLACK"):
        create_app(
            replace(chat_runtime, settings=chat_runtime.settings.model_copy(update=dict(slack_signing_secret=None)))
        )


def _texts(card: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("text"), str):
                found.append(value["text"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(card)
    return found


async def test_a_rejection_without_a_reason_gets_the_card_back_asking_for_one_and_records_nothing(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    for reason in (None, "", "   "):
        activity = invoke(gate_id, "aad-alice", "reject", reason=reason)
        response = await chat_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))
        card = response.json()["value"]
        assert response.status_code == 200
        assert "Say why you reject this gate: a rejection needs a reason. Nothing was recorded." in _texts(card)
        assert [a.get("verb") for a in card["actions"]] == ["gate.approve", "gate.reject", None]  # the card again
        assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
    activity = invoke(gate_id, "aad-alice", "reject", reason="ACME-US booked it twice", activity_id="invoke-2")
    response = await chat_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))
    assert response.status_code == 200
    rows = await (await conn.execute("SELECT decision, reason FROM gate_decision")).fetchall()
    assert rows == [("reject", "ACME-US booked it twice")]


async def test_a_gate_that_needs_a_persons_key_is_answered_with_where_to_sign_it(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books, task="accruals")
    page = f"{chat_runtime.settings.board_url}/board/gates/{gate_id}"
    activity = invoke(gate_id, "aad-alice", reason="looks right")  # an old card's Approve button
    response = await chat_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))
    assert response.status_code == 200
    card = response.json()["value"]
    assert f"This gate needs your own key: review and sign it on the Close Board: {page}" in _texts(card)
    assert [(a["type"], a["title"], a["url"]) for a in card["actions"]] == [("Action.OpenUrl", "Review and sign", page)]
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
    refused = (
        "SELECT count(*) FROM trace_event WHERE kind = 'decision_refused' AND payload->>'code' = 'needs_person_key'"
    )
    assert await count(conn, refused) == 1  # refused by the decision writer, and in the trace


async def test_the_posted_card_refreshes_for_the_gates_deciders_and_links_to_its_page(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    posts = [
        json.loads(c.request.content)
        for c in teams_connector.calls
        if c.request.method == "POST" and "/v3/conversations/" in c.request.url.path
    ]
    cards = [a["content"] for p in posts for a in p.get("attachments", []) if gate_id in json.dumps(a)]
    (card,) = cards
    # The controllers (alice.chen, bob.osei) who did not prepare the work; never dana (an accountant) or erin.
    assert card["refresh"]["userIds"] == ["aad-alice", "aad-bob"]
    assert card["refresh"]["action"]["verb"] == "refresh"
    page = f"{chat_runtime.settings.board_url}/board/gates/{gate_id}"
    assert ("Action.OpenUrl", "Open in Close Board", page) in [
        (a["type"], a["title"], a.get("url")) for a in card["actions"]
    ]


async def test_a_refresh_shows_each_person_their_own_state_and_decides_nothing(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2")  # stays open after one approval
    activity = invoke(gate_id, "aad-alice", reason="Agreed to ACME-US")
    assert (await chat_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))).status_code == 200

    async def refreshed(aad: str) -> dict[str, Any]:
        activity = invoke(gate_id, aad, verb="refresh", activity_id=f"refresh-{aad}")
        activity["value"]["action"]["data"] = {"gate_id": gate_id}
        response = await chat_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))
        assert response.status_code == 200
        return dict(response.json()["value"])

    assert "You approved this gate." in _texts(await refreshed("aad-alice"))
    bobs = await refreshed("aad-bob")
    assert "Waiting on you." in _texts(bobs)
    assert [a.get("verb") for a in bobs["actions"]] == ["gate.approve", "gate.reject", None]
    carols = await refreshed("aad-carol")
    assert "This gate is not yours to decide." in _texts(carols)
    assert [a.get("verb") for a in carols["actions"]] == [None]
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 1
