"""Slack end to end through the FastAPI app, against a local fake Slack Web API server."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import engine_context
from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.bot.slack_signature import SlackSignatureRejected, slack_signature, verify_slack_request
from countersign.callbacks.principals import upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.outbox import enqueue_card_updates
from countersign.engine.runs import close_status
from tests.bot.conftest import (
    PEOPLE,
    SLACK_CHANNEL,
    TEAM,
    button_click,
    decision_form,
    slack_headers,
    slash_command,
    view_submission,
    wait_until,
)
from tests.support import count, rewrite_gate_as_owner, start_default_close

# Slack's published example (docs "Verifying requests from Slack"; python-slack-sdk's signature tests).
VECTOR_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
VECTOR_TIMESTAMP = "1531420618"
VECTOR_BODY = (
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&"
    "channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&"
    "response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
    "trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
VECTOR_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_slacks_published_signature_vector_passes_our_verifier() -> None:
    body = VECTOR_BODY.encode()
    assert slack_signature(VECTOR_SECRET, VECTOR_TIMESTAMP, body) == VECTOR_SIGNATURE
    headers = {"x-slack-request-timestamp": VECTOR_TIMESTAMP, "x-slack-signature": VECTOR_SIGNATURE}
    verify_slack_request(VECTOR_SECRET, headers, body, now_s=1531420618)
    with pytest.raises(SlackSignatureRejected):
        verify_slack_request(VECTOR_SECRET, headers, body + b"-", now_s=1531420618)
    with pytest.raises(SlackSignatureRejected, match="five minutes"):
        verify_slack_request(VECTOR_SECRET, headers, body, now_s=1531420618 + 301)


async def _close_with_cards(conn: Any, chat_runtime: Any, default_books: Any) -> tuple[str, dict[str, Any]]:
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)  # the default import above knows no chat identities
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    return close_id, await close_status(conn, close_id)


def _gate(status: dict[str, Any], task: str) -> str:
    return next(g["gate_id"] for g in status["gates"] if g["task"] == task)


async def test_each_gate_card_is_posted_once_per_channel(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    _, status = await _close_with_cards(conn, chat_runtime, default_books)
    posts = fake_slack.calls_to("chat.postMessage")
    assert len(posts) == len(status["gates"]) == 3
    assert {p.params["channel"] for p in posts} == {SLACK_CHANNEL}
    halt = next(p for p in posts if "17 of 17" in json.dumps(p.params))
    assert halt is not None
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    assert len(fake_slack.calls_to("chat.postMessage")) == 3
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE platform_message_id IS NOT NULL") == 6


async def test_fifty_identical_form_submissions_record_one_decision_and_one_update(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    _, status = await _close_with_cards(conn, chat_runtime, default_books)
    gate_id = _gate(status, "intercompany")  # medium: one tap from chat is enough
    body = decision_form(gate_id, "U0ALICE")
    headers = slack_headers(body)
    responses = await asyncio.gather(
        *(chat_api.post("/slack/events", content=body, headers=headers) for _ in range(50))
    )
    assert {r.status_code for r in responses} == {200}
    # The first to be recorded decides; the rest are replays of its nonce (one form, one decision) or find the
    # gate already approved.
    await wait_until(lambda: len(fake_slack.calls_to("chat.update")) >= 1)
    await asyncio.sleep(0.5)  # let any stragglers finish before counting
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 1
    updates = fake_slack.calls_to("chat.update")
    assert len(updates) == 1
    assert updates[0].params["channel"] == SLACK_CHANNEL
    assert "alice" in json.dumps(updates[0].params).lower()
    assert fake_slack.calls_to("chat.postEphemeral") == []


@pytest.mark.parametrize("user", ["UBOTTY", "U0GONE"])
async def test_a_bot_or_deactivated_user_cannot_decide(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, user: str
) -> None:
    _, status = await _close_with_cards(conn, chat_runtime, default_books)
    # Even when the Slack account maps to a human with the right role, Slack's word that it is a bot (or
    # deactivated) wins: users.info is checked before the principal.
    await conn.execute(
        "INSERT INTO principal_identity (principal_id, channel, tenant, external_id)"
        " VALUES ('bob.osei', 'slack', %s, %s)",
        (TEAM.casefold(), user.casefold()),
    )
    body = decision_form(_gate(status, "intercompany"), user)
    assert (await chat_api.post("/slack/events", content=body, headers=slack_headers(body))).status_code == 200
    await wait_until(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 1)
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE payload->>'code' = 'machine_principal'") == 1
    assert fake_slack.calls_to("chat.update") == []


async def test_an_unmapped_slack_user_is_refused(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    _, status = await _close_with_cards(conn, chat_runtime, default_books)
    body = decision_form(_gate(status, "intercompany"), "U0MALLORY")
    await chat_api.post("/slack/events", content=body, headers=slack_headers(body))
    await wait_until(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 1)
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


def _blocks(call: Any) -> list[dict[str, Any]]:
    blocks = call.params.get("blocks")
    return list(json.loads(blocks) if isinstance(blocks, str) else blocks or [])


def _card_of(fake_slack: Any, gate_id: str) -> list[dict[str, Any]]:
    posted = [c for c in fake_slack.calls_to("chat.postMessage") if f"gate:{gate_id}" in json.dumps(_blocks(c))]
    assert len(posted) == 1
    return _blocks(posted[0])


def _buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"]]


async def test_a_click_opens_the_form_and_its_submission_records_the_reason(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    _, status = await _close_with_cards(conn, chat_runtime, default_books)
    gate_id = _gate(status, "intercompany")
    page = f"{chat_runtime.settings.board_url}/board/gates/{gate_id}"
    buttons = _buttons(_card_of(fake_slack, gate_id))
    assert [(b["action_id"], b.get("url")) for b in buttons] == [
        ("gate_approve", None),
        ("gate_reject", None),
        ("gate_open_board", page),
    ]
    click = button_click(gate_id, "U0ALICE", "reject")
    assert (await chat_api.post("/slack/events", content=click, headers=slack_headers(click))).status_code == 200
    await wait_until(lambda: len(fake_slack.opened_views()) == 1)
    (opened,) = fake_slack.calls_to("views.open")
    assert opened.params["trigger_id"] == "trigger"
    view = fake_slack.opened_views()[0]
    assert view["callback_id"] == "gate_decision"
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0  # a click alone decides nothing
    # Someone else cannot submit Alice's form; an empty reason cannot reject: the modal says why, nothing is recorded.
    for body, problem in (
        (view_submission(view, "U0BOB", "looks wrong"), "opened by someone else"),
        (view_submission(view, "U0ALICE", "   "), "a rejection needs a reason"),
    ):
        answer = await chat_api.post("/slack/events", content=body, headers=slack_headers(body))
        assert answer.status_code == 200
        assert answer.json()["response_action"] == "errors" and problem in answer.json()["errors"]["reason"]
    submitted = view_submission(view, "U0ALICE", "ACME-US booked the loan twice")
    answer = await chat_api.post("/slack/events", content=submitted, headers=slack_headers(submitted))
    assert answer.status_code == 200 and not answer.content  # the modal closes
    await wait_until(lambda: len(fake_slack.calls_to("chat.update")) >= 1)
    rows = await (await conn.execute("SELECT principal_id, decision, reason FROM gate_decision")).fetchall()
    assert rows == [("alice.chen", "reject", "ACME-US booked the loan twice")]
    assert "ACME-US booked the loan twice" in json.dumps(fake_slack.calls_to("chat.update")[0].params)


async def test_a_gate_that_needs_a_persons_key_offers_review_and_sign_and_a_click_says_where(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    _, status = await _close_with_cards(conn, chat_runtime, default_books)
    gate_id = _gate(status, "accruals")  # high: the person's own key only
    page = f"{chat_runtime.settings.board_url}/board/gates/{gate_id}"
    buttons = _buttons(_card_of(fake_slack, gate_id))
    assert [(b["action_id"], b["text"]["text"], b["url"]) for b in buttons] == [
        ("gate_review_and_sign", "Review and sign", page)
    ]
    # An old card's button, or a forged form: the door answers with where to sign, and nothing is recorded.
    click = button_click(gate_id, "U0ALICE")
    assert (await chat_api.post("/slack/events", content=click, headers=slack_headers(click))).status_code == 200
    await wait_until(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 1)
    expected = f"This gate needs your own key: review and sign it on the Close Board: {page}"
    assert fake_slack.calls_to("chat.postEphemeral")[0].params["text"] == expected
    assert fake_slack.calls_to("views.open") == []
    form = decision_form(gate_id, "U0ALICE", reason="fine")
    answer = await chat_api.post("/slack/events", content=form, headers=slack_headers(form))
    assert answer.json()["errors"]["reason"] == expected  # the modal says so at once
    # ... and the decision writer refuses the submission itself, traces it, and the person is told where to sign.
    await wait_until(lambda: len(fake_slack.calls_to("chat.postEphemeral")) == 2)
    assert fake_slack.calls_to("chat.postEphemeral")[1].params["text"] == expected
    refused = (
        "SELECT count(*) FROM trace_event WHERE kind = 'decision_refused' AND payload->>'code' = 'needs_person_key'"
    )
    assert await count(conn, refused) == 1
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


async def test_forged_or_stale_slack_requests_are_401(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    _, status = await _close_with_cards(conn, chat_runtime, default_books)
    body = button_click(_gate(status, "accruals"), "U0ALICE")
    forged = await chat_api.post("/slack/events", content=body, headers=slack_headers(body, secret="wrong"))
    stale = await chat_api.post(
        "/slack/events", content=body, headers=slack_headers(body, timestamp=int(time.time()) - 301)
    )
    assert forged.status_code == stale.status_code == 401
    await asyncio.sleep(0.3)
    assert fake_slack.calls_to("users.info") == []
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


async def test_close_status_answers_in_channel_through_the_response_url(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    await _close_with_cards(conn, chat_runtime, default_books)
    before = len(fake_slack.calls_to("chat.postMessage"))
    body = slash_command("status", "U0ALICE")
    assert (await chat_api.post("/slack/events", content=body, headers=slack_headers(body))).status_code == 200
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    (answer,) = fake_slack.responses()
    # response_url works in a channel the bot never joined: no chat.postMessage, which would need it there.
    assert answer["response_type"] == "in_channel" and answer["blocks"]
    assert "Bank reconciliation" in json.dumps(answer) or "bank_reconciliation" in json.dumps(answer)
    await asyncio.sleep(0.3)
    assert len(fake_slack.calls_to("chat.postMessage")) == before


async def test_trace_export_uploads_one_file_equal_to_the_cli_export(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, database: Any
) -> None:
    close_id, _ = await _close_with_cards(conn, chat_runtime, default_books)
    body = slash_command(f"trace export csv {close_id}", "U0ALICE")
    assert (await chat_api.post("/slack/events", content=body, headers=slack_headers(body))).status_code == 200
    await wait_until(lambda: len(fake_slack.calls_to("files.completeUploadExternal")) == 1)
    assert len(fake_slack.uploads) == 1
    uploaded = next(iter(fake_slack.uploads.values()))
    cli = subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", "trace", "export", "--close", close_id, "--format", "csv"],
        env={**os.environ, "DATABASE_URL": database.url, "COUNTERSIGN_CONFIG_DIR": str(PROJECT_ROOT / "config")},
        capture_output=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    # The CLI's export also holds the Slack export's own `trace_exported` event, sealed after the upload's bytes.
    assert cli.stdout.startswith(uploaded)
    (exported,) = cli.stdout[len(uploaded) :].decode().splitlines()
    assert ",alice.chen," in exported and ",trace_exported," in exported
    assert hashlib.sha256(uploaded).hexdigest() in exported
    assert fake_slack.calls_to("files.upload") == []  # the retired method is never used


async def test_close_start_is_role_checked(conn: Any, chat_api: Any, chat_runtime: Any, fake_slack: Any) -> None:
    for n, user in enumerate(("U0CAROL", "U0DANA", "U0ERIN"), start=1):  # cfo, accountant, auditor: may not start
        refused = slash_command("start NEWCO 2026-10 synthetic", user)
        await chat_api.post("/slack/events", content=refused, headers=slack_headers(refused))
        await wait_until(lambda n=n: len(fake_slack.responses()) == n)
        assert fake_slack.responses()[-1]["response_type"] == "ephemeral"
    assert await count(conn, "SELECT count(*) FROM close_run") == 0
    allowed = slash_command("start NEWCO 2026-10 synthetic", "U0ALICE")
    await chat_api.post("/slack/events", content=allowed, headers=slack_headers(allowed))
    await wait_until(lambda: len(fake_slack.responses()) == 4, timeout_s=60)
    announced = fake_slack.responses()[-1]
    assert announced["response_type"] == "in_channel" and "started the close for NEWCO 2026-10" in announced["text"]
    assert await count(conn, "SELECT count(*) FROM close_run WHERE started_by = 'alice.chen'") == 1


async def test_close_start_without_books_is_refused_unless_synthetic(
    conn: Any, chat_api: Any, chat_runtime: Any, fake_slack: Any
) -> None:
    typo = slash_command("start NEWC0 2026-10", "U0ALICE")
    await chat_api.post("/slack/events", content=typo, headers=slack_headers(typo))
    await wait_until(lambda: len(fake_slack.responses()) == 1, timeout_s=60)
    (refusal,) = fake_slack.responses()
    assert refusal["response_type"] == "ephemeral"
    assert "no loaded books" in refusal["text"] and "/close start NEWC0 2026-10 synthetic" in refusal["text"]
    assert await count(conn, "SELECT count(*) FROM close_run") == 0
    assert await count(conn, "SELECT count(*) FROM book_set") == 0


async def test_unknown_subcommands_get_usage(conn: Any, chat_api: Any, fake_slack: Any) -> None:
    body = slash_command("frobnicate", "U0ALICE")
    await chat_api.post("/slack/events", content=body, headers=slack_headers(body))
    await wait_until(lambda: len(fake_slack.responses()) == 1)
    (usage,) = fake_slack.responses()
    assert usage["response_type"] == "ephemeral" and "Usage" in usage["text"]
    assert fake_slack.calls_to("chat.postEphemeral") == []  # chat.postEphemeral would need the bot in the channel


async def test_event_retries_are_handled_once(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    await _close_with_cards(conn, chat_runtime, default_books)
    before = len(fake_slack.calls_to("chat.postMessage"))
    event = {
        "token": "legacy",
        "team_id": "T01ACME",
        "api_app_id": "A0COUNTERSIGN",
        "type": "event_callback",
        "event_id": "Ev0001",
        "event_time": int(time.time()),
        "event": {
            "type": "app_mention",
            "user": "U0ALICE",
            "text": "<@UBOT> close status",
            "channel": SLACK_CHANNEL,
            "ts": "1700000200.000100",
            "event_ts": "1700000200.000100",
        },
    }
    body = json.dumps(event).encode()
    for retry in (None, "1", "2"):
        headers = slack_headers(body, content_type="application/json")
        if retry:
            headers |= {"x-slack-retry-num": retry, "x-slack-retry-reason": "http_timeout"}
        assert (await chat_api.post("/slack/events", content=body, headers=headers)).status_code == 200
    await wait_until(lambda: len(fake_slack.calls_to("chat.postMessage")) >= before + 1)
    await asyncio.sleep(0.5)
    assert len(fake_slack.calls_to("chat.postMessage")) == before + 1


async def test_rate_limited_posts_wait_for_retry_after_then_succeed(
    conn: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, teams_connector: Any
) -> None:
    fake_slack.fail("chat.postMessage", 429, headers={"Retry-After": "7"}, body={"ok": False, "error": "ratelimited"})
    close_id, _ = await _close_with_cards(conn, chat_runtime, default_books)
    row = await (
        await conn.execute(
            "SELECT status, attempts, extract(epoch FROM next_attempt_at - now()) FROM outbox_message"
            " WHERE last_error LIKE '%429%'"
        )
    ).fetchone()
    assert row is not None and row[0] == "pending" and row[1] == 1 and 5 < float(row[2]) <= 7.5
    await conn.execute("UPDATE outbox_message SET next_attempt_at = now() WHERE status = 'pending'")
    report = await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    assert report.sent == 1
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE status <> 'sent'") == 0
    assert (await close_status(conn, close_id))["deliveries_failed"] == []


async def test_a_permanent_failure_shows_in_close_status(
    conn: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, teams_connector: Any
) -> None:
    fake_slack.fail("chat.postMessage", 200, body={"ok": False, "error": "channel_not_found"}, times=3)
    _, status = await _close_with_cards(conn, chat_runtime, default_books)
    failed = status["deliveries_failed"]
    assert len(failed) == 3 and all("channel_not_found" in f["error"] for f in failed)
    assert {f["platform"] for f in failed} == {"slack"}


async def test_an_overdue_gate_reminds_the_channel_once_and_leaves_its_card_alone(
    conn: Any, chat_api: Any, chat_runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    close_id, status = await _close_with_cards(conn, chat_runtime, default_books)
    gate_id = _gate(status, "accruals")
    await rewrite_gate_as_owner(conn, gate_id, "due_at = now() - interval '1 hour'")
    posts_before = len(fake_slack.calls_to("chat.postMessage"))
    for _ in range(2):  # a second pass must not remind again
        async with engine_context(chat_runtime) as ctx:
            await advance(conn, close_id, ctx)
        await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    posts = fake_slack.calls_to("chat.postMessage")[posts_before:]
    reminders = [c for c in posts if c.params["channel"] == SLACK_CHANNEL]
    assert len(reminders) == 1
    # and each controller who may decide it is messaged directly, once (tests/bot/test_overdue_rerouting.py)
    assert sorted(c.params["channel"] for c in posts if c not in reminders) == ["DU0ALICE", "DU0BOB"]
    text = str(reminders[0].params.get("text", ""))
    assert reminders[0].params["channel"] == SLACK_CHANNEL
    assert "Reminder for role controller" in text and "accruals" in text and "Waiting never approves it" in text
    traced = await (
        await conn.execute(
            "SELECT payload->>'reminder' FROM trace_event WHERE kind = 'gate_overdue' AND close_id = %s", (close_id,)
        )
    ).fetchall()
    assert [row for (row,) in traced] == [text]  # the trace records the words the channel got (one wording, issue 20)
    assert await enqueue_card_updates(conn) == []  # what the worker runs: the reminder is not taken for a stale card
    assert fake_slack.calls_to("chat.update") == []
    decided = await close_status(conn, close_id)
    assert next(g for g in decided["gates"] if g["gate_id"] == gate_id)["status"] == "open"
