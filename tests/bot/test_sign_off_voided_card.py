"""A voided sign-off updates the gate's posted cards in place, in words (migration sign_off_voided, docs/adr/0046)."""

from __future__ import annotations

import json
import uuid
from datetime import date
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.database import Database
from countersign.bootstrap.runtime import engine_context
from countersign.callbacks.principals import upsert_principals
from countersign.delivery.worker import deliver_due
from countersign.engine.orchestrator import advance
from countersign.engine.postings import JournalLine, JournalRequest, post_journal
from countersign.engine.runs import close_status
from tests.bot.conftest import PEOPLE, wait_until
from tests.support import count, post_decision, start_default_close


def _voided_updates(fake_slack: Any) -> list[str]:
    return [
        text
        for call in fake_slack.calls_to("chat.update")
        if "Sign-off voided" in (text := json.dumps(call.params, ensure_ascii=False))
    ]


async def test_a_voided_sign_off_updates_the_posted_card_in_words(
    conn: Any, database: Database, chat_runtime: Any, chat_api: Any, default_books: Any, fake_slack: Any
) -> None:
    close_id = await start_default_close(conn, chat_runtime, default_books)
    await upsert_principals(conn, PEOPLE)
    senders = build_senders(chat_runtime.settings)
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
        await deliver_due(conn, senders)  # type: ignore[arg-type]
        gate_id = next(g["gate_id"] for g in (await close_status(conn, close_id))["gates"] if g["task"] == "accruals")
        response = await post_decision(chat_api, gate_id, "alice.chen")
        assert response.status_code == 200, response.text
        await advance(conn, close_id, ctx)
        await deliver_due(conn, senders)  # type: ignore[arg-type]
        assert _voided_updates(fake_slack) == []

        row = await (await conn.execute("SELECT accounts FROM gate WHERE gate_id = %s", (gate_id,))).fetchone()
        assert row is not None
        async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
            await post_journal(
                engine,
                JournalRequest(
                    idempotency_key=f"late:{uuid.uuid4()}",
                    entity="ACME-UK",
                    period="2026-10",
                    journal_date=date(2026, 10, 29),
                    memo="late supplier invoice",
                    lines=[
                        JournalLine(row[0][0], Decimal("1250.00"), "late invoice"),
                        JournalLine("9999", Decimal("-1250.00"), "suspense"),
                    ],
                ),
                posted_by="orchestrator",
            )
        await advance(conn, close_id, ctx)
        assert (
            await count(
                conn,
                "SELECT count(*) FROM outbox_message WHERE kind = 'card_update' AND gate_id = %s"
                " AND payload->>'state' LIKE 'voided:%%'",
                gate_id,
            )
            >= 1
        )
        await deliver_due(conn, senders)  # type: ignore[arg-type]
    await wait_until(lambda: bool(_voided_updates(fake_slack)))
    update = _voided_updates(fake_slack)[0]
    assert "GBP 1,250.00" in update and "after approval" in update
