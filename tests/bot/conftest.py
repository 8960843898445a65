"""Slack and Teams wired to local fakes: a fake Slack Web API server, locally signed Bot Framework tokens,
and respx for Teams' outbound connector calls."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import pytest_asyncio
import respx
from slack_sdk.signature import SignatureVerifier

from countersign.bootstrap.app import create_app
from countersign.bootstrap.runtime import Runtime
from countersign.bot.slack_forms import DecisionForm
from countersign.bot.teams import clear_metadata_cache
from countersign.callbacks.principals import Identity, Principal, upsert_principals
from countersign.states import Decision
from tests.fakes.slack_api import FakeSlack
from tests.fakes.teams_auth import FakeBotFrameworkAuth

SLACK_SECRET = "slack-signing-secret-for-tests"
SLACK_CHANNEL = "C0CLOSE"
TEAM = "T01ACME"
TEAMS_APP_ID = "11111111-2222-3333-4444-555555555555"
TENANT = "72f988bf-tenant"
SERVICE_URL = "https://smba.test.example/emea/"
TEAMS_CONVERSATION = "19:close-channel@thread.tacv2"
TOKEN_URL = "https://login.test.example/botframework.com/oauth2/v2.0/token"

PEOPLE = [
    Principal(
        "dana.reyes",
        "human",
        "Dana Reyes",
        ("accountant",),
        (Identity("slack", TEAM.casefold(), "u0dana"), Identity("teams", TENANT.casefold(), "aad-dana")),
    ),
    Principal(
        "alice.chen",
        "human",
        "Alice Chen",
        ("controller",),
        (Identity("slack", TEAM.casefold(), "u0alice"), Identity("teams", TENANT.casefold(), "aad-alice")),
    ),
    Principal(
        "bob.osei",
        "human",
        "Bob Osei",
        ("cfo", "controller"),
        (Identity("slack", TEAM.casefold(), "u0bob"), Identity("teams", TENANT.casefold(), "aad-bob")),
    ),
    Principal(
        "carol.main",
        "human",
        "Carol Main",
        ("cfo",),
        (Identity("slack", TEAM.casefold(), "u0carol"), Identity("teams", TENANT.casefold(), "aad-carol")),
    ),
    Principal(
        "erin.park",
        "human",
        "Erin Park",
        ("auditor",),
        (Identity("slack", TEAM.casefold(), "u0erin"), Identity("teams", TENANT.casefold(), "aad-erin")),
    ),
]


@pytest.fixture
def fake_teams_auth() -> Iterator[FakeBotFrameworkAuth]:
    clear_metadata_cache()
    fake = FakeBotFrameworkAuth().start()
    yield fake
    fake.stop()
    clear_metadata_cache()


@pytest.fixture
def teams_connector() -> Iterator[respx.MockRouter]:
    """Teams' outbound side: token endpoint and conversation activities, recorded by respx."""
    with respx.mock(assert_all_called=False, assert_all_mocked=False) as router:
        router.post(TOKEN_URL).mock(return_value=httpx.Response(200, json={"access_token": "t0k", "expires_in": 3600}))
        counter = iter(range(1, 10_000))
        router.post(url__startswith=SERVICE_URL.rstrip("/") + "/v3/conversations/").mock(
            side_effect=lambda request: httpx.Response(200, json={"id": f"activity-{next(counter)}"})
        )
        # A proactive 1:1 (a direct message): the personal conversation is created, named after its member.
        router.post(SERVICE_URL.rstrip("/") + "/v3/conversations", name="create_conversation").mock(
            side_effect=lambda request: httpx.Response(
                200, json={"id": "a:dm-" + json.loads(request.content)["members"][0]["id"]}
            )
        )
        router.put(url__startswith=SERVICE_URL.rstrip("/") + "/v3/conversations/").mock(
            return_value=httpx.Response(200, json={"id": "updated"})
        )
        router.route(host="countersign.test").pass_through()
        yield router


@pytest.fixture
def chat_runtime(runtime: Runtime, fake_slack: FakeSlack, fake_teams_auth: FakeBotFrameworkAuth) -> Runtime:
    settings = runtime.settings.model_copy(
        update=dict(
            slack_bot_token="xoxb-test",
            slack_signing_secret=SLACK_SECRET,
            slack_api_url=fake_slack.url,
            slack_channel=SLACK_CHANNEL,
            teams_app_id=TEAMS_APP_ID,
            teams_app_password="teams-password",
            teams_openid_metadata_url=fake_teams_auth.metadata_url,
            teams_service_url=SERVICE_URL,
            teams_conversation=TEAMS_CONVERSATION,
            teams_token_url=TOKEN_URL,
            slack_team_ids=(TEAM,),
            teams_tenant_ids=(TENANT,),
        )
    )
    return replace(runtime, settings=settings)


@pytest_asyncio.fixture
async def chat_api(
    chat_runtime: Runtime, conn: Any, teams_connector: respx.MockRouter
) -> AsyncIterator[httpx.AsyncClient]:
    await upsert_principals(conn, PEOPLE)
    app = create_app(chat_runtime)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://countersign.test") as client:
            yield client


def slack_headers(
    body: bytes,
    *,
    secret: str = SLACK_SECRET,
    timestamp: int | None = None,
    content_type: str = "application/x-www-form-urlencoded",
) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body.decode())
    return {"x-slack-request-timestamp": stamp, "x-slack-signature": signature, "content-type": content_type}


def button_click(
    gate_id: str,
    user: str,
    decision: str = "approve",
    *,
    action_ts: str = "1700000100.000001",
    message_ts: str = "1700000000.000001",
) -> bytes:
    payload = {
        "type": "block_actions",
        "user": {"id": user, "team_id": TEAM},
        "team": {"id": TEAM},
        "api_app_id": "A0COUNTERSIGN",
        "token": "legacy",
        "container": {"type": "message", "channel_id": SLACK_CHANNEL, "message_ts": message_ts},
        "channel": {"id": SLACK_CHANNEL},
        "trigger_id": "trigger",
        "response_url": "https://hooks.slack.invalid/actions/x",
        "actions": [
            {
                "action_id": f"gate_{decision}",
                "block_id": f"gate:{gate_id}",
                "value": gate_id,
                "type": "button",
                "action_ts": action_ts,
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def view_submission(view: dict[str, Any], user: str, reason: str | None = None, *, team: str = TEAM) -> bytes:
    """The `view_submission` Slack sends when `user` submits `view` (as views.open returned it) with `reason` typed."""
    typed: dict[str, Any] = {"type": "plain_text_input", "value": reason}
    payload = {
        "type": "view_submission",
        "team": {"id": team, "domain": "acme"},
        "user": {"id": user, "team_id": team},
        "api_app_id": "A0COUNTERSIGN",
        "token": "legacy",
        "trigger_id": "trigger-submit",
        "view": {**view, "state": {"values": {"reason": {"reason": typed}}}},
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def decision_form(
    gate_id: str,
    user: str,
    decision: str = "approve",
    reason: str | None = None,
    *,
    view_id: str = "V0FORM0001",
    opened_by: str | None = None,
) -> bytes:
    """A submission of the decision form the door would have opened for `opened_by` (default: `user`) on `gate_id`:
    for tests about deciding, which need not click first (the click that opens it is tested on its own)."""
    form = DecisionForm(gate_id, Decision(decision), opened_by or user, TEAM, SLACK_CHANNEL)
    view = {"id": view_id, "type": "modal", "callback_id": "gate_decision", "private_metadata": form.metadata()}
    return view_submission(view, user, reason)


def slash_command(text: str, user: str, *, response_url: str | None = None) -> bytes:
    """A signed-to-be `/close` command; its answers go to the running fake Slack's response_url."""
    running = FakeSlack.running
    answer_to = response_url or (running.response_url if running else "https://hooks.slack.invalid/commands/x")
    return urlencode(
        {
            "token": "legacy",
            "team_id": TEAM,
            "channel_id": SLACK_CHANNEL,
            "user_id": user,
            "command": "/close",
            "text": text,
            "response_url": answer_to,
            "trigger_id": "trigger",
            "api_app_id": "A0COUNTERSIGN",
        }
    ).encode()


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met within the time limit")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(
    database_url: str, state_dir: Path, fake_slack: Any, fake_teams_auth: Any, connector: Any
) -> dict[str, str]:
    """Environment for `countersign serve` / `worker` processes wired to the local Slack and Teams fakes."""
    import os

    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "COUNTERSIGN_STATE_DIR": str(state_dir),
        "COUNTERSIGN_CALLBACK_SECRET": "test-callback-secret",
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": SLACK_SECRET,
        "SLACK_API_URL": fake_slack.url,
        "COUNTERSIGN_SLACK_CHANNEL": SLACK_CHANNEL,
        "TEAMS_APP_ID": TEAMS_APP_ID,
        "TEAMS_APP_PASSWORD": "teams-password",
        "TEAMS_OPENID_METADATA_URL": fake_teams_auth.metadata_url,
        "COUNTERSIGN_TEAMS_SERVICE_URL": connector.base_url,
        "COUNTERSIGN_TEAMS_CONVERSATION": TEAMS_CONVERSATION,
        "TEAMS_TOKEN_URL": connector.base_url + "/token",
        "COUNTERSIGN_SLACK_TEAM_IDS": TEAM,
        "COUNTERSIGN_TEAMS_TENANT_IDS": TENANT,
    }
