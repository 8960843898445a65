"""The drills' counts (countersign.store.integrity) against real PostgreSQL: each count reads the close's own rows and
nothing of another close's, and the trace reads count what is queued, sealed and signed."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import date
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from psycopg.conninfo import conninfo_to_dict

from countersign.audit.checkpoint import generate_signer
from countersign.audit.trace import append_event, seal_pending
from countersign.audit.transparency_log import sign_log_checkpoint
from countersign.bootstrap.database import Database
from countersign.store import integrity as store
from tests.engine.lifecycle_support import new_close, put_gate, put_task, seed_approver


@pytest.fixture
def owner(database: Database) -> Iterator[psycopg.Connection[Any]]:
    with database.connect(autocommit=True) as conn:
        seed_approver(conn)
        yield conn


@pytest_asyncio.fixture
async def engine(database: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as conn:
        yield conn


def _dispatch(owner: psycopg.Connection[Any], close_id: str, task: str, calls: int) -> None:
    owner.execute(
        "INSERT INTO dispatch (idempotency_key, close_id, task, attempt, specialist, input_digest, calls)"
        " VALUES (%s, %s, %s, 1, 'accruals', 'd', %s)",
        (uuid.uuid4().hex, close_id, task, calls),
    )


def _journal(owner: psycopg.Connection[Any], close_id: str, lines: int) -> None:
    entity = owner.execute("SELECT entity FROM close_run WHERE close_id = %s", (close_id,)).fetchone()
    assert entity is not None
    owner.execute(
        "INSERT INTO accounting_period (entity, period) VALUES (%s, '2026-10') ON CONFLICT DO NOTHING", entity
    )
    with owner.transaction():  # balanced at commit
        row = owner.execute(
            "INSERT INTO journal (idempotency_key, request_hash, entity, period, journal_date, memo, source_close,"
            " source_task, posted_by) VALUES (%s, 'h', %s, '2026-10', %s, 'm', %s, 'accruals', 'test')"
            " RETURNING journal_id",
            (uuid.uuid4().hex, entity[0], date(2026, 10, 31), close_id),
        ).fetchone()
        assert row is not None
        for line_no in range(1, lines + 1):
            amount = 10 if line_no < lines else -10 * (lines - 1)
            owner.execute(
                "INSERT INTO journal_line (journal_id, line_no, account, amount, description)"
                " VALUES (%s, %s, '4000', %s, 'x')",
                (row[0], line_no, amount),
            )


def _card(owner: psycopg.Connection[Any], close_id: str, gate_id: str, channel: str, status: str) -> None:
    owner.execute(
        "INSERT INTO outbox_message (dedupe_key, close_id, gate_id, platform, channel, kind, status)"
        " VALUES (%s, %s, %s, 'slack', %s, 'gate_card', %s)",
        (uuid.uuid4().hex, close_id, gate_id, channel, status),
    )


async def test_the_server_names_itself_and_its_database(engine: Any, database: Database) -> None:
    server = await store.read_server(engine)
    assert server.version.startswith("PostgreSQL ") and " on " in server.version  # the full string: the engine cuts it
    assert server.database == conninfo_to_dict(database.url)["dbname"]
    assert server.host


async def test_posting_counts_read_the_close_s_own_dispatches_and_journals(owner: Any, engine: Any) -> None:
    close_id, other = new_close(owner), new_close(owner)
    _dispatch(owner, close_id, "accruals", calls=2)
    _dispatch(owner, close_id, "bank", calls=3)
    _dispatch(owner, other, "accruals", calls=7)
    _journal(owner, close_id, lines=3)
    _journal(owner, other, lines=2)

    assert await store.posting_counts(engine, close_id) == store.PostingCounts(2, 5, 1, 3)
    assert await store.posting_counts(engine, str(uuid.uuid4())) == store.PostingCounts(0, 0, 0, 0)


async def test_gate_counts_find_each_channel_without_exactly_one_sent_card(owner: Any, engine: Any) -> None:
    close_id = new_close(owner)
    for task in ("a", "b", "c"):
        put_task(owner, close_id, task, "awaiting_gate")
    sent, pending, _ = (put_gate(owner, close_id, task) for task in ("a", "b", "c"))
    _card(owner, close_id, sent, "#close", "sent")
    _card(owner, close_id, sent, "#audit", "sent")
    _card(owner, close_id, pending, "#close", "pending")

    counts = await store.gate_counts(engine, close_id)
    assert counts == store.GateCounts(gates=3, cards_not_sent_once=1)  # the pending card; a gate with none is not here


async def test_closed_count_counts_only_the_closed_of_the_ids(owner: Any, engine: Any) -> None:
    closed, running, elsewhere = new_close(owner, status="closed"), new_close(owner), new_close(owner, status="closed")
    assert await store.closed_count(engine, [closed, running]) == 1
    assert await store.closed_count(engine, [running]) == 0
    assert await store.closed_count(engine, [closed, elsewhere, str(uuid.uuid4())]) == 2


async def test_the_trace_reads_count_the_queue_the_head_and_the_checkpoint(conn: Any) -> None:
    before = await store.sealing_sample(conn)
    async with conn.transaction():
        for _ in range(2):
            await append_event(conn, actor="drill", kind="drill_probe", payload={})
    queued = await store.sealing_sample(conn)
    assert (queued.pending, queued.head_seq) == (before.pending + 2, before.head_seq)
    assert queued.oldest_pending_id is not None

    await seal_pending(conn)
    sealed = await store.sealing_sample(conn)
    assert (sealed.pending, sealed.oldest_pending_id, sealed.head_seq) == (0, None, before.head_seq + 2)

    close_id = str(uuid.uuid4())
    assert await store.closing_rows(conn, [close_id]) == []
    signer = generate_signer("countersign.test/store")
    await sign_log_checkpoint(conn, signer, signer.name, actor="drill")
    signed = await store.sealing_sample(conn)
    assert signed.checkpoint_size >= sealed.head_seq


async def test_closing_rows_read_each_sealed_period_closed_with_the_newest_checkpoint(
    owner: Any, conn: Any, engine: Any
) -> None:
    closed, unclosed = new_close(owner), new_close(owner)
    async with conn.transaction():
        await append_event(conn, actor="drill", kind="period_closed", payload={}, close_id=closed)
    assert await store.closing_rows(engine, [closed, unclosed]) == []  # queued, not yet sealed
    await seal_pending(conn)
    [row] = await store.closing_rows(engine, [closed, unclosed])
    assert (row.close_id, row.signed_size) == (closed, 0) and row.closed_seq >= 1
