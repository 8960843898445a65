"""The outbox table's statements (countersign.store.outbox) against real PostgreSQL, as the engine role runs them: a
message inserts once under its key, a claim takes only due unclaimed messages and only its holder renews or finishes
it, a retry past its budget dead-letters, a dead letter is listed and redriven once, and a posted card reads the state
its gate is in now beside the state last rendered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest_asyncio

from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.states import GateStatus, OutboxKind, OutboxStatus
from countersign.store import outbox as store
from tests.support import count, start_default_close

HOLDER = "host-a:101:x1"


@pytest_asyncio.fixture
async def engine(database: Any) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as connection:
        yield connection


async def _notice(engine: Any, n: int, *, close_id: str | None = None) -> int:
    message_id = await store.insert_message(
        engine,
        dedupe_key=f"checkpoint:{n}:slack:C1",
        platform="slack",
        channel="C1",
        kind=OutboxKind.NOTICE,
        close_id=close_id,
        template="checkpoint",
        payload={"tree_size": n},
    )
    assert message_id is not None
    return message_id


async def test_a_message_inserts_once_under_its_key(engine: Any) -> None:
    first = await _notice(engine, 1)
    again = await store.insert_message(
        engine,
        dedupe_key="checkpoint:1:slack:C1",
        platform="slack",
        channel="C1",
        kind=OutboxKind.NOTICE,
        template="checkpoint",
        payload={"tree_size": 2},
    )
    assert again is None
    assert await count(engine, "SELECT count(*) FROM outbox_message WHERE message_id = %s", first) == 1
    assert await count(engine, "SELECT (payload->>'tree_size')::int FROM outbox_message") == 1


async def test_a_claim_takes_due_unclaimed_messages_and_only_its_holder_finishes_it(engine: Any) -> None:
    ids = [await _notice(engine, n) for n in (1, 2, 3)]
    claimed = await store.claim_due(engine, holder=HOLDER, limit=2, message_ids=None, claim_s=60)
    assert [m.message_id for m in claimed] == ids[:2]
    assert claimed[0].kind is OutboxKind.NOTICE and claimed[0].payload == {"tree_size": 1}
    assert claimed[0].template == "checkpoint" and claimed[0].attempts == 0
    # claimed ones are not due for another holder; a filter names the ones it may take
    assert await store.claim_due(engine, holder="host-b:7:y", limit=50, message_ids=ids[:2], claim_s=60) == []
    (third,) = await store.claim_due(engine, holder="host-b:7:y", limit=50, message_ids=None, claim_s=60)
    assert third.message_id == ids[2]

    assert await store.renew_claim(engine, ids[0], holder=HOLDER, claim_s=60)
    assert not await store.renew_claim(engine, ids[0], holder="host-b:7:y", claim_s=60)

    await store.mark_sent(engine, ids[0], platform_message_id="p1", rendered_state=None, holder="host-b:7:y")
    assert await count(engine, "SELECT count(*) FROM outbox_message WHERE status = 'sent'") == 0  # not theirs
    await store.mark_sent(engine, ids[0], platform_message_id="p1", rendered_state=None, holder=HOLDER)
    sent = "SELECT count(*) FROM outbox_message WHERE status = 'sent' AND attempts = 1 AND claimed_by IS NULL"
    assert await count(engine, sent) == 1
    assert not await store.renew_claim(engine, ids[0], holder=HOLDER, claim_s=60)  # no longer pending

    assert await store.release_outbox_claims(engine, "host-b:") == 1
    (retaken,) = await store.claim_due(engine, holder="host-c:1:z", limit=50, message_ids=None, claim_s=60)
    assert retaken.message_id == ids[2]


async def test_a_retry_within_its_budget_waits_and_past_it_dead_letters(
    engine: Any, runtime: Any, conn: Any, default_books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    waiting, spent = await _notice(engine, 1, close_id=close_id), await _notice(engine, 2, close_id=close_id)
    status = await store.schedule_retry(
        engine, waiting, budget_s=3600, wait_s=30, honour_s=0, holder=None, error="503", gave_up="gave up"
    )
    assert status is OutboxStatus.PENDING
    due_in = "SELECT extract(epoch FROM next_attempt_at - now())::int FROM outbox_message WHERE message_id = %s"
    assert 28 <= await count(engine, due_in, waiting) <= 30
    assert await store.next_pending_due_at(engine) is not None

    status = await store.schedule_retry(
        engine, spent, budget_s=0, wait_s=30, honour_s=0, holder=None, error="503", gave_up="budget spent: 503"
    )
    assert status is OutboxStatus.FAILED
    again = await store.schedule_retry(
        engine, spent, budget_s=0, wait_s=30, honour_s=0, holder=None, error="503", gave_up="x"
    )
    assert again is None  # no longer pending
    (failed,) = await store.failed_deliveries(engine, close_id)
    assert (failed.message_id, failed.kind, failed.error, failed.attempts) == (
        spent,
        OutboxKind.NOTICE,
        "budget spent: 503",
        1,
    )

    await store.mark_failed(engine, waiting, error="404", holder=None)
    assert [f.message_id for f in await store.failed_deliveries(engine, close_id)] == [waiting, spent]
    assert await store.next_pending_due_at(engine) is None

    counts = await store.message_counts(engine)
    assert [(c.status, c.platform, c.messages) for c in counts] == [(OutboxStatus.FAILED, "slack", 2)]
    assert await store.redrive_dead_letters(engine, platform="teams") == []
    assert await store.redrive_dead_letters(engine, since=datetime.now().astimezone()) == []
    assert await store.redrive_dead_letters(engine) == [waiting, spent]
    assert await store.redrive_dead_letters(engine) == []
    pending = await store.pending_age(engine, 3600)
    assert pending.oldest_pending_age_s is not None and pending.oldest_pending_age_s < 60
    assert pending.past_budget == 0
    assert (await store.pending_age(engine, 0)).past_budget == 2


async def test_an_empty_outbox_has_no_pending_age(engine: Any) -> None:
    assert await store.message_counts(engine) == []
    pending = await store.pending_age(engine, 3600)
    assert (pending.oldest_pending_age_s, pending.past_budget) == (None, 0)
    assert await store.next_pending_due_at(engine) is None


async def _a_gate_card(
    conn: Any, engine: Any, runtime: Any, engine_ctx: Any, default_books: Path, channel: str
) -> tuple[str, str, int]:
    """A close advanced to its first gates, and a card for its first gate queued (not yet sent) in `channel`."""
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    gate_id = str(next(g["gate_id"] for g in (await close_status(conn, close_id))["gates"]))
    card = await store.insert_message(
        engine,
        dedupe_key=f"gate_card:{gate_id}:slack:{channel}",
        platform="slack",
        channel=channel,
        kind=OutboxKind.GATE_CARD,
        close_id=close_id,
        gate_id=gate_id,
    )
    assert card is not None
    return close_id, gate_id, card


async def test_a_posted_card_reads_its_gate_now_beside_the_state_it_last_showed(
    conn: Any, engine: Any, runtime: Any, engine_ctx: Any, default_books: Path
) -> None:
    close_id, gate_id, card = await _a_gate_card(conn, engine, runtime, engine_ctx, default_books, "CSTORE")
    assert all(c.channel != "CSTORE" for c in await store.posted_cards(engine, gate_id))  # not sent yet
    assert await store.posted_message_id(engine, gate_id, "slack", "CSTORE") is None

    await store.mark_sent(engine, card, platform_message_id="1700000000.1", rendered_state="open:0:0")
    (posted,) = [c for c in await store.posted_cards(engine, gate_id) if c.channel == "CSTORE"]
    assert (posted.close_id, posted.platform, posted.status) == (close_id, "slack", GateStatus.OPEN)
    assert (posted.approvals, posted.rejections, posted.last_rendered) == (0, 0, "open:0:0")
    assert posted.state == "open:0:0"
    assert await store.posted_message_id(engine, gate_id, "slack", "CSTORE") == "1700000000.1"
    assert await store.posted_message_id(engine, gate_id, "slack", "COTHER") is None
    assert [c.channel for c in await store.posted_cards(engine, "00000000-0000-0000-0000-000000000000")] == []


def _plan(owner: psycopg.Connection[Any], gate_id: str) -> str:
    """The generic plan (what a prepared statement runs after its fifth use) of one gate's posted-card read."""
    owner.execute("SET plan_cache_mode = force_generic_plan")
    owner.execute("DEALLOCATE ALL")
    owner.execute("PREPARE posted_cards_of_gate(uuid) AS " + store.POSTED_CARDS_OF_GATE.replace("%s", "$1"))
    rows = owner.execute(f"EXPLAIN EXECUTE posted_cards_of_gate('{gate_id}')").fetchall()
    return "\n".join(row[0] for row in rows)


async def test_a_decisions_card_read_finds_its_gates_cards_by_index_not_by_scanning_the_outbox(
    conn: Any, engine: Any, runtime: Any, engine_ctx: Any, default_books: Path, database: Any
) -> None:
    """Every decision reads its gate's posted cards and each card's last render (`enqueue_card_updates`). Before
    migration `outbox_renders_index` that read scanned the whole outbox, every decision (about 30 ms with 150,000
    messages). With an outbox of 5,000 other messages, the plan reads outbox_message only through indexes; the same
    plan without the index scans it (the control)."""
    _, gate_id, card = await _a_gate_card(conn, engine, runtime, engine_ctx, default_books, "CPLAN")
    await store.mark_sent(engine, card, platform_message_id="1700000000.2", rendered_state="open:0:0")
    with psycopg.connect(database.owner_url, autocommit=True) as owner:
        owner.execute(
            "INSERT INTO outbox_message (dedupe_key, platform, channel, kind, status, sent_at, template, payload)"
            " SELECT 'plan-notice:' || i, 'slack', 'CPLAN', 'notice', 'sent', now(), 'checkpoint',"
            "        jsonb_build_object('tree_size', i) FROM generate_series(1, 5000) i"
        )
        owner.execute("ANALYZE outbox_message")
        plan = _plan(owner, gate_id)
        assert "outbox_message_renders" in plan, plan
        assert "Seq Scan on outbox_message" not in plan, plan
        owner.execute("BEGIN")
        try:
            owner.execute("DROP INDEX outbox_message_renders")
            assert "Seq Scan on outbox_message" in _plan(owner, gate_id)  # the control: without it, the outbox is read
        finally:
            owner.execute("ROLLBACK")
    (posted,) = [c for c in await store.posted_cards(engine, gate_id) if c.channel == "CPLAN"]
    assert posted.last_rendered == "open:0:0"
