"""`books import`: a ledger export and bank statements, as an ERP and a bank wrote them, into one books folder.

Every door that imports books calls `import_books`: it reads the chart, streams the general ledger, reads each
statement in whichever format it is (camt.053, MT940, OFX or CSV, told by its first bytes), maps each statement's
bank account to its GL account, and writes the books format (docs/books-format.md). Any bad input stops it with one
ImportFileError naming the file, the place, the field and what was expected; nothing is written then. Loading the
folder (`close start --books`) is a separate step with its own checks, so an imported folder can be read first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from countersign.engine.books import (
    GRNI,
    INTERCOMPANY,
    PNL_COLUMNS,
    RATES,
    SUPPLIER_BANK_CHANGES,
    BooksError,
    Parser,
    read_rows,
)
from countersign.engine.runs import check_entity_and_period
from countersign.importers.amounts import checked_currency
from countersign.importers.bank_csv import read_bank_csv
from countersign.importers.books_dir import (
    AP_HEADER,
    AR_HEADER,
    GRNI_HEADER,
    INTERCOMPANY_HEADER,
    PNL_HEADER,
    RATES_HEADER,
    SUPPLIER_CHANGES_HEADER,
    SourceFile,
    gl_account_of,
    sha256_of,
    writing_books,
)
from countersign.importers.camt053 import read_camt053
from countersign.importers.detect import detect_statement_format
from countersign.importers.errors import ImportFileError
from countersign.importers.ledger import Chart, GlLine, read_chart, read_gl, read_open_items
from countersign.importers.mapping import BankCsvLayout, ImportMapping, TableLayout, default_mapping, load_mapping
from countersign.importers.mt940 import read_mt940
from countersign.importers.ofx import read_ofx
from countersign.importers.statement import BankStatement, StatementFormat

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BooksImport:
    """What to import: the ledger and its chart, the bank statements, and what else the close reads."""

    entity: str
    period: str
    currency: str
    """The entity's functional currency: the ledger's amounts are in it."""
    gl: Path
    chart: Path
    bank: Sequence[Path]
    out: Path
    mapping: Path | None = None
    ap: Path | None = None
    ar: Path | None = None
    rates: Path | None = None
    supplier_bank_changes: Path | None = None
    grni: Path | None = None
    intercompany: Path | None = None
    prior_period: Path | None = None
    budget: Path | None = None
    """Goods received not invoiced, intercompany confirmations, last period's and this period's budgeted P&L: files
    already in the books format (from procurement, the group's consolidation and planning), checked and copied."""
    camt_schema: Path | None = None
    """The ISO 20022 XSD (a file or a folder of them) camt.053 statements are validated against."""
    mt940_encoding: str = "utf-8"
    replace: bool = False


@dataclass(frozen=True)
class ImportedBooks:
    folder: Path
    accounts: int
    gl_lines: int
    statements: int
    bank_lines: int
    sources: tuple[SourceFile, ...] = field(default=())


def read_statements(
    paths: Sequence[Path], mapping: ImportMapping, *, camt_schema: Path | None, mt940_encoding: str = "utf-8"
) -> tuple[list[BankStatement], list[SourceFile]]:
    """Every statement of every file, each file read by the parser its first bytes call for."""
    statements: list[BankStatement] = []
    sources: list[SourceFile] = []
    for path in paths:
        kind = detect_statement_format(path)
        if kind is StatementFormat.CAMT053:
            read = read_camt053(path, schema=camt_schema)
        elif kind is StatementFormat.MT940:
            read = read_mt940(path, encoding=mt940_encoding)
        elif kind is StatementFormat.OFX:
            read = read_ofx(path)
        else:
            layout = _own_csv_layout(path) or mapping.bank_csv
            if layout is None:
                raise ImportFileError(
                    path.name,
                    "",
                    "(format)",
                    "looks like a CSV statement, which needs a mapping file with a bank_csv section (--mapping, or "
                    f"{path.stem}.mapping.yaml beside it)",
                )
            read = read_bank_csv(path, layout)
        statements.extend(read)
        sources.append(SourceFile("bank", path.name, kind.value, sha256_of(path)))
    _refuse_duplicates(statements)
    return statements, sources


def _own_csv_layout(path: Path) -> BankCsvLayout | None:
    """A bank's CSV export is of one account: `<name>.mapping.yaml` beside it, when there, describes that file."""
    own = path.with_suffix(".mapping.yaml")
    return load_mapping(own).bank_csv if own.is_file() else None


def _in_period(lines: Iterator[GlLine], file: str, period: str) -> Iterator[GlLine]:
    """Ledger lines dated in `period`: an export of the wrong month, or of a year, is refused, not filtered."""
    for line in lines:
        if line.line_date.strftime("%Y-%m") != period:
            raise ImportFileError(
                file,
                f"line id {line.line_id}",
                "date",
                f"{line.line_date.isoformat()} is outside the period {period}: export the ledger for {period} only",
            )
        yield line


def _with_subtypes(chart: Chart, mapping: ImportMapping, mapping_path: Path | None) -> Chart:
    """The chart with the mapping's `account_subtypes` applied: what the close does with each account (a bank
    account is reconciled only when its subtype is `cash`)."""
    if not mapping.account_subtypes:
        return chart
    unknown = sorted(set(mapping.account_subtypes) - set(chart.accounts))
    if unknown:
        raise ImportFileError(
            mapping_path.name if mapping_path else "mapping",
            "",
            f"account_subtypes.{unknown[0]}",
            "names an account the chart of accounts does not have",
        )
    accounts = {
        code: dataclasses.replace(account, subtype=mapping.account_subtypes.get(code, account.subtype))
        for code, account in chart.accounts.items()
    }
    return dataclasses.replace(chart, accounts=accounts)


def _refuse_duplicates(statements: Sequence[BankStatement]) -> None:
    """The same statement given twice (in one file or two) is refused: its entries would count twice."""
    seen: dict[tuple[str, str], BankStatement] = {}
    for statement in statements:
        key = ("".join(statement.bank_account.split()).upper(), statement.statement_id)
        if key in seen:
            first = seen[key]
            raise ImportFileError(
                statement.source,
                f"statement {statement.statement_id}",
                "statement id",
                f"account {statement.bank_account} statement {statement.statement_id} was already read from "
                f"{first.source}: a duplicate statement",
            )
        seen[key] = statement


def _check_period(statements: Sequence[BankStatement], period: str) -> None:
    for statement in statements:
        for day in (statement.from_date, statement.to_date):
            if day.strftime("%Y-%m") != period:
                raise ImportFileError(
                    statement.source,
                    f"statement {statement.statement_id}",
                    "dates",
                    f"covers {statement.from_date} to {statement.to_date}, not the period {period}: "
                    "a statement for another period",
                )


def _passed_through(path: Path, spec_columns: Sequence[tuple[str, str, Parser]]) -> Iterator[tuple[object, ...]]:
    """Rows of a file already in the books format (rates, supplier bank changes), checked as the loader will."""
    try:
        yield from read_rows(path, spec_columns)
    except BooksError as exc:
        raise ImportFileError(exc.source.split(" ")[0], exc.source.partition(" ")[2], exc.field, exc.reason) from None


def import_books(request: BooksImport, *, progress: Progress | None = None) -> ImportedBooks:
    """Write `request.out` in the books format from the files named; raises ImportFileError, writing nothing."""
    say = progress or (lambda _message: None)
    check_entity_and_period(request.entity, request.period)
    try:
        currency = checked_currency(request.currency)
    except ValueError as exc:
        raise ImportFileError("--currency", "", "currency", str(exc)) from None
    mapping = load_mapping(request.mapping) if request.mapping is not None else default_mapping()
    sources: list[SourceFile] = []
    if request.mapping is not None:
        sources.append(SourceFile("mapping", request.mapping.name, "yaml", sha256_of(request.mapping)))
    say(f"reading the chart of accounts {request.chart.name}")
    chart = _with_subtypes(read_chart(request.chart, mapping.chart), mapping, request.mapping)
    sources.append(SourceFile("chart", request.chart.name, _table_format(request.chart), sha256_of(request.chart)))
    say(f"reading {len(request.bank)} bank statement file(s)")
    statements, bank_sources = read_statements(
        request.bank, mapping, camt_schema=request.camt_schema, mt940_encoding=request.mt940_encoding
    )
    _check_period(statements, request.period)
    for statement in statements:
        gl_account_of(statement, dict(mapping.bank_accounts))  # every statement's account is mapped, before writing
    with writing_books(request.out, replace=request.replace) as books:
        accounts = books.accounts(chart.accounts.values())
        say(f"streaming the general ledger {request.gl.name}")
        gl_lines = books.gl_lines(
            _in_period(read_gl(request.gl, mapping.gl, chart), request.gl.name, request.period),
            progress=lambda count: say(f"  {count:,} ledger lines"),
        )
        sources.append(SourceFile("gl", request.gl.name, _table_format(request.gl), sha256_of(request.gl)))
        books.source_digests = {source.name: source.sha256 for source in bank_sources}
        bank_lines = books.bank(statements, dict(mapping.bank_accounts))
        sources.extend(bank_sources)
        ledgers: list[tuple[str, Path | None, TableLayout, tuple[str, ...], Literal["vendor", "customer"]]] = [
            ("ap", request.ap, mapping.ap, AP_HEADER, "vendor"),
            ("ar", request.ar, mapping.ar, AR_HEADER, "customer"),
        ]
        for role, path, layout, header, party in ledgers:
            if path is None:
                continue
            name = "ap_subledger.csv" if role == "ap" else "ar_subledger.csv"
            books.table(
                name,
                header,
                (
                    (
                        item.invoice_id,
                        item.party,
                        item.invoice_date.isoformat(),
                        item.due_date.isoformat(),
                        str(item.amount),
                    )
                    for item in read_open_items(path, layout, party)
                ),
            )
            sources.append(SourceFile(role, path.name, _table_format(path), sha256_of(path)))
        for role, path, file, columns, header in (
            ("rates", request.rates, RATES.file, RATES.columns, RATES_HEADER),
            (
                "supplier_bank_changes",
                request.supplier_bank_changes,
                SUPPLIER_BANK_CHANGES.file,
                SUPPLIER_BANK_CHANGES.columns,
                SUPPLIER_CHANGES_HEADER,
            ),
            ("grni", request.grni, GRNI.file, GRNI.columns, GRNI_HEADER),
            ("intercompany", request.intercompany, INTERCOMPANY.file, INTERCOMPANY.columns, INTERCOMPANY_HEADER),
            ("prior_period", request.prior_period, "prior_period.csv", PNL_COLUMNS, PNL_HEADER),
            ("budget", request.budget, "budget.csv", PNL_COLUMNS, PNL_HEADER),
        ):
            if path is None:
                continue
            books.table(file, header, (_csv_row(row) for row in _passed_through(path, columns)))
            sources.append(SourceFile(role, path.name, "csv", sha256_of(path)))
        books.manifest(entity=request.entity, period=request.period, currency=currency, sources=sources)
    say(f"wrote {request.out.name}: {gl_lines:,} ledger lines, {len(statements)} statements, {bank_lines:,} bank lines")
    return ImportedBooks(request.out, accounts, gl_lines, len(statements), bank_lines, tuple(sources))


def _csv_row(row: tuple[object, ...]) -> tuple[str, ...]:
    return tuple(value.isoformat() if hasattr(value, "isoformat") else str(value) for value in row)


def _table_format(path: Path) -> str:
    return "xlsx" if path.suffix.lower() in (".xlsx", ".xlsm") else "csv"


def write_bank_feed(
    statements: Sequence[BankStatement], mapping: ImportMapping, folder: Path, sources: Sequence[SourceFile]
) -> Path:
    """A corrected feed in the books format (bank_lines.csv and bank_statements.csv) in `folder`; returns the path
    of its bank_lines.csv for `countersign.engine.books.load_bank_feed`."""
    with writing_books(folder, replace=True) as books:
        books.source_digests = {source.name: source.sha256 for source in sources}
        books.bank(statements, dict(mapping.bank_accounts))
    return folder / "bank_lines.csv"
