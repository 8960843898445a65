"""Faults: specialists failing or timing out, a backend killed mid-transaction, a chat platform down."""

from __future__ import annotations

import asyncio
import time
from datetime import date
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from countersign.engine.dispatch import NotReplayable, replay_dead_letter
from countersign.engine.orchestrator import EngineContext, advance
from countersign.engine.postings import JournalLine, JournalRequest, post_journal
from countersign.engine.runs import close_status
from countersign.policy import EscalationReason
from countersign.specialists import reconciliation
from countersign.specialists.client import SpecialistError, open_in_process
from tests.engine.workflow_support import approve_open_gates
from tests.support import count, start_default_close


class FlakySpecialist:
    """Answers like the real in-process specialists, except that AP reconciliation fails `failures` times."""

    def __init__(self, client: Any, failures: int) -> None:
        self.client = client
        self.failures_left = failures
        self.ap_calls = 0

    async def __call__(self, specialist: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
        if payload.get("ledger") == "ap":
            self.ap_calls += 1
            if self.failures_left > 0:
                self.failures_left -= 1
                raise SpecialistError(specialist, "HTTP 500 from the specialist")
        return dict(await self.client.call(specialist, payload, key))


async def _due_now(conn: Any) -> None:
    await conn.execute("UPDATE dispatch SET next_attempt_at = now() WHERE status = 'failed'")


async def test_a_failing_specialist_is_retried_with_backoff_then_succeeds(
    conn: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    async with open_in_process() as client:
        flaky = FlakySpecialist(client, failures=2)
        ctx = EngineContext(runtime.policy, runtime.workflows, flaky)
        first = await advance(conn, close_id, ctx)
        assert any("will retry" in s for s in first.steps)
        backing_off = await advance(conn, close_id, ctx)  # too soon: nothing is called
        assert flaky.ap_calls == 1 and any("waiting to retry" in s for s in backing_off.steps)
        await _due_now(conn)
        await advance(conn, close_id, ctx)
        await _due_now(conn)
        await advance(conn, close_id, ctx)
    assert flaky.ap_calls == 3
    status = await close_status(conn, close_id)
    assert next(t for t in status["tasks"] if t["task"] == "ap_reconciliation")["status"] == "done"
    assert status["dead_letters"] == []
    assert await count(conn, "SELECT count(*) FROM dispatch WHERE task = 'ap_reconciliation'") == 1


async def test_three_failures_dead_letter_the_dispatch_and_escalate_the_task_to_a_person(
    conn: Any, runtime: Any, api: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    async with open_in_process() as client:
        flaky = FlakySpecialist(client, failures=3)
        ctx = EngineContext(runtime.policy, runtime.workflows, flaky)
        await advance(conn, close_id, ctx)
        for _ in range(2):
            await _due_now(conn)
            await advance(conn, close_id, ctx)
        status = await close_status(conn, close_id)
        assert status["status"] == "halted"
        (dead,) = status["dead_letters"]
        assert dead["task"] == "ap_reconciliation" and dead["failures"] == 3 and "HTTP 500" in dead["error"]
        ap = next(t for t in status["tasks"] if t["task"] == "ap_reconciliation")
        assert ap["status"] == "halted" and "dead-lettered" in ap["reason"]
        (escalation,) = [g for g in status["gates"] if g["task"] == "ap_reconciliation"]
        assert escalation["kind"] == "escalation"
        assert escalation["approver_role"] == runtime.policy.escalation_owner(EscalationReason.SPECIALIST_DEAD_LETTERED)
        await advance(conn, close_id, ctx)
        assert flaky.ap_calls == 3  # a dead letter is not retried by itself
        with pytest.raises(NotReplayable):  # no machine path around the person: only the escalation gate re-runs it
            await replay_dead_letter(conn, dead["dispatch_id"], actor="countersign-cli")
        assert (await close_status(conn, close_id))["dead_letters"] == [dead]

        await approve_open_gates(api, conn, close_id, tasks={"ap_reconciliation"})
        await advance(conn, close_id, ctx)
        assert flaky.ap_calls == 4  # the re-run is a new attempt with a fresh dispatch
        status = await close_status(conn, close_id)
        assert status["dead_letters"] == []
        ap = next(t for t in status["tasks"] if t["task"] == "ap_reconciliation")
        assert ap["status"] == "awaiting_gate"  # low tier, but escalated work needs a person before it completes
        await approve_open_gates(api, conn, close_id, tasks={"ap_reconciliation"})
        await advance(conn, close_id, ctx)
    status = await close_status(conn, close_id)
    assert next(t for t in status["tasks"] if t["task"] == "ap_reconciliation")["status"] == "done"


async def test_a_specialist_that_times_out_counts_as_a_failure(conn: Any, runtime: Any, default_books: Any) -> None:
    def slow(payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("ledger") == "ap":
            time.sleep(1.0)
        return reconciliation.handle(payload)

    close_id = await start_default_close(conn, runtime, default_books)
    async with open_in_process({"reconciliation": slow}) as client:

        async def impatient(specialist: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
            return await client.call(specialist, payload, key, timeout_s=0.3)

        report = await advance(conn, close_id, EngineContext(runtime.policy, runtime.workflows, impatient))
    assert any("ap_reconciliation: specialist failed (1 of 3)" in s for s in report.steps)
    row = await (
        await conn.execute("SELECT status, failures, error FROM dispatch WHERE task = 'ap_reconciliation'")
    ).fetchone()
    assert row[0] == "failed" and row[1] == 1 and "no answer within" in row[2]


async def test_a_backend_terminated_mid_transaction_leaves_no_partial_journal(conn: Any, database: Any) -> None:
    await conn.execute("INSERT INTO accounting_period (entity, period) VALUES ('ACME-UK', '2026-10')")
    victim = await psycopg.AsyncConnection.connect(database.url)
    pid = (await (await victim.execute("SELECT pg_backend_pid()")).fetchone())[0]  # type: ignore[index]
    await victim.execute(
        "INSERT INTO journal (idempotency_key, request_hash, entity, period, journal_date, memo, posted_by)"
        " VALUES ('k', 'h', 'ACME-UK', '2026-10', '2026-10-31', 'half', 'test')"
    )
    await conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(psycopg.OperationalError):
        await victim.execute("INSERT INTO journal_line VALUES (1, 1, '6400', 10.00, 'x')")
    assert await count(conn, "SELECT count(*) FROM journal") == 0
    request = JournalRequest(
        "k",
        "ACME-UK",
        "2026-10",
        date(2026, 10, 31),
        "whole",
        [JournalLine("6400", Decimal("10.00"), "d"), JournalLine("2100", Decimal("-10.00"), "c")],
    )
    assert (await post_journal(conn, request, posted_by="test")).created
    assert await count(conn, "SELECT count(*) FROM journal") == 1


async def test_a_chat_outage_delays_cards_but_loses_none(
    conn: Any, runtime: Any, default_books: Any, fake_slack: Any
) -> None:
    from dataclasses import replace

    from countersign.bootstrap.chat import build_senders
    from countersign.bootstrap.runtime import engine_context
    from countersign.delivery.worker import deliver_due

    rt = replace(
        runtime,
        settings=runtime.settings.model_copy(
            update=dict(
                slack_bot_token="xoxb", slack_signing_secret="s", slack_api_url=fake_slack.url, slack_channel="C0OUTAGE"
            )
        ),
    )
    fake_slack.fail("chat.postMessage", 503, times=5)
    close_id = await start_default_close(conn, rt, default_books)
    async with engine_context(rt) as ctx:
        await advance(conn, close_id, ctx)
    senders = build_senders(rt.settings)
    first = await deliver_due(conn, senders)  # type: ignore[arg-type]
    assert first.sent == 0 and first.retried == 3
    for _ in range(3):
        await conn.execute("UPDATE outbox_message SET next_attempt_at = now() WHERE status = 'pending'")
        await deliver_due(conn, senders)  # type: ignore[arg-type]
        await asyncio.sleep(0)
    assert await count(conn, "SELECT count(*) FROM outbox_message WHERE status = 'sent'") == 3
    assert len([c for c in fake_slack.calls_to("chat.postMessage") if c.params.get("blocks")]) == 3 + 5
    assert (await close_status(conn, close_id))["deliveries_failed"] == []
