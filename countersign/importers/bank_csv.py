"""A bank statement exported as CSV (or XLSX): one account, one statement, its lines in the order the file gives.

A CSV export rarely states its balances. They come from a running balance column (the balance after each line:
the opening is the first balance less the first line, the closing the last balance, and every balance given must
equal the one before plus the line's amount), or from the mapping (`opening_balance`, `closing_balance`), or both,
when they must agree. Money in is positive, money out negative, as in every statement we read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path

from countersign.importers.errors import ImportFileError
from countersign.importers.mapping import BankCsvLayout, Sign
from countersign.importers.statement import BankStatement, StatementEntry, StatementFormat
from countersign.importers.tabular import Cells, TableRow, read_table

MAX_ENTRIES = 1_000_000
ZERO = Decimal("0.00")


@dataclass(frozen=True, slots=True)
class _Line:
    row: TableRow
    booking_date: date
    value_date: date | None
    amount: Decimal
    reference: str
    bank_reference: str
    description: str
    balance: Decimal | None


def read_bank_csv(path: Path, layout: BankCsvLayout) -> list[BankStatement]:
    """The file as one statement of `layout.bank_account`; ImportFileError names the file, the row and the heading."""
    file = path.name
    statement_id = layout.statement_id or path.stem
    lines = _lines(path, layout)
    if not lines:
        raise ImportFileError(file, "", "(file)", "no statement lines: a statement's dates come from its lines")
    opening, closing, opening_stated = _balances(file, layout, statement_id, lines)
    movements = sum((line.amount for line in lines), ZERO)
    if opening + movements != closing:
        raise ImportFileError(
            file,
            f"statement {statement_id}",
            "closing_balance",
            f"opening {opening} + movements {movements} = {opening + movements}, but the closing balance is {closing}"
            f" (a difference of {closing - opening - movements})",
        )
    references = [line.bank_reference for line in lines]
    own_ids = all(references) and len(set(references)) == len(references)
    entries = tuple(
        StatementEntry(
            entry_id=line.bank_reference if own_ids else f"{statement_id}-{number}",
            booking_date=line.booking_date,
            value_date=line.value_date,
            amount=line.amount,
            reference=line.reference,
            bank_reference=line.bank_reference,
            description=line.description,
        )
        for number, line in enumerate(lines, start=1)
    )
    return [
        BankStatement(
            statement_id=statement_id,
            bank_account=layout.bank_account,
            currency=layout.currency,
            from_date=min(line.booking_date for line in lines),
            to_date=max(line.booking_date for line in lines),
            opening_balance=opening,
            closing_balance=closing,
            entries=entries,
            source=file,
            format=StatementFormat.CSV,
            opening_stated=opening_stated,
        )
    ]


def _lines(path: Path, layout: BankCsvLayout) -> list[_Line]:
    cells = Cells(path.name, layout)
    columns = layout.columns
    split = "amount" not in columns
    amounts = ("debit", "credit") if split else ("amount",)
    optional = ("value_date", "reference", "bank_reference", "description", "balance")
    lines: list[_Line] = []
    for row in read_table(path, layout, required=("date", *amounts), optional=optional):
        if len(lines) >= MAX_ENTRIES:
            raise cells.fail(row, "date", f"more than {MAX_ENTRIES} statement lines")
        if split:
            paid_out = cells.amount(row, "debit")
            paid_in = cells.amount(row, "credit")
            if paid_out and paid_in:
                raise ImportFileError(
                    path.name,
                    row.location,
                    f"{columns['debit']} / {columns['credit']}",
                    f"both hold an amount ({paid_out} out, {paid_in} in): expected money out or money in",
                )
            amount = (paid_in or ZERO) - (paid_out or ZERO)
        else:
            given = cells.amount(row, "amount")
            if given is None:
                raise cells.fail(row, "amount", "is empty: expected an amount")
            amount = -given + 0 if layout.sign == Sign.DEBIT_POSITIVE else given
        booking_date = cells.date(row, "date", required=True)
        assert booking_date is not None  # required
        lines.append(
            _Line(
                row,
                booking_date,
                cells.date(row, "value_date"),
                amount,
                cells.text(row, "reference"),
                cells.text(row, "bank_reference"),
                cells.text(row, "description"),
                cells.amount(row, "balance"),
            )
        )
    return lines


def _balances(file: str, layout: BankCsvLayout, statement_id: str, lines: list[_Line]) -> tuple[Decimal, Decimal, bool]:
    """(opening, closing, whether the opening was stated) from the balance column and the mapping, cross-checked."""
    if "balance" not in layout.columns:
        missing = [
            name
            for name, value in (
                ("opening_balance", layout.opening_balance),
                ("closing_balance", layout.closing_balance),
            )
            if value is None
        ]
        if missing:
            raise ImportFileError(
                file,
                "",
                " and ".join(missing),
                "the export has no balance column (none is mapped): the mapping's bank_csv needs opening_balance"
                " and closing_balance, or a balance column (the running balance after each line)",
            )
        assert layout.opening_balance is not None and layout.closing_balance is not None
        return layout.opening_balance, layout.closing_balance, True
    heading = layout.columns["balance"]
    opening: Decimal | None = None
    running = ZERO
    for line in lines:
        running += line.amount
        if line.balance is None:
            continue
        if opening is None:
            opening = line.balance - running
            running = line.balance
            continue
        if line.balance != running:
            previous = running - line.amount
            raise ImportFileError(
                file,
                line.row.location,
                heading,
                f"expected {running} (the balance before, {previous}, plus this line's {line.amount}), found"
                f" {line.balance}; lines are read in the file's order, oldest first"
                + (" (this file seems to list the newest first)" if _newest_first(lines) else ""),
            )
    if opening is None:
        raise ImportFileError(file, "", heading, "every balance cell is empty: expected the balance after each line")
    closing = running
    if layout.opening_balance is not None and layout.opening_balance != opening:
        raise ImportFileError(
            file,
            f"statement {statement_id}",
            "opening_balance",
            f"the mapping says {layout.opening_balance}, the balance column gives {opening}",
        )
    if layout.closing_balance is not None and layout.closing_balance != closing:
        raise ImportFileError(
            file,
            f"statement {statement_id}",
            "closing_balance",
            f"the mapping says {layout.closing_balance}, the balance column gives {closing}",
        )
    return opening, closing, layout.opening_balance is not None


def _newest_first(lines: list[_Line]) -> bool:
    return lines[0].booking_date > lines[-1].booking_date
