"""Queries that build each specialist's input from the book tables.

Specialists get the data they need in the message and touch no database; every figure they may cite comes
from a query here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from countersign.engine.books import recorded_rate
from countersign.policy import Policy
from countersign.specialists.variance import (
    VarianceLine,  # the row the variance query returns is the line the specialist reads
)

Row = TypeVar("Row")


def money(value: Decimal | None) -> str:
    """An amount as the specialists read it: a string with two decimals."""
    return str((value or Decimal("0")).quantize(Decimal("0.01")))


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


async def _accounts_by_subtype(conn: AsyncConnection[Any], book_set_id: int, subtype: str) -> list[str]:
    return await _values(
        conn,
        "SELECT account FROM book_account WHERE book_set_id = %s AND subtype = %s ORDER BY account",
        (book_set_id, subtype),
    )


async def _gl_balance(conn: AsyncConnection[Any], book_set_id: int, account: str) -> Decimal:
    (balance,) = await _values(
        conn,
        "SELECT COALESCE(sum(amount), 0) FROM book_gl_line WHERE book_set_id = %s AND account = %s",
        (book_set_id, account),
    )
    return Decimal(balance)


async def functional_currency(conn: AsyncConnection[Any], book_set_id: int) -> str:
    (currency,) = await _values(conn, "SELECT currency FROM book_set WHERE book_set_id = %s", (book_set_id,))
    return str(currency)


async def gl_amounts_present(
    conn: AsyncConnection[Any], book_set_id: int, account: str, amounts: Sequence[Decimal], *, in_currency: bool
) -> set[Decimal]:
    """Which of `amounts` some GL line of the account carries (in the account's own currency when it is foreign)."""
    if not amounts:
        return set()
    gl_amount = "COALESCE(currency_amount, amount)" if in_currency else "amount"
    found = await _values(
        conn,
        f"SELECT DISTINCT {gl_amount} FROM book_gl_line WHERE book_set_id = %s AND account = %s"
        f" AND {gl_amount} = ANY(%s)",
        (book_set_id, account, list(amounts)),
    )
    return {Decimal(value) for value in found}


async def latest_feed_version(conn: AsyncConnection[Any], book_set_id: int) -> int:
    (version,) = await _values(
        conn, "SELECT COALESCE(max(feed_version), 0) FROM bank_feed WHERE book_set_id = %s", (book_set_id,)
    )
    return int(version)


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


async def supplier_bank_changes(conn: AsyncConnection[Any], book_set_id: int) -> list[SupplierBankChange]:
    """Changes to suppliers' bank details the books show (supplier_bank_changes.csv), oldest first."""
    return await _rows(
        conn,
        SupplierBankChange,
        "SELECT change_id, vendor, changed_on, changed_by FROM book_supplier_bank_change"
        " WHERE book_set_id = %s ORDER BY changed_on, change_id",
        (book_set_id,),
    )


async def bank_reconciliation_input(conn: AsyncConnection[Any], book_set_id: int, policy: Policy) -> dict[str, Any]:
    """Bank lines against GL cash lines per cash account. An account kept in a foreign currency is matched in that
    currency (the GL lines' transaction amounts), and its unrealised exchange difference is explained beside it: the
    account's foreign balance at the books' closing rate against its carrying value, never matched away."""
    feed = await latest_feed_version(conn, book_set_id)
    (functional,) = await _values(conn, "SELECT currency FROM book_set WHERE book_set_id = %s", (book_set_id,))
    accounts = []
    cash_accounts = await _rows(
        conn,
        CashAccount,
        "SELECT account, currency FROM book_account WHERE book_set_id = %s AND subtype = 'cash' ORDER BY account",
        (book_set_id,),
    )
    for cash in cash_accounts:
        foreign = cash.currency is not None and cash.currency != functional
        bank = await _rows(
            conn,
            LedgerLine,
            "SELECT bank_line_id AS line_id, line_date, amount, reference FROM book_bank_line"
            " WHERE book_set_id = %s AND feed_version = %s AND account = %s ORDER BY bank_line_id",
            (book_set_id, feed, cash.account),
        )
        gl_amount = "COALESCE(currency_amount, amount)" if foreign else "amount"
        gl = await _rows(
            conn,
            LedgerLine,
            f"SELECT line_id, line_date, {gl_amount} AS amount, reference FROM book_gl_line"
            " WHERE book_set_id = %s AND account = %s ORDER BY line_id",
            (book_set_id, cash.account),
        )
        entry: dict[str, Any] = {
            "account": cash.account,
            "bank_lines": [_line(r) for r in bank],
            "gl_lines": [_line(r) for r in gl],
        }
        if foreign:
            assert cash.currency is not None
            entry["currency"] = cash.currency
            entry["fx"] = await unrealised_difference(conn, book_set_id, cash.account, cash.currency, functional)
        accounts.append(entry)
    return {
        "kind": "bank",
        "date_window_days": policy.reconciliation.date_window_days,
        "unmatched_tolerance": str(policy.reconciliation.unmatched_tolerance),
        "feed_version": feed,
        "accounts": accounts,
    }


async def unrealised_difference(
    conn: AsyncConnection[Any], book_set_id: int, account: str, currency: str, functional: str
) -> dict[str, Any]:
    """A foreign-currency account's balance revalued at the books' closing rate, against what the ledger carries."""
    (balance,) = await _rows(
        conn,
        CurrencyBalance,
        "SELECT COALESCE(sum(amount), 0) AS functional, COALESCE(sum(currency_amount), 0) AS in_currency,"
        "       count(*) FILTER (WHERE currency_amount IS NULL OR currency <> %s) AS lines_without_currency"
        " FROM book_gl_line WHERE book_set_id = %s AND account = %s",
        (currency, book_set_id, account),
    )
    rate = await recorded_rate(conn, book_set_id, currency, functional)
    explained: dict[str, Any] = {
        "currency": currency,
        "functional_currency": functional,
        "balance": money(balance.in_currency),
        "carrying_value": money(balance.functional),
        "lines_without_currency": balance.lines_without_currency,
    }
    if rate is None:
        explained["rate"] = None
        explained["note"] = f"no {currency}->{functional} rate in the books: the exchange difference is not measured"
        return explained
    revalued = (balance.in_currency * rate.rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    difference = revalued - balance.functional
    explained.update(
        {
            "rate": format(rate.rate.normalize(), "f"),
            "rate_date": rate.rate_date.isoformat(),
            "rate_source": rate.source,
            "revalued": money(revalued),
            "unrealised_difference": money(difference),
            "note": (
                f"{currency} {money(balance.in_currency)} at {format(rate.rate.normalize(), 'f')} "
                f"({rate.source}, {rate.rate_date.isoformat()}) is {functional} {money(revalued)} against "
                f"{functional} {money(balance.functional)} carried: an unrealised "
                f"{'gain' if difference > 0 else 'loss' if difference < 0 else 'difference'} of "
                f"{functional} {money(abs(difference))}, explained here and not matched against bank lines"
            ),
        }
    )
    return explained


def _line(line: LedgerLine) -> dict[str, str]:
    return {
        "id": line.line_id,
        "date": line.line_date.isoformat(),
        "amount": money(line.amount),
        "reference": line.reference,
    }


@dataclass(frozen=True)
class SubledgerTotal:
    total: Decimal
    items: int


async def subledger_input(conn: AsyncConnection[Any], book_set_id: int, policy: Policy, ledger: str) -> dict[str, Any]:
    subtype, table = {
        "ap": ("payable_control", "book_ap_item"),
        "ar": ("receivable_control", "book_ar_item"),
    }[ledger]
    controls = await _accounts_by_subtype(conn, book_set_id, subtype)
    if len(controls) != 1:
        raise ValueError(f"books must have exactly one {subtype} account, found {controls}")
    (control,) = controls
    (totals,) = await _rows(
        conn,
        SubledgerTotal,
        f"SELECT COALESCE(sum(amount), 0) AS total, count(*) AS items FROM {table} WHERE book_set_id = %s",
        (book_set_id,),
    )
    return {
        "kind": "subledger",
        "ledger": ledger,
        "control_account": control,
        "control_balance": money(await _gl_balance(conn, book_set_id, control)),
        "subledger_total": money(totals.total),
        "items": totals.items,
        "tolerance_amount": str(policy.reconciliation.subledger_tolerance_amount),
    }


@dataclass(frozen=True)
class IntercompanyPair:
    counterparty: str
    account: str
    our_balance: Decimal
    their_balance: Decimal


async def intercompany_input(conn: AsyncConnection[Any], book_set_id: int, policy: Policy) -> dict[str, Any]:
    pairs = await _rows(
        conn,
        IntercompanyPair,
        "SELECT ic.counterparty, ic.account, COALESCE(gl.balance, 0) AS our_balance, ic.their_balance"
        " FROM book_intercompany ic"
        " LEFT JOIN (SELECT account, sum(amount) AS balance FROM book_gl_line WHERE book_set_id = %s"
        "            GROUP BY account) gl ON gl.account = ic.account"
        " WHERE ic.book_set_id = %s ORDER BY ic.counterparty, ic.account",
        (book_set_id, book_set_id),
    )
    return {
        "kind": "intercompany",
        "tolerance_amount": str(policy.reconciliation.intercompany_tolerance_amount),
        "pairs": [
            {
                "counterparty": pair.counterparty,
                "account": pair.account,
                "our_balance": money(pair.our_balance),
                "their_balance": money(pair.their_balance),
            }
            for pair in pairs
        ],
    }


def period_end(period: str) -> date:
    year, month = (int(part) for part in period.split("-"))
    first_of_next = date(year + (month == 12), month % 12 + 1, 1)
    return date.fromordinal(first_of_next.toordinal() - 1)


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


async def accruals_input(conn: AsyncConnection[Any], book_set_id: int, period: str, policy: Policy) -> dict[str, Any]:
    receipts = await _rows(
        conn,
        GrniReceipt,
        "SELECT receipt_id, vendor, po_number, received_date, amount, expense_account, description"
        " FROM book_grni WHERE book_set_id = %s ORDER BY receipt_id",
        (book_set_id,),
    )
    return {
        "period_end": period_end(period).isoformat(),
        "accrual_account": policy.accruals.accrual_account,
        "materiality_amount": str(policy.accruals.materiality_amount),
        "grni": [
            {
                "receipt_id": receipt.receipt_id,
                "vendor": receipt.vendor,
                "po_number": receipt.po_number,
                "received_date": receipt.received_date.isoformat(),
                "amount": money(receipt.amount),
                "expense_account": receipt.expense_account,
                "description": receipt.description,
            }
            for receipt in receipts
        ],
    }


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


async def variance_input(
    conn: AsyncConnection[Any], book_set_id: int, entity: str, period: str, policy: Policy
) -> dict[str, Any]:
    lines = await _rows(
        conn, VarianceLine, VARIANCE_QUERY, {"book_set_id": book_set_id, "entity": entity, "period": period}
    )
    return {
        "period": period,
        "threshold_amount": str(policy.variance.threshold_amount),
        "threshold_pct": str(policy.variance.threshold_pct),
        "grounding_tolerance": str(policy.variance.grounding_tolerance),
        "lines": [
            {
                "account": line.account,
                "name": line.name,
                "actual": money(line.actual),
                "prior": money(line.prior),
                "budget": money(line.budget),
                "variance_prior": money(line.variance_prior),
                "variance_budget": money(line.variance_budget),
                "variance_budget_pct": None if line.variance_budget_pct is None else str(line.variance_budget_pct),
            }
            for line in lines
        ],
    }


def queried_values(variance_payload: dict[str, Any]) -> list[Decimal]:
    """Every number the variance query returned: the only figures a narrative may cite."""
    values: list[Decimal] = []
    for line in variance_payload["lines"]:
        for key in ("actual", "prior", "budget", "variance_prior", "variance_budget", "variance_budget_pct"):
            if line.get(key) is not None:
                values.append(Decimal(line[key]))
    return values
