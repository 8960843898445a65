"""Journal postings (the ledger): reads and writes `journal` and `journal_line`.

Called by `countersign.engine.postings`, which owns the idempotency rule, the savepoint each posting runs in and
the trace event; the functions here run on the caller's connection and never open or commit a transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row


@dataclass(frozen=True)
class JournalLine:
    account: str
    amount: Decimal
    description: str


@dataclass(frozen=True)
class StoredJournalKey:
    """The journal a posting key already names, and the hash of the request that posted it."""

    journal_id: int
    request_hash: str


@dataclass(frozen=True)
class NewJournal:
    """A journal's header as the poster hands it over; the database numbers it."""

    idempotency_key: str
    request_hash: str
    entity: str
    period: str
    journal_date: date
    memo: str
    source_close: str | None
    source_task: str | None
    posted_by: str


async def journal_key(conn: AsyncConnection[Any], idempotency_key: str) -> StoredJournalKey | None:
    """Returns the journal the posting key already names with its request hash, or None when the key is unused."""
    async with conn.cursor(row_factory=class_row(StoredJournalKey)) as cur:
        await cur.execute(
            "SELECT journal_id, request_hash FROM journal WHERE idempotency_key = %s",
            (idempotency_key,),
        )
        return await cur.fetchone()


async def insert_journal(conn: AsyncConnection[Any], journal: NewJournal) -> int | None:
    """Returns the new journal's id, or None when a concurrent poster already holds the key (ON CONFLICT DO NOTHING)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO journal (idempotency_key, request_hash, entity, period, journal_date, memo,"
            " source_close, source_task, posted_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (idempotency_key) DO NOTHING RETURNING journal_id",
            (
                journal.idempotency_key,
                journal.request_hash,
                journal.entity,
                journal.period,
                journal.journal_date,
                journal.memo,
                journal.source_close,
                journal.source_task,
                journal.posted_by,
            ),
        )
        inserted: int | None = await cur.fetchone()
    return inserted


async def insert_journal_lines(conn: AsyncConnection[Any], journal_id: int, lines: Sequence[JournalLine]) -> None:
    """Writes the journal's lines numbered from 1 in the order given; returns nothing."""
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO journal_line (journal_id, line_no, account, amount, description) VALUES (%s, %s, %s, %s, %s)",
            [
                (journal_id, line_no, line.account, line.amount, line.description)
                for line_no, line in enumerate(lines, start=1)
            ],
        )


async def check_journal_balanced(conn: AsyncConnection[Any]) -> None:
    """Checks the deferred balance triggers now (raising the database's refusal), then defers them again."""
    async with conn.cursor() as cur:
        await cur.execute("SET CONSTRAINTS journal_balanced, journal_line_balanced IMMEDIATE")
        await cur.execute("SET CONSTRAINTS journal_balanced, journal_line_balanced DEFERRED")


@dataclass(frozen=True)
class StoredJournal:
    """A posted journal's date and memo with its lines, in line order."""

    journal_id: int
    journal_date: date
    memo: str
    lines: tuple[JournalLine, ...]


async def posted_journal(conn: AsyncConnection[Any], idempotency_key: str) -> StoredJournal | None:
    """The journal the posting key names, with its lines; None when the key is unused."""
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT j.journal_id, j.journal_date, j.memo FROM journal j WHERE j.idempotency_key = %s",
            (idempotency_key,),
        )
        head = await cur.fetchone()
        if head is None:
            return None
        await cur.execute(
            "SELECT account, amount, description FROM journal_line WHERE journal_id = %s ORDER BY line_no",
            (head[0],),
        )
        lines = tuple(
            JournalLine(account, amount, description) for account, amount, description in await cur.fetchall()
        )
    return StoredJournal(head[0], head[1], head[2], lines)
