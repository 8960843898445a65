"""The bank reconciliation's set-based pass over the loaded lines (docs/adr/0041): reads `book_account`,
`book_bank_line` and `book_gl_line`.

Called by `countersign.engine.workflows.close.bank_pages`, which opens the connection and the transaction the
classifying cursor runs in; nothing here opens or commits a transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection, AsyncServerCursor
from psycopg.rows import class_row

CURSOR_ROWS = 5_000
"""Rows fetched from the server-side cursor per round trip."""
WORK_MEM = "32MB"
"""The classifying query's sort memory (its transaction only): the windows' one sort of every cash line stays in
memory up to about 300,000 lines instead of spilling to disk at PostgreSQL's default 4 MB."""


@dataclass(frozen=True)
class CashAccountSize:
    account: str
    currency: str | None
    bank_lines: int
    gl_lines: int


@dataclass(frozen=True)
class ResidueLine:
    """A line the exact pass left, with its group key (None: its amount has a reference SQL cannot normalise as the
    specialist does, so the whole amount is one group)."""

    account: str
    bank: bool
    id: str
    line_date: date
    amount: Decimal
    reference: str
    group_key: str | None


_GL_AMOUNT = "CASE WHEN account = ANY(%(foreign)s) THEN COALESCE(currency_amount, amount) ELSE amount END"

SIZES_QUERY = """
SELECT a.account, a.currency,
       (SELECT count(*) FROM book_bank_line b
         WHERE b.book_set_id = a.book_set_id AND b.feed_version = %(feed)s AND b.account = a.account) AS bank_lines,
       (SELECT count(*) FROM book_gl_line g WHERE g.book_set_id = a.book_set_id AND g.account = a.account) AS gl_lines
  FROM book_account a WHERE a.book_set_id = %(book_set_id)s AND a.subtype = 'cash' ORDER BY a.account
"""

# The specialist's key is (amount, reference.strip().casefold()). For printable ASCII that is exactly
# lower(btrim(reference, ' ')) in the C collation; an amount with any other reference in the account is one group here
# (its lines are left whole to the specialist, unless one side has no line of that amount at all). Both windows share
# one sort: (account, amount, key) is also sorted by (account, amount).
CLASSIFIED = rf"""
WITH lines AS (
    SELECT account, true AS bank, bank_line_id AS id, line_date, amount, reference
      FROM book_bank_line
     WHERE book_set_id = %(book_set_id)s AND feed_version = %(feed)s AND account = ANY(%(accounts)s)
    UNION ALL
    SELECT account, false, line_id, line_date, {_GL_AMOUNT}, reference
      FROM book_gl_line WHERE book_set_id = %(book_set_id)s AND account = ANY(%(accounts)s)
),
keyed AS (
    SELECT *, lower(btrim(reference, ' ') COLLATE "C") AS k, reference ~ '^[\x20-\x7e]*$' AS safe FROM lines
),
grouped AS (
    SELECT *, bool_and(safe) OVER a AS amount_safe,
           count(*) FILTER (WHERE bank) OVER a AS amount_bank,
           count(*) FILTER (WHERE NOT bank) OVER a AS amount_gl,
           count(*) FILTER (WHERE bank) OVER g AS bank_count,
           count(*) FILTER (WHERE NOT bank) OVER g AS gl_count,
           max(line_date) FILTER (WHERE bank) OVER g AS bank_date,
           max(line_date) FILTER (WHERE NOT bank) OVER g AS gl_date
      FROM keyed WINDOW a AS (PARTITION BY account, amount), g AS (PARTITION BY account, amount, k)
),
classified AS MATERIALIZED (
    SELECT account, bank, id, line_date, amount, reference, CASE WHEN amount_safe THEN k END AS group_key,
           CASE WHEN amount_bank = 0 OR amount_gl = 0 THEN 'unmatched'
                WHEN NOT amount_safe THEN 'residue'
                WHEN bank_count = 0 OR gl_count = 0 THEN 'unmatched'
                WHEN bank_count > 1 OR gl_count > 1 THEN 'residue'
                WHEN abs(bank_date - gl_date) <= %(window_days)s THEN 'matched'
                ELSE 'unmatched' END AS state
      FROM grouped
)
"""
"""Every cash line, and what the database decided about it: `matched` (the one bank and the one GL line of its group,
within the window), `unmatched` (its group has no line on the other side, or its one pair is outside the window), or
`residue` (a group the specialist must match: several lines on a side, or references SQL does not normalise)."""

DECIDED_QUERY = (
    CLASSIFIED
    + """, ranked AS (
    SELECT *, row_number() OVER (PARTITION BY account, bank ORDER BY line_date, id COLLATE "C") AS n
      FROM classified WHERE state = 'unmatched'
)
SELECT 0 AS part, account, bank, state, count(*) AS lines, COALESCE(sum(amount), 0) AS amount,
       NULL::text AS id, NULL::date AS line_date, NULL::text AS reference, NULL::text AS group_key
  FROM classified GROUP BY account, bank, state
UNION ALL
SELECT 1, account, bank, state, 1, amount, id, line_date, reference, NULL FROM ranked WHERE n <= %(listed)s
UNION ALL
SELECT 2, account, bank, state, 1, amount, id, line_date, reference, group_key FROM classified WHERE state = 'residue'
 ORDER BY part, account, amount, group_key NULLS FIRST, bank DESC, line_date, id"""
)
"""One pass over the lines: per account, side and state the count and sum (part 0), the first LISTED_LINES unmatched
lines of each side in the matcher's order (part 1), then the residue, group by group (part 2)."""


@dataclass(frozen=True)
class DecidedRow:
    """A row of DECIDED_QUERY: a total (part 0: no line), a listed unmatched line (part 1) or a residue line
    (part 2)."""

    part: int
    account: str
    bank: bool
    state: str
    lines: int
    amount: Decimal
    id: str | None
    line_date: date | None
    reference: str | None
    group_key: str | None

    def line(self) -> ResidueLine:
        assert self.id is not None and self.line_date is not None and self.reference is not None
        return ResidueLine(
            self.account, self.bank, self.id, self.line_date, self.amount, self.reference, self.group_key
        )


async def cash_account_sizes(conn: AsyncConnection[Any], book_set_id: int, feed: int) -> list[CashAccountSize]:
    """Returns each cash account of the book set with its currency and its bank (of the feed) and GL line counts."""
    async with conn.cursor(row_factory=class_row(CashAccountSize)) as cur:
        await cur.execute(SIZES_QUERY, {"book_set_id": book_set_id, "feed": feed})
        return await cur.fetchall()


@asynccontextmanager
async def decided_lines(
    conn: AsyncConnection[Any], params: Mapping[str, Any]
) -> AsyncIterator[AsyncServerCursor[DecidedRow]]:
    """Yields a server-side cursor over DECIDED_QUERY's rows, executed, after raising the transaction's work_mem.

    Must run inside the caller's transaction (SET LOCAL and the named cursor last only as long as it does)."""
    async with conn.cursor("bank_lines_decided", row_factory=class_row(DecidedRow)) as cur:
        await conn.execute(f"SET LOCAL work_mem = '{WORK_MEM}'")
        cur.itersize = CURSOR_ROWS
        await cur.execute(DECIDED_QUERY, params)
        yield cur
