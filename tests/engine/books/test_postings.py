"""Journals: balanced at commit, idempotent by key, loud on a changed payload, nothing into a closed period."""

from __future__ import annotations

import asyncio
from datetime import date
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from countersign.engine.postings import JournalLine, JournalRequest, PostingConflict, PostingRefused, post_journal
from tests.support import count


async def _open_period(conn: Any, entity: str = "ACME-UK", period: str = "2026-10") -> None:
    await conn.execute("INSERT INTO accounting_period (entity, period) VALUES (%s, %s)", (entity, period))


def _request(key: str = "k-1", amount: str = "100.00", credit: str | None = None) -> JournalRequest:
    return JournalRequest(
        idempotency_key=key,
        entity="ACME-UK",
        period="2026-10",
        journal_date=date(2026, 10, 31),
        memo="test accrual",
        lines=[
            JournalLine("6400", Decimal(amount), "fees"),
            JournalLine("2100", -Decimal(credit or amount), "accrued"),
        ],
    )


async def test_unbalanced_journal_cannot_commit_even_through_raw_sql(conn: Any) -> None:
    await _open_period(conn)
    with pytest.raises(psycopg.errors.CheckViolation, match="unbalanced"):
        async with conn.transaction():
            cur = await conn.execute(
                "INSERT INTO journal (idempotency_key, request_hash, entity, period, journal_date, memo, posted_by)"
                " VALUES ('raw', 'h', 'ACME-UK', '2026-10', '2026-10-31', 'raw', 'test') RETURNING journal_id"
            )
            (journal_id,) = await cur.fetchone()
            await conn.execute(
                "INSERT INTO journal_line VALUES (%s, 1, '6400', 100.00, 'd'), (%s, 2, '2100', -99.99, 'c')",
                (journal_id, journal_id),
            )
    assert await count(conn, "SELECT count(*) FROM journal") == 0
    assert await count(conn, "SELECT count(*) FROM journal_line") == 0


async def test_unbalanced_request_is_refused_and_leaves_nothing(conn: Any) -> None:
    await _open_period(conn)
    with pytest.raises(PostingRefused, match="unbalanced"):
        await post_journal(conn, _request(amount="100.00", credit="90.00"), posted_by="orchestrator")
    assert await count(conn, "SELECT count(*) FROM journal") == 0
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'journal_posted'") == 0


async def test_retried_posting_returns_the_original_journal(conn: Any) -> None:
    await _open_period(conn)
    first = await post_journal(conn, _request(), posted_by="orchestrator")
    second = await post_journal(conn, _request(), posted_by="orchestrator")
    assert first.created and not second.created
    assert first.journal_id == second.journal_id
    assert await count(conn, "SELECT count(*) FROM journal") == 1
    assert await count(conn, "SELECT count(*) FROM journal_line") == 2


async def test_changed_payload_under_an_old_key_is_refused_loudly(conn: Any) -> None:
    await _open_period(conn)
    original = await post_journal(conn, _request(amount="100.00"), posted_by="orchestrator")
    with pytest.raises(PostingConflict) as refused:
        await post_journal(conn, _request(amount="250.00"), posted_by="orchestrator")
    assert refused.value.journal_id == original.journal_id
    assert await count(conn, "SELECT sum(amount) FROM journal_line WHERE amount > 0") == 100


async def test_concurrent_retry_storm_posts_exactly_one_journal(database: Any, conn: Any) -> None:
    await _open_period(conn)

    async def poster() -> int:
        async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as own:
            return (await post_journal(own, _request(key="storm"), posted_by="orchestrator")).journal_id

    ids = await asyncio.gather(*(poster() for _ in range(36)))
    assert len(set(ids)) == 1
    assert await count(conn, "SELECT count(*) FROM journal") == 1
    assert await count(conn, "SELECT count(*) FROM journal_line") == 2


async def test_nothing_posts_into_a_closed_period_and_it_cannot_reopen(conn: Any) -> None:
    await _open_period(conn)
    await conn.execute("UPDATE accounting_period SET status = 'closed' WHERE entity = 'ACME-UK'")
    with pytest.raises(PostingRefused, match="closed"):
        await post_journal(conn, _request(), posted_by="orchestrator")
    with pytest.raises(psycopg.errors.CheckViolation, match="closed"):
        await conn.execute("UPDATE accounting_period SET status = 'open' WHERE entity = 'ACME-UK'")
    assert await count(conn, "SELECT count(*) FROM journal") == 0


async def test_posted_journals_are_immutable(conn: Any) -> None:
    await _open_period(conn)
    await post_journal(conn, _request(), posted_by="orchestrator")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await conn.execute("UPDATE journal_line SET amount = 1 WHERE line_no = 1")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await conn.execute("DELETE FROM journal")


async def test_a_line_appended_later_to_a_posted_journal_cannot_unbalance_it(conn: Any) -> None:
    await _open_period(conn)
    posted = await post_journal(conn, _request(), posted_by="orchestrator")
    with pytest.raises(psycopg.errors.CheckViolation, match="unbalanced"):
        await conn.execute("INSERT INTO journal_line VALUES (%s, 3, '6400', 5.00, 'sneaked in')", (posted.journal_id,))
    assert await count(conn, "SELECT count(*) FROM journal_line") == 2
