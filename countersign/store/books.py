"""The book tables a books directory loads into: reads and writes `book_set`, `bank_feed`, the `book_*` tables
(accounts, GL lines, bank statements and lines, rates, items) by COPY, and reads them back.

Called by `countersign.engine.books`, which validates every row before it reaches here and owns the transaction a
load runs in, and by `countersign.engine.runs` (a close's books: their currency and manifest, when it starts); the
functions here run on the caller's connection and never commit. The one exception to "never
open a transaction" is `insert_run_book_set` (a payment run's book set, for
countersign/engine/workflows/certificates/queries.py): its insert-or-read is one transaction of its own, a savepoint
inside the caller's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb


@dataclass(frozen=True)
class LoadedBefore:
    """A book set loaded before from the same files: its id, its GL line count and its newest bank feed version."""

    book_set_id: int
    gl_lines: int
    bank_feed_version: int


@dataclass(frozen=True)
class UnbalancedJournal:
    journal_id: str
    total: Decimal


@dataclass(frozen=True)
class StatementFinding:
    statement_id: str
    bank_account: str
    field: str
    problem: str


@dataclass(frozen=True)
class RecordedRate:
    from_currency: str
    to_currency: str
    rate: Decimal
    rate_date: date
    source: str


@dataclass(frozen=True)
class _AccountName:
    account: str
    name: str


async def copy_rows(
    conn: AsyncConnection[Any], table: str, names: Sequence[str], rows: Iterator[tuple[object, ...]]
) -> int:
    """COPYs the rows into `table`'s columns `names` (both the loader's own constants); returns how many it wrote."""
    count = 0
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(name) for name in names)
    )  # quoted as identifiers: a name is never spliced into the statement as text
    async with conn.cursor() as cur, cur.copy(statement) as copy:
        for row in rows:
            await copy.write_row(row)
            count += 1
    return count


async def loaded_before(conn: AsyncConnection[Any], entity: str, period: str, digest: str) -> LoadedBefore | None:
    """Returns the book set these exact files were loaded into before, or None when they were not."""
    async with conn.cursor(row_factory=class_row(LoadedBefore)) as cur:
        await cur.execute(
            "SELECT s.book_set_id,"
            "       (SELECT count(*) FROM book_gl_line g WHERE g.book_set_id = s.book_set_id) AS gl_lines,"
            "       COALESCE((SELECT max(feed_version) FROM bank_feed f WHERE f.book_set_id = s.book_set_id), 1)"
            "         AS bank_feed_version"
            "  FROM book_set s WHERE s.entity = %s AND s.period = %s AND s.digest = %s",
            (entity, period, digest),
        )
        return await cur.fetchone()


async def insert_book_set(
    conn: AsyncConnection[Any],
    *,
    entity: str,
    period: str,
    currency: str,
    source: str,
    manifest: dict[str, Any],
    digest: str,
) -> int:
    """Returns the id of the new book set."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING book_set_id",
            (entity, period, currency, source, Jsonb(manifest), digest),
        )
        new_id: int | None = await cur.fetchone()
    assert new_id is not None
    return new_id


async def insert_run_book_set(
    conn: AsyncConnection[Any],
    *,
    entity: str,
    period: str,
    currency: str,
    source: str,
    manifest: dict[str, Any],
    digest: str,
) -> int:
    """Returns the id of a payment run's book set: inserted once, the same row on a second call (the certificates
    workflow's runs, countersign/engine/workflows/certificates/queries.py)."""
    async with conn.transaction(), conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (entity, period, digest) DO NOTHING RETURNING book_set_id",
            (entity, period, currency, source, Jsonb(manifest), digest),
        )
        inserted: int | None = await cur.fetchone()
        if inserted is not None:
            return inserted
        await cur.execute(
            "SELECT book_set_id FROM book_set WHERE entity = %s AND period = %s AND digest = %s",
            (entity, period, digest),
        )
        found: int | None = await cur.fetchone()
    assert found is not None
    return found


async def first_unbalanced_journal(conn: AsyncConnection[Any], book_set_id: int) -> UnbalancedJournal | None:
    """Returns the book set's first GL journal (by id) whose lines do not sum to zero, or None when all balance."""
    async with conn.cursor(row_factory=class_row(UnbalancedJournal)) as cur:
        await cur.execute(
            "SELECT journal_id, sum(amount) AS total FROM book_gl_line WHERE book_set_id = %s"
            " GROUP BY journal_id HAVING sum(amount) <> 0 ORDER BY journal_id LIMIT 1",
            (book_set_id,),
        )
        return await cur.fetchone()


async def feed_version_with_digest(conn: AsyncConnection[Any], book_set_id: int, digest: str) -> int | None:
    """Returns the version of the book set's bank feed loaded with this digest, or None when none was."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT feed_version FROM bank_feed WHERE book_set_id = %s AND digest = %s", (book_set_id, digest)
        )
        existing: int | None = await cur.fetchone()
    return existing


async def next_feed_version(conn: AsyncConnection[Any], book_set_id: int) -> int:
    """Returns the version the book set's next bank feed takes (1 for its first)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT COALESCE(max(feed_version), 0) + 1 FROM bank_feed WHERE book_set_id = %s", (book_set_id,)
        )
        next_version: int | None = await cur.fetchone()
    assert next_version is not None
    return next_version


async def insert_bank_feed(
    conn: AsyncConnection[Any], book_set_id: int, version: int, source: str, digest: str, loaded_by: str
) -> None:
    """Records a bank feed version of the book set; returns nothing."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO bank_feed (book_set_id, feed_version, source, digest, loaded_by) VALUES (%s, %s, %s, %s, %s)",
            (book_set_id, version, source, digest, loaded_by),
        )


STATEMENT_CHECKS = """
WITH s AS (
    SELECT st.*, b.entity, b.period, b.currency AS functional, a.subtype, a.currency AS account_currency,
           (a.account IS NOT NULL) AS known
      FROM book_bank_statement st
      JOIN book_set b ON b.book_set_id = st.book_set_id
      LEFT JOIN book_account a ON a.book_set_id = st.book_set_id AND a.account = st.account
     WHERE st.book_set_id = %(book_set_id)s AND st.feed_version = %(feed)s
), moved AS (
    SELECT l.account, l.statement_id, count(*) AS entries, sum(l.amount) AS total
      FROM book_bank_line l
     WHERE l.book_set_id = %(book_set_id)s AND l.feed_version = %(feed)s AND l.statement_id IS NOT NULL
     GROUP BY l.account, l.statement_id
), earlier AS (
    SELECT DISTINCT ON (o.bank_account) o.bank_account, o.closing_balance, o.statement_id, b.period
      FROM book_bank_statement o JOIN book_set b ON b.book_set_id = o.book_set_id
     WHERE b.entity = (SELECT entity FROM book_set WHERE book_set_id = %(book_set_id)s)
       AND b.period < (SELECT period FROM book_set WHERE book_set_id = %(book_set_id)s)
     ORDER BY o.bank_account, b.period DESC, o.to_date DESC, o.book_set_id DESC, o.feed_version DESC
), first_in_feed AS (
    SELECT DISTINCT ON (bank_account) bank_account, statement_id, opening_balance, currency
      FROM s ORDER BY bank_account, from_date, statement_id
)
SELECT statement_id, bank_account, field, problem FROM (
    SELECT s.statement_id, s.bank_account, 1 AS rank, 'account' AS field,
           format('is booked to account %%s, which is not a cash account of the chart', s.account) AS problem
      FROM s WHERE NOT s.known OR s.subtype <> 'cash'
    UNION ALL
    SELECT s.statement_id, s.bank_account, 2, 'currency',
           format('is in %%s but account %%s is kept in %%s', s.currency, s.account,
                  coalesce(s.account_currency, s.functional))
      FROM s WHERE s.known AND s.currency <> coalesce(s.account_currency, s.functional)
    UNION ALL
    -- before the period: a statement loaded again lies in the period it was first loaded for
    SELECT s.statement_id, s.bank_account, 3, 'source_sha256',
           format('was loaded before for %%s %%s (a duplicate statement)', b.entity, b.period)
      FROM s JOIN book_bank_statement o ON o.bank_account = s.bank_account AND o.statement_id = s.statement_id
             AND o.source_sha256 = s.source_sha256 AND o.book_set_id <> s.book_set_id
      JOIN book_set b ON b.book_set_id = o.book_set_id AND b.entity = s.entity AND b.period <> s.period
    UNION ALL
    SELECT s.statement_id, s.bank_account, 4,
           CASE WHEN to_char(s.from_date, 'YYYY-MM') <> s.period THEN 'from_date' ELSE 'to_date' END,
           format('covers %%s to %%s, outside the period %%s', s.from_date, s.to_date, s.period)
      FROM s WHERE to_char(s.from_date, 'YYYY-MM') <> s.period OR to_char(s.to_date, 'YYYY-MM') <> s.period
    UNION ALL
    SELECT s.statement_id, s.bank_account, 5,
           CASE WHEN coalesce(m.entries, 0) <> s.entries THEN 'entries' ELSE 'closing_balance' END,
           format('states %%s entries and opening %%s + movements %%s = closing %%s, but the feed holds %%s '
                  'entries moving %%s', s.entries, s.opening_balance, s.closing_balance - s.opening_balance,
                  s.closing_balance, coalesce(m.entries, 0), coalesce(m.total, 0))
      FROM s LEFT JOIN moved m ON m.account = s.account AND m.statement_id = s.statement_id
     WHERE coalesce(m.entries, 0) <> s.entries OR s.opening_balance + coalesce(m.total, 0) <> s.closing_balance
    UNION ALL
    SELECT f.statement_id, f.bank_account, 6, 'opening_balance',
           format('opens at %%s but statement %%s closed %%s at %%s', f.opening_balance, e.statement_id, e.period,
                  e.closing_balance)
      FROM first_in_feed f JOIN earlier e ON e.bank_account = f.bank_account
     WHERE e.closing_balance <> f.opening_balance
) findings ORDER BY rank, statement_id LIMIT 1
"""


async def first_statement_finding(
    conn: AsyncConnection[Any], book_set_id: int, feed_version: int
) -> StatementFinding | None:
    """Returns the first thing wrong with the feed version's statements (by check, then statement id), or None."""
    async with conn.cursor(row_factory=class_row(StatementFinding)) as cur:
        await cur.execute(STATEMENT_CHECKS, {"book_set_id": book_set_id, "feed": feed_version})
        return await cur.fetchone()


async def latest_book_set(conn: AsyncConnection[Any], entity: str, period: str) -> int | None:
    """Returns the newest book set loaded for the entity and period, or None when none is."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT book_set_id FROM book_set WHERE entity = %s AND period = %s ORDER BY book_set_id DESC LIMIT 1",
            (entity, period),
        )
        found = await cur.fetchone()
    return None if found is None else int(found)


async def recorded_rate(
    conn: AsyncConnection[Any], book_set_id: int, from_currency: str, to_currency: str
) -> RecordedRate | None:
    """Returns the rate the book set records for converting `from_currency` into `to_currency`, or None."""
    async with conn.cursor(row_factory=class_row(RecordedRate)) as cur:
        await cur.execute(
            "SELECT from_currency, to_currency, rate, rate_date, source FROM book_rate"
            " WHERE book_set_id = %s AND from_currency = %s AND to_currency = %s",
            (book_set_id, from_currency, to_currency),
        )
        return await cur.fetchone()


async def book_rates(conn: AsyncConnection[Any], book_set_id: int) -> list[RecordedRate]:
    """Returns every rate the book set records, by currency pair."""
    async with conn.cursor(row_factory=class_row(RecordedRate)) as cur:
        await cur.execute(
            "SELECT from_currency, to_currency, rate, rate_date, source FROM book_rate WHERE book_set_id = %s"
            " ORDER BY from_currency, to_currency",
            (book_set_id,),
        )
        return await cur.fetchall()


async def account_names(conn: AsyncConnection[Any], book_set_id: int, accounts: Sequence[str]) -> dict[str, str]:
    """Returns the names the book set's chart gives those of `accounts` it holds, by account code."""
    async with conn.cursor(row_factory=class_row(_AccountName)) as cur:
        await cur.execute(
            "SELECT account, name FROM book_account WHERE book_set_id = %s AND account = ANY(%s)",
            (book_set_id, list(accounts)),
        )
        return {row.account: row.name for row in await cur.fetchall()}


async def book_set_currency(conn: AsyncConnection[Any], book_set_id: int) -> str | None:
    """Returns the currency the book set's amounts are in, or None when there is no such book set."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT currency FROM book_set WHERE book_set_id = %s", (book_set_id,))
        currency: str | None = await cur.fetchone()
    return currency


async def book_set_manifest(conn: AsyncConnection[Any], book_set_id: int) -> dict[str, Any] | None:
    """Returns the book set's manifest, or None when there is no such book set."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT manifest FROM book_set WHERE book_set_id = %s", (book_set_id,))
        manifest: dict[str, Any] | None = await cur.fetchone()
    return manifest
