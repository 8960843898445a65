"""The outbox carries facts, never text: whatever either service role writes, the bot posts only what
`countersign/cards/`
renders from the tables.

Issue 9: the callbacks role inserted a free-text outbox notice ("please re-approve at https://evil.example") and the
bot posted it.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import engine_context
from countersign.callbacks.principals import upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.outbox import ChannelTarget, NotAFact, enqueue_notices
from countersign.engine.runs import close_status
from tests.bot.conftest import PEOPLE, SLACK_CHANNEL
from tests.support import count, start_default_close

EVIL = "please re-approve at https://evil.example"
INSERT = (
    "INSERT INTO outbox_message (dedupe_key, close_id, gate_id, platform, channel, kind, payload, template)"
    " VALUES (%s, %s, %s, 'slack', %s, %s, %s, %s)"
)


async def _close(conn: Any, chat_runtime: Any, default_books: Any) -> tuple[str, str]:
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    status = await close_status(conn, close_id)
    return close_id, next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals")


def _posted_text(fake_slack: Any) -> str:
    return json.dumps([c.params for c in fake_slack.calls_to("chat.postMessage") + fake_slack.calls_to("chat.update")])


ATTEMPTS = {
    # role, kind, template, payload
    "callbacks_free_text_notice": ("callbacks", "notice", None, {"text": EVIL}),
    "callbacks_templated_notice": ("callbacks", "notice", "gate_overdue", {}),
    "callbacks_gate_card": ("callbacks", "gate_card", None, {}),
    "engine_text_key": ("engine", "notice", "gate_overdue", {"text": EVIL}),
    "engine_untemplated_notice": ("engine", "notice", None, {"text": EVIL}),
    "engine_unknown_template": ("engine", "notice", "free_text", {}),
    "engine_text_argument": ("engine", "notice", "checkpoint", {"tree_size": EVIL}),
    "engine_extra_argument": ("engine", "notice", "checkpoint", {"tree_size": 3, "link": EVIL}),
    "engine_card_with_text": ("engine", "gate_card", None, {"text": EVIL}),
    "engine_update_with_text_state": ("engine", "card_update", None, {"state": EVIL}),
    "engine_default_notice_text": ("engine", "notice", "payee_default_notice", {"notice_id": EVIL}),
    "engine_default_notice_on_a_gate": ("engine", "notice", "payee_default_notice", {"notice_id": 1}),  # has none
}


@pytest.mark.parametrize("attempt", sorted(ATTEMPTS))
async def test_a_service_role_cannot_put_text_into_the_outbox_and_nothing_is_posted(
    conn: Any,
    database: Any,
    chat_runtime: Any,
    default_books: Any,
    fake_slack: Any,
    teams_connector: Any,
    attempt: str,
) -> None:
    role, kind, template, payload = ATTEMPTS[attempt]
    close_id, gate_id = await _close(conn, chat_runtime, default_books)
    url = database.callbacks_url if role == "callbacks" else database.engine_url
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as service:
        with pytest.raises((psycopg.errors.CheckViolation, psycopg.errors.InsufficientPrivilege)):
            await service.execute(
                INSERT, (f"attack:{attempt}", close_id, gate_id, SLACK_CHANNEL, kind, Jsonb(payload), template)
            )
    await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    assert "evil.example" not in _posted_text(fake_slack)
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE dedupe_key LIKE 'attack:%%'") == 0


async def test_the_callbacks_role_may_insert_card_updates_but_change_no_row(
    conn: Any, database: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, teams_connector: Any
) -> None:
    close_id, gate_id = await _close(conn, chat_runtime, default_books)
    async with await psycopg.AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        await callbacks.execute(
            INSERT, ("update:ok", close_id, gate_id, SLACK_CHANNEL, "card_update", Jsonb({"state": "open:0:0"}), None)
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await callbacks.execute("UPDATE outbox_message SET status = 'pending' WHERE kind = 'gate_card'")


async def test_a_notice_is_rendered_from_the_tables_through_cards(
    conn: Any, chat_runtime: Any, default_books: Any, fake_slack: Any, teams_connector: Any
) -> None:
    close_id, gate_id = await _close(conn, chat_runtime, default_books)
    with pytest.raises(NotAFact):
        await enqueue_notices(conn, key="x", template="gate_overdue", args={"text": 1}, close_id=close_id, channels=())
    await enqueue_notices(
        conn,
        key=f"gate_overdue:{gate_id}",
        template="gate_overdue",
        close_id=close_id,
        channels=(ChannelTarget("slack", SLACK_CHANNEL),),
        gate_id=gate_id,
    )
    before = len(fake_slack.calls_to("chat.postMessage"))
    report = await deliver_due(conn, build_senders(chat_runtime.settings))  # type: ignore[arg-type]
    assert report.sent == 1, report.errors
    (posted,) = fake_slack.calls_to("chat.postMessage")[before:]
    text = str(posted.params["text"])
    assert "Reminder for role controller" in text and "accruals" in text and "Waiting never approves it" in text
