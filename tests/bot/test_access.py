"""Attacks on the chat doors: strangers, approvers without a read role, other workspaces and other tenants.

Each test is the attack that worked before chat commands checked the caller (issue 9): an unmapped Slack user got the
whole trace as a CSV, a Teams user from another tenant got it too, and `/close status` posted for anyone.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from dataclasses import replace
from typing import Any

import pytest

from countersign.bootstrap.app import MissingSecret, create_app
from countersign.callbacks.principals import upsert_principals
from tests.bot.conftest import PEOPLE, SLACK_CHANNEL, TEAM, TENANT, slack_headers, slash_command, wait_until
from tests.bot.test_teams import _auth, invoke, message
from tests.support import count, start_default_close

SLACK_UPLOAD_METHODS = ("files.getUploadURLExternal", "files.completeUploadExternal", "files.upload")


async def _close(conn: Any, chat_runtime: Any, default_books: Any) -> str:
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)  # the default import knows no chat identities
    return close_id


async def _refusals(conn: Any) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT actor, payload, 0, seq FROM trace_event WHERE kind = 'command_refused'"
        " UNION ALL SELECT actor, payload, 1, pending_id FROM trace_pending WHERE kind = 'command_refused'"
        " ORDER BY 3, 4"
    )
    return [{"actor": row[0], **row[1]} for row in await cur.fetchall()]


async def _trace_rows(conn: Any) -> int:
    return await count(conn, "SELECT (SELECT count(*) FROM trace_event) + (SELECT count(*) FROM trace_pending)")


async def _slash(chat_api: Any, text: str, user: str, team: str = TEAM) -> Any:
    body = slash_command(text, user).replace(f"team_id={TEAM}".encode(), f"team_id={team}".encode())
    return await chat_api.post("/slack/events", content=body, headers=slack_headers(body))


# --- Slack ------------------------------------------------------------------------------------------------------


async def test_an_unmapped_slack_user_cannot_export_the_trace(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    close_id = await _close(conn, chat_runtime, default_books)
    response = await _slash(chat_api, f"trace export csv {close_id}", "U0MALLORY")
    assert response.status_code == 200
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    (answer,) = fake_slack.responses()  # through the command's response_url, to the caller only
    assert answer["response_type"] == "ephemeral" and "Refused" in answer["text"]
    await asyncio.sleep(0.3)
    assert [c for m in SLACK_UPLOAD_METHODS for c in fake_slack.calls_to(m)] == []
    assert fake_slack.uploads == {}
    assert fake_slack.calls_to("chat.postMessage") == []
    assert await _refusals(conn) == [
        {
            "actor": "callbacks",
            "platform": "slack",
            "tenant": TEAM,
            "user": "U0MALLORY",
            "command": "trace export",
            "reason": "unknown_principal",
        }
    ]
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'trace_exported'") == 0


async def test_an_approver_without_a_read_role_cannot_export(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    await _close(conn, chat_runtime, default_books)
    await _slash(chat_api, "trace export json", "U0CAROL")  # cfo: approves sign-off, is no auditor
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    await asyncio.sleep(0.3)
    assert fake_slack.uploads == {}
    assert [(r["user"], r["reason"]) for r in await _refusals(conn)] == [("U0CAROL", "missing_role")]


async def test_an_auditors_export_is_itself_a_trace_event(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    close_id = await _close(conn, chat_runtime, default_books)
    await _slash(chat_api, f"trace export csv {close_id}", "U0ERIN")
    await wait_until(lambda: len(fake_slack.calls_to("files.completeUploadExternal")) == 1)
    uploaded = next(iter(fake_slack.uploads.values()))
    cur = await conn.execute("SELECT actor, close_id, payload, writer FROM trace_event WHERE kind = 'trace_exported'")
    ((actor, event_close, payload, writer),) = await cur.fetchall()
    assert actor == "erin.park" and str(event_close) == close_id and writer == "countersign_callbacks"
    assert payload == {
        "close_id": close_id,
        "format": "csv",
        "sha256": hashlib.sha256(uploaded).hexdigest(),
        "bytes": len(uploaded),
        "platform": "slack",
    }


async def test_close_status_from_a_stranger_posts_nothing(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    await _close(conn, chat_runtime, default_books)
    await _slash(chat_api, "status", "U0MALLORY")
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    assert fake_slack.responses()[0]["response_type"] == "ephemeral"
    mention = {
        "token": "legacy",
        "team_id": TEAM,
        "api_app_id": "A0COUNTERSIGN",
        "type": "event_callback",
        "event_id": "Ev0STRANGER",
        "event_time": int(time.time()),
        "event": {"type": "app_mention", "user": "U0MALLORY", "text": "<@UBOT> close status", "channel": SLACK_CHANNEL},
    }
    body = json.dumps(mention).encode()
    headers = slack_headers(body, content_type="application/json")
    assert (await chat_api.post("/slack/events", content=body, headers=headers)).status_code == 200
    await wait_until(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 1)  # a mention has no response_url
    await asyncio.sleep(0.3)
    assert fake_slack.calls_to("chat.postMessage") == []
    assert [(r["command"], r["reason"]) for r in await _refusals(conn)] == [("status", "unknown_principal")] * 2


async def test_a_deactivated_principal_is_refused(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    await _close(conn, chat_runtime, default_books)
    await conn.execute("UPDATE principal SET active = false WHERE principal_id = 'alice.chen'")
    await _slash(chat_api, "status", "U0ALICE")
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    assert fake_slack.responses()[0]["response_type"] == "ephemeral"
    await asyncio.sleep(0.3)
    assert fake_slack.calls_to("chat.postMessage") == []
    assert [r["reason"] for r in await _refusals(conn)] == ["inactive_principal"]


async def test_a_workspace_that_is_not_allow_listed_is_refused_before_any_write(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    close_id = await _close(conn, chat_runtime, default_books)
    # The attacker's own workspace maps a user id the same as a controller's: the team still decides.
    await conn.execute(
        "INSERT INTO principal_identity (principal_id, channel, tenant, external_id) VALUES ('alice.chen', 'slack',"
        " 't0evil', 'u0alice')"
    )
    rows = await _trace_rows(conn)
    response = await _slash(chat_api, f"trace export csv {close_id}", "U0ALICE", team="T0EVIL")
    assert response.status_code == 200
    assert response.json() == {"response_type": "ephemeral", "text": "Refused: this Slack workspace is not allowed."}
    event = {
        "team_id": "T0EVIL",
        "type": "event_callback",
        "event_id": "Ev0EVIL",
        "event": {"type": "app_mention", "user": "U0ALICE", "text": "close status", "channel": SLACK_CHANNEL},
    }
    body = json.dumps(event).encode()
    headers = slack_headers(body, content_type="application/json")
    assert (await chat_api.post("/slack/events", content=body, headers=headers)).status_code == 403
    click = {
        "type": "block_actions",
        "user": {"id": "U0ALICE", "team_id": "T0EVIL"},
        "team": {"id": "T0EVIL"},
        "container": {"channel_id": SLACK_CHANNEL},
        "actions": [{"action_id": "gate_approve", "value": close_id, "action_ts": "1"}],
    }
    form = ("payload=" + json.dumps(click)).encode()
    assert (await chat_api.post("/slack/events", content=form, headers=slack_headers(form))).status_code == 403
    await asyncio.sleep(0.3)
    assert [c.method for c in fake_slack.calls if c.method != "auth.test"] == []  # bolt checks its own token only
    assert await _trace_rows(conn) == rows
    assert await count(conn, "SELECT count(*) FROM slack_event_seen") == 0


# --- Teams ------------------------------------------------------------------------------------------------------


def _replies(teams_connector: Any, before: int) -> list[dict[str, Any]]:
    return [
        json.loads(c.request.content)
        for c in teams_connector.calls[before:]
        if c.request.method == "POST" and "/activities" in c.request.url.path
    ]


def _other_tenant(activity: dict[str, Any]) -> dict[str, Any]:
    activity = json.loads(json.dumps(activity))
    activity["conversation"]["tenantId"] = "evil-tenant"
    activity["channelData"] = {"tenant": {"id": "evil-tenant"}}
    return activity


async def test_a_teams_user_from_another_tenant_gets_nothing(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    close_id = await _close(conn, chat_runtime, default_books)
    await conn.execute(
        "INSERT INTO principal_identity (principal_id, channel, tenant, external_id)"
        " VALUES ('erin.park', 'teams', 'evil-tenant', 'aad-erin')"
    )
    rows = await _trace_rows(conn)
    before = len(teams_connector.calls)
    export = _other_tenant(message(f"close trace export csv {close_id}", aad="aad-erin"))
    response = await chat_api.post("/api/messages", json=export, headers=_auth(fake_teams_auth))
    assert response.status_code == 403
    click = _other_tenant(invoke(close_id, "aad-erin"))
    response = await chat_api.post("/api/messages", json=click, headers=_auth(fake_teams_auth))
    assert response.status_code == 403 and response.json()["statusCode"] == 403
    assert teams_connector.calls[before:] == []
    assert await _trace_rows(conn) == rows


async def test_a_stranger_in_the_tenant_is_refused_with_a_plain_reply_and_no_file(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    await _close(conn, chat_runtime, default_books)
    before = len(teams_connector.calls)
    for text in ("close trace export csv", "close status"):
        response = await chat_api.post(
            "/api/messages", json=message(text, aad="aad-zed"), headers=_auth(fake_teams_auth)
        )
        assert response.status_code == 200
    replies = _replies(teams_connector, before)
    assert len(replies) == 2
    assert all("attachments" not in r and r["text"].startswith("Refused") for r in replies)
    assert [(r["user"], r["command"], r["tenant"]) for r in await _refusals(conn)] == [
        ("aad-zed", "trace export", TENANT),
        ("aad-zed", "status", TENANT),
    ]


async def test_a_teams_auditor_export_is_traced_and_an_unknown_close_gets_a_clear_reply(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_teams_auth: Any, teams_connector: Any
) -> None:
    close_id = await _close(conn, chat_runtime, default_books)
    before = len(teams_connector.calls)
    for text in (f"close trace export json {close_id}", "close trace export csv nonsense"):
        response = await chat_api.post(
            "/api/messages", json=message(text, aad="aad-erin"), headers=_auth(fake_teams_auth)
        )
        assert response.status_code == 200, response.text
    exported, unknown = _replies(teams_connector, before)
    data = base64.b64decode(exported["attachments"][0]["contentUrl"].split(",", 1)[1])
    assert "No close with id" in unknown["text"] and "attachments" not in unknown
    cur = await conn.execute("SELECT actor, payload FROM trace_event WHERE kind = 'trace_exported'")
    ((actor, payload),) = await cur.fetchall()
    assert actor == "erin.park"
    assert payload["sha256"] == hashlib.sha256(data).hexdigest() and payload["platform"] == "teams"


# --- configuration -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "variable"), [("slack_team_ids", "SLACK_TEAM_IDS"), ("teams_tenant_ids", "TENANT")])
def test_the_server_refuses_to_start_without_an_allow_list(chat_runtime: Any, field: str, variable: str) -> None:
    settings = chat_runtime.settings.model_copy(update={field: ()})
    with pytest.raises(MissingSecret, match=variable):
        create_app(replace(chat_runtime, settings=settings))
