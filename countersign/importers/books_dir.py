"""Writing the books format (docs/books-format.md): one folder, a manifest and one CSV per table.

Every importer's output goes through here, so the engine reads one thing whatever the bank or ERP wrote. Files are
written into a fresh folder beside the target and renamed into place only when all of them are complete: a failed
import leaves nothing behind.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from countersign.importers.errors import ImportFileError
from countersign.importers.statement import BankStatement

FORMAT_VERSION = 2

ACCOUNTS_HEADER: tuple[str, ...] = ("account", "name", "type", "subtype", "currency")
GL_HEADER: tuple[str, ...] = (
    "line_id",
    "journal_id",
    "date",
    "account",
    "amount",
    "reference",
    "description",
    "currency",
    "currency_amount",
)
BANK_HEADER: tuple[str, ...] = (
    "bank_line_id",
    "account",
    "date",
    "amount",
    "reference",
    "description",
    "currency",
    "value_date",
    "bank_reference",
    "statement_id",
)
STATEMENTS_HEADER: tuple[str, ...] = (
    "statement_id",
    "account",
    "bank_account",
    "currency",
    "from_date",
    "to_date",
    "opening_balance",
    "closing_balance",
    "opening_stated",
    "entries",
    "format",
    "source",
    "source_sha256",
)
AP_HEADER: tuple[str, ...] = ("invoice_id", "vendor", "invoice_date", "due_date", "amount")
AR_HEADER: tuple[str, ...] = ("invoice_id", "customer", "invoice_date", "due_date", "amount")
GRNI_HEADER: tuple[str, ...] = (
    "receipt_id",
    "vendor",
    "po_number",
    "received_date",
    "amount",
    "expense_account",
    "description",
)
INTERCOMPANY_HEADER: tuple[str, ...] = ("counterparty", "account", "our_balance", "their_balance")
PNL_HEADER: tuple[str, ...] = ("account", "amount")
RATES_HEADER: tuple[str, ...] = ("from_currency", "to_currency", "rate", "rate_date", "source")
SUPPLIER_CHANGES_HEADER: tuple[str, ...] = (
    "change_id",
    "vendor",
    "changed_on",
    "old_account",
    "new_account",
    "changed_by",
)

# Files the engine needs even when the import had nothing for them: written with their header only.
EMPTY_WHEN_ABSENT: dict[str, tuple[str, ...]] = {
    "ap_subledger.csv": AP_HEADER,
    "ar_subledger.csv": AR_HEADER,
    "grni.csv": GRNI_HEADER,
    "intercompany.csv": INTERCOMPANY_HEADER,
    "prior_period.csv": PNL_HEADER,
    "budget.csv": PNL_HEADER,
}


class ChartAccount(Protocol):
    @property
    def account(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def subtype(self) -> str: ...
    @property
    def currency(self) -> str | None: ...


class LedgerLine(Protocol):
    @property
    def line_id(self) -> str: ...
    @property
    def journal_id(self) -> str: ...
    @property
    def line_date(self) -> date: ...
    @property
    def account(self) -> str: ...
    @property
    def amount(self) -> Decimal: ...
    @property
    def reference(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def currency(self) -> str | None: ...
    @property
    def currency_amount(self) -> Decimal | None: ...


@dataclass(frozen=True)
class SourceFile:
    """A file an import read, recorded in the manifest with its digest."""

    role: (
        str  # gl, chart, bank, ap, ar, grni, intercompany, prior_period, budget, rates, supplier_bank_changes, mapping
    )
    name: str
    format: str
    sha256: str


def sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()


def _money(amount: Decimal) -> str:
    return str(amount.quantize(Decimal("0.01")) + 0)


class BooksWriter:
    """Writes one books folder; use through `writing_books`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.written: set[str] = set()
        self.source_digests: dict[str, str] = {}
        """SHA-256 of each statement file, by its name: recorded on each statement it held."""

    def _write(self, name: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> int:
        count = 0
        with (self.folder / name).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(header)
            for row in rows:
                writer.writerow(row)
                count += 1
        self.written.add(name)
        return count

    def accounts(self, accounts: Iterable[ChartAccount]) -> int:
        return self._write(
            "accounts.csv",
            ACCOUNTS_HEADER,
            ((a.account, a.name, a.type, a.subtype, a.currency or "") for a in accounts),
        )

    def gl_lines(self, lines: Iterable[LedgerLine], *, progress: Callable[[int], None] | None = None) -> int:
        def rows() -> Iterator[tuple[object, ...]]:
            for count, line in enumerate(lines, start=1):
                if progress is not None and count % 100_000 == 0:
                    progress(count)
                yield (
                    line.line_id,
                    line.journal_id,
                    line.line_date.isoformat(),
                    line.account,
                    _money(line.amount),
                    line.reference,
                    line.description,
                    # a currency without the amount in it says nothing the functional amount does not
                    line.currency if line.currency and line.currency_amount is not None else "",
                    "" if line.currency_amount is None or not line.currency else _money(line.currency_amount),
                )

        return self._write("gl_lines.csv", GL_HEADER, rows())

    def bank(self, statements: Sequence[BankStatement], bank_accounts: dict[str, str], *, folder: str = "") -> int:
        """Bank lines and their statements; `bank_accounts` maps each statement's bank account (normalised: no
        spaces, upper case) to the GL account it is booked to. Entry ids are made unique per file when two
        statements reuse one."""
        target = f"{folder}/" if folder else ""
        if folder:
            (self.folder / folder).mkdir(parents=True, exist_ok=True)
        accounts = {s.statement_id: gl_account_of(s, bank_accounts) for s in statements}
        seen: set[str] = set()

        def lines() -> Iterator[tuple[object, ...]]:
            for statement in statements:
                for entry in statement.entries:
                    line_id = entry.entry_id
                    if line_id in seen:
                        line_id = f"{statement.statement_id}/{entry.entry_id}"
                    if line_id in seen:
                        raise ImportFileError(
                            statement.source, f"statement {statement.statement_id}", "entry id", f"{line_id} repeats"
                        )
                    seen.add(line_id)
                    yield (
                        line_id,
                        accounts[statement.statement_id],
                        entry.booking_date.isoformat(),
                        _money(entry.amount),
                        entry.reference,
                        entry.description,
                        statement.currency,
                        "" if entry.value_date is None else entry.value_date.isoformat(),
                        entry.bank_reference,
                        statement.statement_id,
                    )

        count = self._write(f"{target}bank_lines.csv", BANK_HEADER, lines())
        self._write(
            f"{target}bank_statements.csv",
            STATEMENTS_HEADER,
            (
                (
                    s.statement_id,
                    accounts[s.statement_id],
                    s.bank_account,
                    s.currency,
                    s.from_date.isoformat(),
                    s.to_date.isoformat(),
                    _money(s.opening_balance),
                    _money(s.closing_balance),
                    "true" if s.opening_stated else "false",
                    len(s.entries),
                    s.format.value,
                    s.source,
                    self.source_digests[s.source],
                )
                for s in statements
            ),
        )
        return count

    def table(self, name: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> int:
        return self._write(name, header, rows)

    def manifest(self, *, entity: str, period: str, currency: str, sources: Sequence[SourceFile]) -> None:
        for name, header in EMPTY_WHEN_ABSENT.items():
            if name not in self.written:
                self._write(name, header, ())
        manifest: dict[str, Any] = {
            "entity": entity,
            "period": period,
            "currency": currency,
            "format": FORMAT_VERSION,
            "sources": [source.__dict__ for source in sources],
        }
        (self.folder / "entity.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def normalise_bank_account(raw: str) -> str:
    return "".join(raw.split()).upper()


def gl_account_of(statement: BankStatement, bank_accounts: dict[str, str]) -> str:
    """The GL account a statement's bank account is booked to, by the mapping's `bank_accounts`."""
    key = normalise_bank_account(statement.bank_account)
    if key not in bank_accounts:
        known = ", ".join(sorted(bank_accounts)) or "none"
        raise ImportFileError(
            statement.source,
            f"statement {statement.statement_id}",
            "account",
            f"bank account {statement.bank_account} is not in the mapping's bank_accounts (known: {known}): "
            "a statement for another account",
        )
    return bank_accounts[key]


@contextmanager
def writing_books(target: Path, *, replace: bool = False) -> Iterator[BooksWriter]:
    """A BooksWriter over a scratch folder beside `target`, renamed to `target` when the block ends without an
    error; on any error the scratch folder is removed and `target` is untouched."""
    if target.exists() and not replace:
        raise ImportFileError(target.name, "", "(output)", "already exists: choose another --out or remove it")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield BooksWriter(scratch)
        if target.exists():
            shutil.rmtree(target)
        os.replace(scratch, target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
