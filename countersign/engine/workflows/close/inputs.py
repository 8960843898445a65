"""Queries that build each specialist's input from the book tables.

Specialists get the data they need in the message and touch no database; every figure they may cite comes
from a query of `countersign.store.close_inputs`, which this module calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.books import recorded_rate
from countersign.policy import Policy
from countersign.store import certified_accruals as certified_accrual_store
from countersign.store import close_inputs
from countersign.store.close_inputs import CashAccount as CashAccount
from countersign.store.close_inputs import CurrencyBalance as CurrencyBalance
from countersign.store.close_inputs import GrniReceipt as GrniReceipt
from countersign.store.close_inputs import IntercompanyPair as IntercompanyPair
from countersign.store.close_inputs import LedgerLine as LedgerLine
from countersign.store.close_inputs import SubledgerTotal as SubledgerTotal
from countersign.store.close_inputs import SupplierBankChange as SupplierBankChange


def money(value: Decimal | None) -> str:
    """An amount as the specialists read it: a string with two decimals."""
    return str((value or Decimal("0")).quantize(Decimal("0.01")))


async def functional_currency(conn: AsyncConnection[Any], book_set_id: int) -> str:
    return await close_inputs.functional_currency(conn, book_set_id)


async def gl_amounts_present(
    conn: AsyncConnection[Any], book_set_id: int, account: str, amounts: Sequence[Decimal], *, in_currency: bool
) -> set[Decimal]:
    """Which of `amounts` some GL line of the account carries (in the account's own currency when it is foreign)."""
    if not amounts:
        return set()
    return await close_inputs.gl_amounts_present(conn, book_set_id, account, amounts, in_currency=in_currency)


async def latest_feed_version(conn: AsyncConnection[Any], book_set_id: int) -> int:
    return await close_inputs.latest_feed_version(conn, book_set_id)


async def supplier_bank_changes(conn: AsyncConnection[Any], book_set_id: int) -> list[SupplierBankChange]:
    """Changes to suppliers' bank details the books show (supplier_bank_changes.csv), oldest first."""
    return await close_inputs.supplier_bank_changes(conn, book_set_id)


async def bank_reconciliation_input(conn: AsyncConnection[Any], book_set_id: int, policy: Policy) -> dict[str, Any]:
    """Bank lines against GL cash lines per cash account. An account kept in a foreign currency is matched in that
    currency (the GL lines' transaction amounts), and its unrealised exchange difference is explained beside it: the
    account's foreign balance at the books' closing rate against its carrying value, never matched away."""
    feed = await latest_feed_version(conn, book_set_id)
    functional = await close_inputs.functional_currency(conn, book_set_id)
    accounts = []
    for cash in await close_inputs.cash_accounts(conn, book_set_id):
        foreign = cash.currency is not None and cash.currency != functional
        bank = await close_inputs.bank_lines(conn, book_set_id, feed, cash.account)
        gl = await close_inputs.gl_cash_lines(conn, book_set_id, cash.account, foreign=foreign)
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
    balance = await close_inputs.currency_balance(conn, book_set_id, account, currency)
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


async def subledger_input(conn: AsyncConnection[Any], book_set_id: int, policy: Policy, ledger: str) -> dict[str, Any]:
    subtype, table = {
        "ap": ("payable_control", "book_ap_item"),
        "ar": ("receivable_control", "book_ar_item"),
    }[ledger]
    controls = await close_inputs.accounts_by_subtype(conn, book_set_id, subtype)
    if len(controls) != 1:
        raise ValueError(f"books must have exactly one {subtype} account, found {controls}")
    (control,) = controls
    totals = await close_inputs.subledger_total(conn, book_set_id, table)
    return {
        "kind": "subledger",
        "ledger": ledger,
        "control_account": control,
        "control_balance": money(await close_inputs.gl_balance(conn, book_set_id, control)),
        "subledger_total": money(totals.total),
        "items": totals.items,
        "tolerance_amount": str(policy.reconciliation.subledger_tolerance_amount),
    }


async def intercompany_input(conn: AsyncConnection[Any], book_set_id: int, policy: Policy) -> dict[str, Any]:
    pairs = await close_inputs.intercompany_pairs(conn, book_set_id)
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


async def accruals_input(
    conn: AsyncConnection[Any], book_set_id: int, period: str, policy: Policy, *, entity: str | None = None
) -> dict[str, Any]:
    """GRNI receipts, and (given the close's `entity`) the sums certified for its period that its books do not show
    invoiced (`certified`, with the books' `functional_currency`; both only when there is one: ADR 0050)."""
    receipts = await close_inputs.grni_receipts(conn, book_set_id)
    payload: dict[str, Any] = {
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
    if entity is None:
        return payload
    certified = [
        accrual
        for accrual in await certified_accrual_store.certified_accruals(
            conn, entity=entity, period=period, book_set_id=book_set_id
        )
        if not accrual.invoiced
    ]
    if certified:
        payload["functional_currency"] = await close_inputs.functional_currency(conn, book_set_id)
        payload["certified"] = [
            {
                "certificate_id": accrual.certificate_id,
                "contract_id": accrual.contract_id,
                "contract_title": accrual.contract_title,
                "certificate_no": accrual.certificate_no,
                "payee": accrual.payee,
                "amount": money(accrual.amount),
                "currency": accrual.currency,
                "cost_account": accrual.cost_account,
                "accrual_account": accrual.accrual_account,
            }
            for accrual in certified
        ]
    return payload


async def variance_input(
    conn: AsyncConnection[Any], book_set_id: int, entity: str, period: str, policy: Policy
) -> dict[str, Any]:
    lines = await close_inputs.variance_lines(conn, book_set_id, entity, period)
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
