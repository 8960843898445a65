"""No authenticated chat input yields a 5xx: identities and ids carrying a NUL (which PostgreSQL text cannot hold).

Attacks, each with a valid platform credential (a locally signed Bot Framework token, a Slack signing-secret
signature): a Teams card action whose `from.aadObjectId` ends in NUL, one whose activity id (our decision nonce)
does, and a `close status` message from such an id; a Slack click whose `action_ts` (part of the nonce) carries a
NUL. Each is answered below 500, records no decision, and the gate stays open for the real person.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
import pytest

from countersign.bootstrap.app import create_app
from countersign.bootstrap.runtime import Runtime
from tests.bot.conftest import button_click, decision_form, slack_headers, wait_until
from tests.bot.test_teams import _auth, _gate, invoke, message
from tests.support import count


@pytest.fixture
async def tolerant_api(chat_api: httpx.AsyncClient, chat_runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """The app over ASGI with its exceptions turned into the 500 a client would see, instead of raised here."""
    app = create_app(chat_runtime)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://countersign.test") as client:
            yield client


@pytest.mark.parametrize(
    "variant", ["aad_object_id", "activity_id", "aad_object_id_only_nul"], ids=lambda variant: str(variant)
)
async def test_a_teams_card_action_with_a_nul_identity_is_refused_not_500(
    conn: Any,
    tolerant_api: httpx.AsyncClient,
    chat_runtime: Any,
    default_books: Any,
    fake_teams_auth: Any,
    teams_connector: Any,
    variant: str,
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    activity = {
        "aad_object_id": lambda: invoke(gate_id, "aad-alice\x00"),
        "activity_id": lambda: invoke(gate_id, "aad-alice", activity_id="invoke\x00-1"),
        "aad_object_id_only_nul": lambda: invoke(gate_id, "\x00"),
    }[variant]()
    response = await tolerant_api.post("/api/messages", json=activity, headers=_auth(fake_teams_auth))
    assert response.status_code < 500, response.text
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
    # The gate is still open to the real person.
    real = await tolerant_api.post("/api/messages", json=invoke(gate_id, "aad-alice"), headers=_auth(fake_teams_auth))
    assert real.status_code == 200
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE principal_id = 'alice.chen'") == 1


async def test_a_teams_message_from_a_nul_identity_is_refused_not_500(
    conn: Any,
    tolerant_api: httpx.AsyncClient,
    chat_runtime: Any,
    default_books: Any,
    fake_teams_auth: Any,
    teams_connector: Any,
) -> None:
    await _gate(conn, chat_runtime, default_books)
    response = await tolerant_api.post(
        "/api/messages", json=message("close status", aad="aad-alice\x00"), headers=_auth(fake_teams_auth)
    )
    assert response.status_code < 500, response.text
    replies = [c for c in teams_connector.calls if c.request.url.path.endswith("/activities/msg-1")]
    assert replies and b"Refused" in replies[-1].request.content


async def test_a_slack_click_with_a_nul_in_its_action_ts_is_refused_without_a_crash(
    conn: Any,
    tolerant_api: httpx.AsyncClient,
    chat_runtime: Any,
    default_books: Any,
    fake_slack: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, gate_id = await _gate(conn, chat_runtime, default_books)
    payload = json.loads(parse_qs(button_click(gate_id, "U0ALICE").decode())["payload"][0])
    payload["actions"][0]["action_ts"] = "1700000100.000001\x00"
    body = urlencode({"payload": json.dumps(payload)}).encode()
    with caplog.at_level(logging.ERROR, logger="countersign.slack"):
        response = await tolerant_api.post("/slack/events", content=body, headers=slack_headers(body))
        assert response.status_code < 500, response.text
        clean = decision_form(gate_id, "U0ALICE")  # the form a clean click opens, submitted
        await tolerant_api.post("/slack/events", content=clean, headers=slack_headers(clean))
        await wait_until(lambda: len(fake_slack.calls_to("chat.update")) >= 1)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == [], "a listener crashed on the NUL"
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 1  # only the clean click


@pytest.mark.parametrize(
    "text", ["close trace export csv 0000\x00", "close payments 2026-0\x001", "close status\x00"], ids=repr
)
async def test_a_teams_command_with_a_nul_in_its_text_is_answered_not_500(
    conn: Any,
    tolerant_api: httpx.AsyncClient,
    chat_runtime: Any,
    default_books: Any,
    fake_teams_auth: Any,
    teams_connector: Any,
    text: str,
) -> None:
    await _gate(conn, chat_runtime, default_books)
    response = await tolerant_api.post(
        "/api/messages", json=message(text, aad="aad-alice"), headers=_auth(fake_teams_auth)
    )
    assert response.status_code < 500, response.text
    replies = [c for c in teams_connector.calls if c.request.url.path.endswith("/activities/msg-1")]
    assert replies, "the command got no answer"
