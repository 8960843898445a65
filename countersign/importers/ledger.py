"""A chart of accounts, a general ledger and AP/AR open items as an ERP exports them, read into the books' terms.

The GL is streamed: `read_gl` yields one line at a time and keeps only the journals that do not balance yet, so a
ledger of millions of lines is read in bounded memory. Its last check, that every journal balances, can only be
made once the whole file has been read: the iterator raises it at its end, after the last line. A caller that loads
all or nothing (the books import) therefore writes what it is given to a scratch file and keeps it only once the
iterator has finished.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Literal, NamedTuple

from countersign.importers.amounts import checked_currency
from countersign.importers.errors import ImportFileError
from countersign.importers.mapping import ChartLayout, Sign, TableLayout
from countersign.importers.tabular import Cells, TableRow, read_table

MAX_ACCOUNTS = 100_000
MAX_OPEN_ITEMS = 5_000_000
ZERO = Decimal("0.00")


class AccountType(StrEnum):
    ASSET = "asset"
    LIABILITY = "liability"
    EQUITY = "equity"
    REVENUE = "revenue"
    EXPENSE = "expense"


@dataclass(frozen=True, slots=True)
class Account:
    account: str
    name: str
    type: AccountType
    subtype: str
    """"" unless the chart maps a subtype column (our subtypes: bank, payable_control, receivable_control, ...)."""
    currency: str | None


@dataclass(frozen=True)
class Chart:
    accounts: Mapping[str, Account]
    """Account code -> account, in the file's order."""

    def __contains__(self, account: object) -> bool:
        return account in self.accounts


class GlLine(NamedTuple):
    """One ledger line. A NamedTuple rather than a frozen dataclass: as immutable, and built in a seventh of the time
    (a frozen dataclass sets each of its nine fields through object.__setattr__), which a 1,000,000-line ledger
    feels."""

    line_id: str
    journal_id: str
    line_date: date
    account: str
    amount: Decimal
    """Debit positive, credit negative, in the books' currency."""
    reference: str
    description: str
    currency: str | None
    """The line's transaction currency when the ledger gives one."""
    currency_amount: Decimal | None
    """The line in `currency`, debit positive; None when not given."""


@dataclass(frozen=True, slots=True)
class OpenItem:
    invoice_id: str
    party: str
    """The vendor (AP) or the customer (AR)."""
    invoice_date: date
    due_date: date
    amount: Decimal
    """Positive when open in the usual direction: AP, what we owe; AR, what we are owed (a credit note negative)."""


def read_chart(path: Path, layout: ChartLayout) -> Chart:
    """The chart of accounts; each type is mapped through `layout.type_values`. A duplicate account is an error."""
    file = path.name
    cells = Cells(file, layout)
    exact = {value.strip(): AccountType(ours) for value, ours in layout.type_values.items()}
    folded = {value.casefold(): ours for value, ours in exact.items()}
    known = ", ".join(repr(value) for value in exact)
    accounts: dict[str, Account] = {}
    where: dict[str, str] = {}
    for row in read_table(path, layout, required=("account", "name", "type"), optional=("subtype", "currency")):
        code = cells.text(row, "account", required=True)
        if code in accounts:
            raise cells.fail(row, "account", f"the account {code!r} is listed twice (first at {where[code]})")
        if len(accounts) >= MAX_ACCOUNTS:
            raise cells.fail(row, "account", f"more than {MAX_ACCOUNTS} accounts")
        type_text = cells.text(row, "type", required=True)
        account_type = exact.get(type_text) or folded.get(type_text.casefold())
        if account_type is None:
            raise cells.fail(row, "type", f"expected one of {known} (the mapping's type_values), found {type_text!r}")
        currency = cells.text(row, "currency") or None
        if currency is not None:
            try:
                currency = checked_currency(currency)
            except ValueError as exc:
                raise cells.fail(row, "currency", str(exc)) from None
        accounts[code] = Account(
            code, cells.text(row, "name", required=True), account_type, cells.text(row, "subtype"), currency
        )
        where[code] = row.location
    if not accounts:
        raise ImportFileError(file, "", "(file)", "no accounts in the chart")
    return Chart(MappingProxyType(accounts))


def _signed(amount: Decimal, sign: Sign | None, books: Sign) -> Decimal:
    """`amount` as the books sign it: negated when the file's sign convention is not the books' one."""
    return -amount + 0 if sign is not None and sign != books else amount


class _GlReader:
    def __init__(self, path: Path, layout: TableLayout, chart: Chart) -> None:
        self.path = path
        self.file = path.name
        self.layout = layout
        self.chart = chart
        self.cells = Cells(self.file, layout)
        columns = layout.columns
        self.split = "amount" not in columns
        self.amount_heading = f"{columns['debit']} / {columns['credit']}" if self.split else columns["amount"]
        self.mapped_ids = "line_id" in columns
        self.has_currency = "currency" in columns

    def amount(self, row: TableRow) -> Decimal:
        cells = self.cells
        if not self.split:
            amount = cells.amount(row, "amount")
            if amount is None:
                raise cells.fail(row, "amount", "is empty: expected an amount")
            return _signed(amount, self.layout.sign, Sign.DEBIT_POSITIVE)
        debit = cells.amount(row, "debit")
        credit = cells.amount(row, "credit")
        if debit and credit:
            raise ImportFileError(
                self.file,
                row.location,
                self.amount_heading,
                f"both hold an amount ({debit} and {credit}): expected a debit or a credit",
            )
        return (debit or ZERO) - (credit or ZERO)

    def currency(self, row: TableRow, amount: Decimal) -> tuple[str | None, Decimal | None]:
        if not self.has_currency:
            return None, None
        cells = self.cells
        raw = cells.text(row, "currency")
        currency = None
        if raw:
            try:
                currency = checked_currency(raw)
            except ValueError as exc:
                raise cells.fail(row, "currency", str(exc)) from None
        foreign = cells.amount(row, "currency_amount")
        if foreign is None:
            return currency, None
        if currency is None:
            raise cells.fail(row, "currency", "is empty, but the line has an amount in a transaction currency")
        foreign = _signed(foreign, self.layout.sign, Sign.DEBIT_POSITIVE)
        if foreign * amount < 0:
            raise cells.fail(
                row,
                "currency_amount",
                f"{foreign} {currency} has the opposite sign to the line's amount {amount} (is the sign right?)",
            )
        return currency, foreign

    def lines(self) -> Iterator[GlLine]:
        cells = self.cells
        chart = self.chart
        stem = self.path.stem
        optional = ("line_id", "reference", "description", "currency", "currency_amount")
        amounts = ("debit", "credit") if self.split else ("amount",)
        ids: set[str] = set()
        open_sums: dict[str, Decimal] = {}  # journals whose lines so far do not sum to zero
        opened_at: dict[str, str] = {}
        rows = read_table(
            self.path, self.layout, required=("journal_id", "date", "account", *amounts), optional=optional
        )
        for row in rows:
            if self.mapped_ids:
                line_id = cells.text(row, "line_id", required=True)
                if line_id in ids:
                    raise cells.fail(row, "line_id", f"the line id {line_id!r} is used twice (ids must be unique)")
                ids.add(line_id)
            else:
                line_id = f"{stem}-{row.number}"
            journal_id = cells.text(row, "journal_id", required=True)
            line_date = cells.date(row, "date", required=True)
            assert line_date is not None  # required
            account = cells.text(row, "account", required=True)
            if account not in chart:
                raise cells.fail(row, "account", f"the account {account!r} is not in the chart of accounts")
            amount = self.amount(row)
            currency, currency_amount = self.currency(row, amount)
            running = open_sums.get(journal_id)
            if running is None:
                if amount:
                    open_sums[journal_id] = amount
                    opened_at[journal_id] = row.location
            else:
                running += amount
                if running:
                    open_sums[journal_id] = running
                else:
                    del open_sums[journal_id], opened_at[journal_id]
            yield GlLine(
                line_id,
                journal_id,
                line_date,
                account,
                amount,
                cells.text(row, "reference"),
                cells.text(row, "description"),
                currency,
                currency_amount,
            )
        if open_sums:
            journal_id, difference = next(iter(open_sums.items()))
            others = f"; {len(open_sums) - 1} more journals do not balance" if len(open_sums) > 1 else ""
            raise ImportFileError(
                self.file,
                f"journal {journal_id} ({opened_at[journal_id]})",
                self.amount_heading,
                f"the journal's {'debits exceed its credits' if difference > 0 else 'credits exceed its debits'} by"
                f" {abs(difference)} (expected them equal){others}",
            )


def read_gl(path: Path, layout: TableLayout, chart: Chart) -> Iterator[GlLine]:
    """The ledger's lines in file order, debit positive, streamed.

    Each line's account must be in `chart`; mapped line ids must be unique (unmapped, they are `<file stem>-<row>`,
    unique by construction). Every journal must balance: that is checked when the file has been read, so the
    iterator raises ImportFileError at its end, after yielding every line; a caller must not keep what it was
    given until the iterator is exhausted.
    """
    return _GlReader(path, layout, chart).lines()


def read_open_items(path: Path, layout: TableLayout, party_field: Literal["vendor", "customer"]) -> Iterator[OpenItem]:
    """AP (party_field "vendor") or AR ("customer") open items, streamed; an invoice id listed twice is an error.

    A single amount column is signed as the books sign it (AP: what we owe positive; AR: what we are owed
    positive) unless the layout's `sign` says the file signs the other way (AP `debit_positive`, AR
    `credit_positive`), when it is negated.
    """
    books = Sign.CREDIT_POSITIVE if party_field == "vendor" else Sign.DEBIT_POSITIVE
    required = ("invoice_id", party_field, "invoice_date", "due_date", "amount")
    return _open_items(path, layout, party_field, books, required)


def _open_items(
    path: Path, layout: TableLayout, party_field: str, books: Sign, required: tuple[str, ...]
) -> Iterator[OpenItem]:
    cells = Cells(path.name, layout)
    seen: set[str] = set()
    for row in read_table(path, layout, required=required):
        invoice_id = cells.text(row, "invoice_id", required=True)
        if invoice_id in seen:
            raise cells.fail(row, "invoice_id", f"the invoice {invoice_id!r} is listed twice")
        if len(seen) >= MAX_OPEN_ITEMS:
            raise cells.fail(row, "invoice_id", f"more than {MAX_OPEN_ITEMS} open items")
        seen.add(invoice_id)
        party = cells.text(row, party_field, required=True)
        invoice_date = cells.date(row, "invoice_date", required=True)
        due_date = cells.date(row, "due_date", required=True)
        amount = cells.amount(row, "amount")
        if amount is None:
            raise cells.fail(row, "amount", "is empty: expected the open amount")
        assert invoice_date is not None and due_date is not None  # required
        yield OpenItem(invoice_id, party, invoice_date, due_date, _signed(amount, layout.sign, books))
