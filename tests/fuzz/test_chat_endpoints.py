"""Slack (`POST /slack/events`) and Teams (`POST /api/messages`) with signed or authenticated random input.

Slack acknowledges at once and works in lazy listeners, so each example waits for the tasks the request started
before it checks the log and the gate_decision table.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from countersign.bootstrap.runtime import engine_context
from countersign.callbacks.principals import upsert_principals
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.bot.conftest import PEOPLE, button_click, slack_headers, slash_command
from tests.bot.test_teams import _auth, invoke, message
from tests.fuzz.strategies import FUZZ, JSON_DATA, TEXT, mutated
from tests.support import count, start_default_close

# Users who exist in the fake Slack workspace but may never decide the accruals gate (role controller):
# carol is a cfo only, mallory is unmapped, the bot and the deactivated user are refused.
NON_DECIDERS = ["U0CAROL", "U0MALLORY", "UBOTTY", "U0GONE"]
WORDS = st.one_of(
    st.sampled_from(["status", "start", "trace", "export", "csv", "json", "help", "ACME-UK", "2026-10", "STATUS"]),
    st.uuids().map(str),
    TEXT.filter(lambda word: word.strip() != ""),
)
# Form-encoded as UTF-8 the way Slack sends it: lone surrogates cannot be encoded, so they become "?".
SLASH_TEXT = st.one_of(TEXT, st.lists(WORDS, max_size=4).map(" ".join)).map(
    lambda text: text.encode("utf-8", "replace").decode("utf-8")
)


async def _settle(before: set[asyncio.Task[Any]], timeout_s: float = 10.0) -> None:
    """Wait for the tasks started since `before` (bolt's lazy listeners) to finish.

    Tasks that only wait on an asyncio.Event (the connection pool's and the transport's) never finish; skip them.
    """
    started = [
        task
        for task in asyncio.all_tasks() - before
        if task is not asyncio.current_task() and getattr(task.get_coro(), "__qualname__", "") != "Event.wait"
    ]
    if started:
        await asyncio.wait(started, timeout=timeout_s)


def _errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("countersign")]


@settings(FUZZ, max_examples=8)
@given(text=SLASH_TEXT, user=st.sampled_from(["U0CAROL", "U0MALLORY"]))
@example(text="status 00000000-0000-0000-0000-000000000000", user="U0CAROL")  # found: CloseNotFound unhandled
@example(text="status \x00", user="U0CAROL")  # found: NUL reaches PostgreSQL (DataError) unhandled
async def test_a_signed_random_close_command_gets_200_and_logs_no_error(
    chat_api: Any, fake_slack: Any, caplog: pytest.LogCaptureFixture, text: str, user: str
) -> None:
    caplog.set_level(logging.ERROR)
    caplog.clear()
    body = slash_command(text, user)
    before = asyncio.all_tasks()
    response = await chat_api.post("/slack/events", content=body, headers=slack_headers(body))
    await _settle(before)
    assert response.status_code == 200
    assert [r.getMessage() for r in _errors(caplog)] == []


@pytest.fixture
async def slack_gate(conn: Any, chat_runtime: Any, default_books: Any) -> str:
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
    status = await close_status(conn, close_id)
    return str(next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals"))


GATE_PLACEHOLDER = "gate-id-placeholder"
CLICK = json.loads(parse_qs(button_click(GATE_PLACEHOLDER, "U0CAROL").decode())["payload"][0])


@st.composite
def interactivity_forms(draw: st.DrawFn) -> str:
    """A form body with text standing in for the gate id: random JSON, or a button click mutated once."""
    kind = draw(st.sampled_from(["click", "click", "click", "json", "form"]))
    if kind == "form":
        fields = draw(st.dictionaries(st.sampled_from(["payload", "command", "type", "x"]), TEXT, max_size=3))
        return urlencode(fields, errors="replace")
    if kind == "json":
        return urlencode({"payload": json.dumps(draw(JSON_DATA))})
    click = json.loads(json.dumps(CLICK))
    click["user"]["id"] = draw(st.sampled_from(NON_DECIDERS))
    return urlencode({"payload": json.dumps(draw(mutated(click, JSON_DATA)))})


@settings(FUZZ, max_examples=30)
@given(form=interactivity_forms())
@example(form="payload=null")  # found: AttributeError inside bolt's request parsing -> 500
@example(form="payload=x")  # found: JSONDecodeError inside bolt's request parsing -> 500
@example(form=urlencode({"payload": '{"type": "block_actions", "user": true}'}))  # found: TypeError in bolt -> 500
async def test_signed_random_interactivity_payloads_get_200_or_4xx_and_record_no_decision(
    conn: Any, chat_api: Any, slack_gate: str, form: str
) -> None:
    body = form.replace(GATE_PLACEHOLDER, slack_gate).encode()
    before = asyncio.all_tasks()
    response = await chat_api.post("/slack/events", content=body, headers=slack_headers(body))
    await _settle(before)
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


@st.composite
def activities(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["invoke", "invoke", "message", "message", "json"]))
    if kind == "json":
        return draw(JSON_DATA)
    if kind == "invoke":
        base = invoke(draw(st.one_of(st.uuids().map(str), TEXT)), draw(st.sampled_from(["aad-alice", "aad-zed"])))
    else:
        base = message(draw(st.one_of(st.just("close status"), SLASH_TEXT.map(lambda t: "close " + t))))
    return draw(mutated(base, JSON_DATA))


@settings(FUZZ, max_examples=40)
@given(activity=activities())
# found: AttributeError ('str' object has no attribute 'get') in TeamsAdapter._card_action / _tenant -> 500
@example(activity={**invoke(str(uuid.UUID(int=1)), "aad-alice"), "value": {"action": "x"}})
@example(activity={**invoke(str(uuid.UUID(int=1)), "aad-alice"), "channelData": {"tenant": "x"}})
# found: GateNotFound is not caught for a card naming a gate that does not exist -> 500
@example(activity=invoke(str(uuid.UUID(int=1)), "aad-alice"))
async def test_authenticated_random_teams_activities_never_get_a_5xx(
    conn: Any, chat_api: Any, fake_teams_auth: Any, activity: Any
) -> None:
    # json.dumps escapes lone surrogates as \ud800, as any JSON sender would; httpx's json= would refuse them.
    body = json.dumps(activity).encode()
    headers = {**_auth(fake_teams_auth), "content-type": "application/json"}
    response = await chat_api.post("/api/messages", content=body, headers=headers)
    assert response.status_code < 500, response.text
    # No close exists here, so no gate: nothing may be recorded whatever the activity says.
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


# --- signed but malformed Slack bodies, authenticated but malformed Teams activities (issue 9) ---------------------

EVENT = {
    "token": "legacy",
    "team_id": "T01ACME",
    "api_app_id": "A0COUNTERSIGN",
    "type": "event_callback",
    "event_id": "Ev0FUZZ",
    "event_time": 1700000000,
    "event": {"type": "app_mention", "user": "U0ALICE", "text": "<@UBOT> close status", "channel": "C0CLOSE"},
}
COMMAND = {k: v[0] for k, v in parse_qs(slash_command("status", "U0ALICE").decode()).items()}


@st.composite
def malformed_slack_bodies(draw: st.DrawFn) -> tuple[bytes, str]:
    """A body Slack's signature covers, one change away from an event, a click or a command; and its content type."""
    kind = draw(st.sampled_from(["event", "event", "click", "click", "command"]))
    if kind == "event":
        document = draw(mutated(EVENT, JSON_DATA))
        return json.dumps(document).encode(), "application/json"
    if kind == "click":
        document = draw(mutated(CLICK, JSON_DATA))
        return urlencode({"payload": json.dumps(document)}).encode(), "application/x-www-form-urlencoded"
    form = dict(COMMAND)
    field = draw(st.sampled_from(sorted(form)))
    if draw(st.booleans()):
        del form[field]
    else:
        form[field] = draw(TEXT)
    return urlencode(form, errors="replace").encode(), "application/x-www-form-urlencoded"


def _event(**changes: Any) -> tuple[bytes, str]:
    return json.dumps({**EVENT, **changes}).encode(), "application/json"


def _click(**changes: Any) -> tuple[bytes, str]:
    return urlencode({"payload": json.dumps({**CLICK, **changes})}).encode(), "application/x-www-form-urlencoded"


@settings(FUZZ, max_examples=60)
@given(signed=malformed_slack_bodies())
@example(signed=_event(event_id={"a": 1}))  # found: psycopg cannot adapt a dict -> 500
@example(signed=_event(event_id=["x"]))
@example(signed=_event(event_id="\x00"))
@example(signed=_event(event="x"))
@example(signed=_event(event={"type": "app_mention", "user": ["x"], "text": {"a": 1}, "channel": 5}))
@example(signed=_event(team_id={"id": "T01ACME"}))
@example(signed=_click(actions="x"))  # found: bolt iterates a string -> 500
@example(signed=_click(actions=["x", 1, None]))  # actions elements that are not objects
@example(signed=_click(actions=[{"action_id": ["gate_approve"], "value": 1}]))
@example(signed=_click(actions=[{"action_id": "gate_approve", "value": {"a": 1}}]))
@example(signed=_click(user="x"))
@example(signed=_click(user={"id": {"a": 1}}, team={"id": ["T01ACME"]}))
@example(signed=_click(container="x", channel=1))
@example(signed=_click(type=["block_actions"]))
async def test_signed_but_malformed_slack_bodies_never_get_a_5xx(
    conn: Any, chat_api: Any, fake_slack: Any, caplog: pytest.LogCaptureFixture, signed: tuple[bytes, str]
) -> None:
    caplog.set_level(logging.ERROR)
    caplog.clear()
    body, content_type = signed
    before = asyncio.all_tasks()
    response = await chat_api.post(
        "/slack/events", content=body, headers=slack_headers(body, content_type=content_type)
    )
    await _settle(before)
    assert response.status_code < 500, response.text
    assert [r.getMessage() for r in _errors(caplog)] == []
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


@st.composite
def malformed_activities(draw: st.DrawFn) -> Any:
    """An authenticated Teams activity one change away from a valid message or invoke."""
    base = draw(
        st.sampled_from(
            [
                message("close trace export csv", aad="aad-erin"),
                message("close status", aad="aad-alice"),
                invoke(str(uuid.UUID(int=1)), "aad-alice"),
            ]
        )
    )
    return draw(mutated(base, JSON_DATA))


@settings(FUZZ, max_examples=40)
@given(activity=malformed_activities())
@example(activity=message("close trace export csv nonsense", aad="aad-erin"))  # found: CloseNotFound -> 500
@example(activity=message("close trace export json 00000000-0000-0000-0000-000000000000", aad="aad-alice"))
@example(activity={**message("close status"), "text": {"a": 1}})
@example(activity={**message("close status"), "from": "x"})
@example(activity={**message("close status"), "channelData": {"tenant": {"id": ["x"]}}})
@example(activity={**message("close status"), "conversation": {"id": 1, "tenantId": None}})
async def test_authenticated_but_malformed_teams_activities_never_get_a_5xx(
    conn: Any, chat_api: Any, fake_teams_auth: Any, caplog: pytest.LogCaptureFixture, activity: Any
) -> None:
    await upsert_principals(conn, PEOPLE)
    caplog.set_level(logging.ERROR)
    caplog.clear()
    body = json.dumps(activity).encode()
    headers = {**_auth(fake_teams_auth), "content-type": "application/json"}
    response = await chat_api.post("/api/messages", content=body, headers=headers)
    assert response.status_code < 500, response.text
    assert [r.getMessage() for r in _errors(caplog)] == []
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
