"""The close workflow's own reads and writes beyond the specialist inputs, returning typed rows.

Reads `bank_feed` (who loaded the newest feed), `close_task` (the sign-off's task summary) and `journal` with
`journal_line` (the period's journals); writes `accounting_period` (closing the period). Called by
`countersign.engine.workflows.close.queries`, which the close workflow's steps (reconciliation, sign-off) use.

Also reads the book tables (`book_set`, `book_account`, `book_gl_line`, `bank_feed`, `book_bank_line`, the
subledgers, `book_intercompany`, `book_grni`, `book_pnl_reference`, `book_supplier_bank_change`) for the specialist
inputs `countersign.engine.workflows.close.inputs` builds. Nothing here opens or commits a transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.sql import SQL, Identifier

from countersign.states import TaskState


@dataclass(frozen=True)
class TaskLine:
    task: str
    title: str | None
    status: TaskState
    attempt: int


@dataclass(frozen=True)
class JournalLine:
    journal_id: int
    memo: str
    debits: str


@dataclass(frozen=True)
class _StoredTaskLine:
    task: str
    title: str | None
    status: str
    attempt: int


async def latest_feed_loader(conn: AsyncConnection[Any], book_set_id: int) -> str | None:
    """Returns who loaded the newest bank feed of the book set, or None when no feed is loaded."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT loaded_by FROM bank_feed WHERE book_set_id = %s ORDER BY feed_version DESC LIMIT 1",
            (book_set_id,),
        )
        loaded_by: str | None = await cur.fetchone()
    return loaded_by


async def task_lines(conn: AsyncConnection[Any], close_id: str) -> list[TaskLine]:
    """Returns the close's tasks in task order, each with its title, status and attempt."""
    async with conn.cursor(row_factory=class_row(_StoredTaskLine)) as cur:
        await cur.execute(
            "SELECT task, title, status, attempt FROM close_task WHERE close_id = %s ORDER BY task",
            (close_id,),
        )
        stored = await cur.fetchall()
    return [TaskLine(line.task, line.title, TaskState(line.status), line.attempt) for line in stored]


async def period_journals(conn: AsyncConnection[Any], entity: str, period: str) -> list[JournalLine]:
    """Returns the entity's journals of the period in journal order, each with its memo and debit total as text."""
    async with conn.cursor(row_factory=class_row(JournalLine)) as cur:
        await cur.execute(
            "SELECT j.journal_id, j.memo, (sum(l.amount) FILTER (WHERE l.amount > 0))::text AS debits"
            " FROM journal j JOIN journal_line l USING (journal_id)"
            " WHERE j.entity = %s AND j.period = %s GROUP BY j.journal_id ORDER BY j.journal_id",
            (entity, period),
        )
        return await cur.fetchall()


async def close_period(conn: AsyncConnection[Any], entity: str, period: str, close_id: str) -> None:
    """Marks the entity's open period closed by the close; returns nothing (a period not open is left as it is)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE accounting_period SET status = 'closed', closed_at = now(), closed_by_close = %s"
            " WHERE entity = %s AND period = %s AND status = 'open'",
            (close_id, entity, period),
        )


# The specialist inputs' reads of the book tables (countersign.engine.workflows.close.inputs builds each payload).

Row = TypeVar("Row")


async def _rows(
    conn: AsyncConnection[Any], row: type[Row], sql: str, params: Sequence[Any] | Mapping[str, Any]
) -> list[Row]:
    async with conn.cursor(row_factory=class_row(row)) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


async def _values(conn: AsyncConnection[Any], sql: str, params: Sequence[Any]) -> list[Any]:
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


@dataclass(frozen=True)
class LedgerLine:
    """A bank line or a GL cash line, as reconciliation matches them."""

    line_id: str
    line_date: date
    amount: Decimal
    reference: str


@dataclass(frozen=True)
class CashAccount:
    account: str
    currency: str | None
    """The account's own currency when it is kept in another than the entity's (a US dollar account)."""


@dataclass(frozen=True)
class CurrencyBalance:
    functional: Decimal
    in_currency: Decimal
    lines_without_currency: int


@dataclass(frozen=True)
class SupplierBankChange:
    change_id: str
    vendor: str
    changed_on: date
    changed_by: str


@dataclass(frozen=True)
class SubledgerTotal:
    total: Decimal
    items: int


@dataclass(frozen=True)
class IntercompanyPair:
    counterparty: str
    account: str
    our_balance: Decimal
    their_balance: Decimal


@dataclass(frozen=True)
class GrniReceipt:
    """Goods received, not invoiced."""

    receipt_id: str
    vendor: str
    po_number: str
    received_date: date
    amount: Decimal
    expense_account: str
    description: str


@dataclass(frozen=True)
class VarianceRow:
    """A P&L account's actual against prior and budget (the line the variance specialist reads)."""

    account: str
    name: str
    actual: Decimal
    prior: Decimal
    budget: Decimal
    variance_prior: Decimal
    variance_budget: Decimal
    variance_budget_pct: Decimal | None  # None when there is no budget to compare with


async def accounts_by_subtype(conn: AsyncConnection[Any], book_set_id: int, subtype: str) -> list[str]:
    """Returns the book set's accounts of the subtype, in account order."""
    return await _values(
        conn,
        "SELECT account FROM book_account WHERE book_set_id = %s AND subtype = %s ORDER BY account",
        (book_set_id, subtype),
    )


async def gl_balance(conn: AsyncConnection[Any], book_set_id: int, account: str) -> Decimal:
    """Returns the sum of the account's GL lines in the book set (zero when it has none)."""
    (balance,) = await _values(
        conn,
        "SELECT COALESCE(sum(amount), 0) FROM book_gl_line WHERE book_set_id = %s AND account = %s",
        (book_set_id, account),
    )
    return Decimal(balance)


async def functional_currency(conn: AsyncConnection[Any], book_set_id: int) -> str:
    """Returns the book set's functional currency."""
    (currency,) = await _values(conn, "SELECT currency FROM book_set WHERE book_set_id = %s", (book_set_id,))
    return str(currency)


async def gl_amounts_present(
    conn: AsyncConnection[Any], book_set_id: int, account: str, amounts: Sequence[Decimal], *, in_currency: bool
) -> set[Decimal]:
    """Returns which of `amounts` some GL line of the account carries (in its own currency when `in_currency`)."""
    gl_amount = "COALESCE(currency_amount, amount)" if in_currency else "amount"
    found = await _values(
        conn,
        f"SELECT DISTINCT {gl_amount} FROM book_gl_line WHERE book_set_id = %s AND account = %s"
        f" AND {gl_amount} = ANY(%s)",
        (book_set_id, account, list(amounts)),
    )
    return {Decimal(value) for value in found}


async def latest_feed_version(conn: AsyncConnection[Any], book_set_id: int) -> int:
    """Returns the book set's newest bank feed version (0 when no feed is loaded)."""
    (version,) = await _values(
        conn, "SELECT COALESCE(max(feed_version), 0) FROM bank_feed WHERE book_set_id = %s", (book_set_id,)
    )
    return int(version)


async def supplier_bank_changes(conn: AsyncConnection[Any], book_set_id: int) -> list[SupplierBankChange]:
    """Returns the changes to suppliers' bank details the books show, oldest first."""
    return await _rows(
        conn,
        SupplierBankChange,
        "SELECT change_id, vendor, changed_on, changed_by FROM book_supplier_bank_change"
        " WHERE book_set_id = %s ORDER BY changed_on, change_id",
        (book_set_id,),
    )


async def cash_accounts(conn: AsyncConnection[Any], book_set_id: int) -> list[CashAccount]:
    """Returns the book set's cash accounts with their own currency, in account order."""
    return await _rows(
        conn,
        CashAccount,
        "SELECT account, currency FROM book_account WHERE book_set_id = %s AND subtype = 'cash' ORDER BY account",
        (book_set_id,),
    )


async def bank_lines(conn: AsyncConnection[Any], book_set_id: int, feed: int, account: str) -> list[LedgerLine]:
    """Returns the feed version's bank lines of the account, by bank line id."""
    return await _rows(
        conn,
        LedgerLine,
        "SELECT bank_line_id AS line_id, line_date, amount, reference FROM book_bank_line"
        " WHERE book_set_id = %s AND feed_version = %s AND account = %s ORDER BY bank_line_id",
        (book_set_id, feed, account),
    )


async def gl_cash_lines(
    conn: AsyncConnection[Any], book_set_id: int, account: str, *, foreign: bool
) -> list[LedgerLine]:
    """Returns the account's GL lines by line id, amounts in the account's own currency when `foreign`."""
    gl_amount = "COALESCE(currency_amount, amount)" if foreign else "amount"
    return await _rows(
        conn,
        LedgerLine,
        f"SELECT line_id, line_date, {gl_amount} AS amount, reference FROM book_gl_line"
        " WHERE book_set_id = %s AND account = %s ORDER BY line_id",
        (book_set_id, account),
    )


async def currency_balance(
    conn: AsyncConnection[Any], book_set_id: int, account: str, currency: str
) -> CurrencyBalance:
    """Returns the account's GL balance in the functional currency and in `currency`, and the lines lacking it."""
    (balance,) = await _rows(
        conn,
        CurrencyBalance,
        "SELECT COALESCE(sum(amount), 0) AS functional, COALESCE(sum(currency_amount), 0) AS in_currency,"
        "       count(*) FILTER (WHERE currency_amount IS NULL OR currency <> %s) AS lines_without_currency"
        " FROM book_gl_line WHERE book_set_id = %s AND account = %s",
        (currency, book_set_id, account),
    )
    return balance


async def subledger_total(conn: AsyncConnection[Any], book_set_id: int, table: str) -> SubledgerTotal:
    """Returns the total and item count of a subledger table (`table` is the caller's constant, never input)."""
    statement = SQL("SELECT COALESCE(sum(amount), 0) AS total, count(*) AS items FROM {} WHERE book_set_id = %s")
    async with conn.cursor(row_factory=class_row(SubledgerTotal)) as cur:
        await cur.execute(statement.format(Identifier(table)), (book_set_id,))  # the name quoted, never spliced
        totals = await cur.fetchone()
    assert totals is not None  # an aggregate always returns its one row
    return totals


async def intercompany_pairs(conn: AsyncConnection[Any], book_set_id: int) -> list[IntercompanyPair]:
    """Returns each intercompany balance the books state beside the GL's own, by counterparty and account."""
    return await _rows(
        conn,
        IntercompanyPair,
        "SELECT ic.counterparty, ic.account, COALESCE(gl.balance, 0) AS our_balance, ic.their_balance"
        " FROM book_intercompany ic"
        " LEFT JOIN (SELECT account, sum(amount) AS balance FROM book_gl_line WHERE book_set_id = %s"
        "            GROUP BY account) gl ON gl.account = ic.account"
        " WHERE ic.book_set_id = %s ORDER BY ic.counterparty, ic.account",
        (book_set_id, book_set_id),
    )


async def grni_receipts(conn: AsyncConnection[Any], book_set_id: int) -> list[GrniReceipt]:
    """Returns the book set's goods received not invoiced, by receipt id."""
    return await _rows(
        conn,
        GrniReceipt,
        "SELECT receipt_id, vendor, po_number, received_date, amount, expense_account, description"
        " FROM book_grni WHERE book_set_id = %s ORDER BY receipt_id",
        (book_set_id,),
    )


VARIANCE_QUERY = """
WITH actual AS (
    SELECT account, sum(amount) AS amount FROM (
        SELECT account, amount FROM book_gl_line WHERE book_set_id = %(book_set_id)s
        UNION ALL
        SELECT l.account, l.amount FROM journal_line l JOIN journal j USING (journal_id)
         WHERE j.entity = %(entity)s AND j.period = %(period)s
    ) lines GROUP BY account
),
pnl AS (
    SELECT a.account, a.name,
           COALESCE(act.amount, 0) AS actual,
           COALESCE(p.amount, 0) AS prior,
           COALESCE(b.amount, 0) AS budget
      FROM book_account a
      LEFT JOIN actual act ON act.account = a.account
      LEFT JOIN book_pnl_reference p ON p.book_set_id = a.book_set_id AND p.account = a.account AND p.basis = 'prior'
      LEFT JOIN book_pnl_reference b ON b.book_set_id = a.book_set_id AND b.account = a.account AND b.basis = 'budget'
     WHERE a.book_set_id = %(book_set_id)s AND a.type IN ('revenue', 'expense')
)
SELECT account, name, actual, prior, budget,
       actual - prior AS variance_prior,
       actual - budget AS variance_budget,
       CASE WHEN budget = 0 THEN NULL ELSE round(100 * (actual - budget) / abs(budget), 1) END AS variance_budget_pct
  FROM pnl ORDER BY account
"""


async def variance_lines(conn: AsyncConnection[Any], book_set_id: int, entity: str, period: str) -> list[VarianceRow]:
    """Returns each revenue and expense account's actual (books plus posted journals) against prior and budget."""
    return await _rows(
        conn, VarianceRow, VARIANCE_QUERY, {"book_set_id": book_set_id, "entity": entity, "period": period}
    )
