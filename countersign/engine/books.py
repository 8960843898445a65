"""Loading a books directory (the format `countersign synth` writes) into the book tables.

Every row is validated before anything is written: a bad file fails with the file, the row, the field and the
reason, and the transaction rolls back so nothing is half-loaded. The SQL (the inserts, the COPYs and the reads back)
lives in `countersign.store.books`; this module validates and owns the transaction.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event, seal_pending
from countersign.engine.actors import ENGINE_ACTOR
from countersign.states import TraceKind
from countersign.store import books as store_books
from countersign.store.books import RecordedRate as RecordedRate

MAX_FIELD_CHARS = 512
MAX_AMOUNT = Decimal(10) ** 16  # book amounts are numeric(18,2): at most 16 digits before the point


class BooksError(ValueError):
    def __init__(self, source: str, field: str, reason: str) -> None:
        super().__init__(f"{source}: {field}: {reason}")
        self.source = source
        self.field = field
        self.reason = reason


Parser = Callable[[str], object]


def _text(value: str) -> str:
    if len(value) > MAX_FIELD_CHARS:
        raise ValueError(f"longer than {MAX_FIELD_CHARS} characters")
    if "\x00" in value:
        raise ValueError("contains a NUL character, which PostgreSQL text cannot store")
    return value


def _amount(value: str) -> Decimal:
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a decimal amount") from None
    if not amount.is_finite():
        raise ValueError(f"{value!r} is not a finite amount")
    if abs(amount) >= MAX_AMOUNT:
        raise ValueError(f"{value!r} is too large (at most 16 digits before the decimal point)")
    cents = amount.quantize(Decimal("0.01"))  # exact: below MAX_AMOUNT the result has at most 18 digits
    if amount != cents:
        raise ValueError(f"{value!r} is not an amount with at most 2 decimal places")
    return cents


def _date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO date (YYYY-MM-DD)") from None


def _currency(value: str) -> str:
    if not re.fullmatch(r"[A-Z]{3}", value):
        raise ValueError(f"{value!r} is not an ISO 4217 currency code like GBP")
    return value


def _rate(value: str) -> Decimal:
    try:
        rate = Decimal(value)
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a decimal rate") from None
    if not rate.is_finite() or rate <= 0 or rate >= Decimal(10) ** 10 or rate != rate.quantize(Decimal("1e-10")):
        raise ValueError(f"{value!r} is not a positive rate with at most 10 decimal places")
    return rate


def _flag(value: str) -> bool:
    if value not in ("true", "false"):
        raise ValueError(f"{value!r} is not true or false")
    return value == "true"


def _count(value: str) -> int:
    if not value.isdigit() or len(value) > 9:
        raise ValueError(f"{value!r} is not a count")
    return int(value)


@dataclass(frozen=True)
class OptionalColumn:
    """A column a books file may carry (format 2): absent or empty, the row gets `default`."""

    header: str
    column: str
    parse: Parser
    default: object = None


@dataclass(frozen=True)
class TableSpec:
    file: str
    table: str
    columns: Sequence[tuple[str, str, Parser]]  # (csv header, table column, parser)
    optional: Sequence[OptionalColumn] = ()


ACCOUNTS = TableSpec(
    "accounts.csv",
    "book_account",
    (
        ("account", "account", _text),
        ("name", "name", _text),
        ("type", "type", _text),
        ("subtype", "subtype", _text),
    ),
    (OptionalColumn("currency", "currency", _currency),),
)
GL_LINES = TableSpec(
    "gl_lines.csv",
    "book_gl_line",
    (
        ("line_id", "line_id", _text),
        ("journal_id", "journal_id", _text),
        ("date", "line_date", _date),
        ("account", "account", _text),
        ("amount", "amount", _amount),
        ("reference", "reference", _text),
        ("description", "description", _text),
    ),
    (OptionalColumn("currency", "currency", _currency), OptionalColumn("currency_amount", "currency_amount", _amount)),
)
BANK_LINES_COLUMNS: Sequence[tuple[str, str, Parser]] = (
    ("bank_line_id", "bank_line_id", _text),
    ("account", "account", _text),
    ("date", "line_date", _date),
    ("amount", "amount", _amount),
    ("reference", "reference", _text),
    ("description", "description", _text),
)
BANK_LINES_OPTIONAL: Sequence[OptionalColumn] = (
    OptionalColumn("currency", "currency", _currency),
    OptionalColumn("value_date", "value_date", _date),
    OptionalColumn("bank_reference", "bank_reference", _text, ""),
    OptionalColumn("statement_id", "statement_id", _text),
)
STATEMENT_FORMATS = frozenset({"camt053", "mt940", "ofx", "csv", "books"})


def _statement_format(value: str) -> str:
    if value not in STATEMENT_FORMATS:
        raise ValueError(f"{value!r} is not one of {sorted(STATEMENT_FORMATS)}")
    return value


def _sha256(value: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise ValueError(f"{value!r} is not a lower-case hex SHA-256")
    return value


BANK_STATEMENTS_COLUMNS: Sequence[tuple[str, str, Parser]] = (
    ("statement_id", "statement_id", _text),
    ("account", "account", _text),
    ("bank_account", "bank_account", _text),
    ("currency", "currency", _currency),
    ("from_date", "from_date", _date),
    ("to_date", "to_date", _date),
    ("opening_balance", "opening_balance", _amount),
    ("closing_balance", "closing_balance", _amount),
    ("opening_stated", "opening_stated", _flag),
    ("entries", "entries", _count),
    ("format", "format", _statement_format),
    ("source", "source", _text),
    ("source_sha256", "source_sha256", _sha256),
)
RATES = TableSpec(
    "rates.csv",
    "book_rate",
    (
        ("from_currency", "from_currency", _currency),
        ("to_currency", "to_currency", _currency),
        ("rate", "rate", _rate),
        ("rate_date", "rate_date", _date),
        ("source", "source", _text),
    ),
)
SUPPLIER_BANK_CHANGES = TableSpec(
    "supplier_bank_changes.csv",
    "book_supplier_bank_change",
    (
        ("change_id", "change_id", _text),
        ("vendor", "vendor", _text),
        ("changed_on", "changed_on", _date),
        ("old_account", "old_account", _text),
        ("new_account", "new_account", _text),
        ("changed_by", "changed_by", _text),
    ),
)
OPTIONAL_FILES = ("bank_statements.csv", RATES.file, SUPPLIER_BANK_CHANGES.file)
AP_ITEMS = TableSpec(
    "ap_subledger.csv",
    "book_ap_item",
    (
        ("invoice_id", "invoice_id", _text),
        ("vendor", "vendor", _text),
        ("invoice_date", "invoice_date", _date),
        ("due_date", "due_date", _date),
        ("amount", "amount", _amount),
    ),
)
AR_ITEMS = TableSpec(
    "ar_subledger.csv",
    "book_ar_item",
    (
        ("invoice_id", "invoice_id", _text),
        ("customer", "customer", _text),
        ("invoice_date", "invoice_date", _date),
        ("due_date", "due_date", _date),
        ("amount", "amount", _amount),
    ),
)
GRNI = TableSpec(
    "grni.csv",
    "book_grni",
    (
        ("receipt_id", "receipt_id", _text),
        ("vendor", "vendor", _text),
        ("po_number", "po_number", _text),
        ("received_date", "received_date", _date),
        ("amount", "amount", _amount),
        ("expense_account", "expense_account", _text),
        ("description", "description", _text),
    ),
)
INTERCOMPANY = TableSpec(
    "intercompany.csv",
    "book_intercompany",
    (
        ("counterparty", "counterparty", _text),
        ("account", "account", _text),
        ("our_balance", "our_balance", _amount),
        ("their_balance", "their_balance", _amount),
    ),
)
PNL_COLUMNS: Sequence[tuple[str, str, Parser]] = (
    ("account", "account", _text),
    ("amount", "amount", _amount),
)
ACCOUNT_TYPES = frozenset({"asset", "liability", "equity", "revenue", "expense"})


@dataclass(frozen=True)
class LoadedBooks:
    book_set_id: int
    entity: str
    period: str
    currency: str
    digest: str
    gl_lines: int
    bank_feed_version: int


def read_rows(
    path: Path,
    columns: Sequence[tuple[str, str, Parser]],
    optional: Sequence[OptionalColumn] = (),
) -> Iterator[tuple[object, ...]]:
    """Parse a CSV against its expected columns, naming file, line and field on the first bad value.

    The header holds every column of `columns` and any of `optional`, in any order, each once; a row comes out in
    the order of `columns` then `optional`, an optional column the file lacks giving its default."""
    source = path.name
    if not path.is_file():
        raise BooksError(source, "(file)", "is missing")
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            try:
                yield from _parsed_rows(reader, source, columns, optional)
            except csv.Error as exc:
                raise BooksError(f"{source} line {reader.line_num}", "(row)", f"malformed CSV: {exc}") from None
    except UnicodeDecodeError:
        line, reason = _utf8_error(path)
        raise BooksError(f"{source} line {line}", "(encoding)", reason) from None
    except OSError as exc:
        raise BooksError(source, "(file)", f"cannot read: {exc.strerror or exc}") from None


def _parsed_rows(
    reader: Iterator[list[str]],
    source: str,
    columns: Sequence[tuple[str, str, Parser]],
    optional: Sequence[OptionalColumn],
) -> Iterator[tuple[object, ...]]:
    header = next(reader, None)
    expected = [name for name, _, _ in columns]
    allowed = [*expected, *(column.header for column in optional)]
    if (
        header is None
        or sorted(set(header)) != sorted(header)
        or not set(expected) <= set(header)
        or not set(header) <= set(allowed)
    ):
        extra = f" and optionally {[column.header for column in optional]}" if optional else ""
        raise BooksError(source, "(header)", f"expected columns {expected}{extra}, found {header}")
    position = {name: index for index, name in enumerate(header)}
    width = len(header)
    for line_no, row in enumerate(reader, start=2):
        if len(row) != width:
            raise BooksError(f"{source} line {line_no}", "(row)", f"expected {width} fields, got {len(row)}")
        parsed: list[object] = []
        for name, _, parse in columns:
            try:
                parsed.append(parse(row[position[name]]))
            except ValueError as exc:
                raise BooksError(f"{source} line {line_no}", name, str(exc)) from None
        for column in optional:
            index = position.get(column.header)
            raw = "" if index is None else row[index]
            if raw == "":
                parsed.append(column.default)
                continue
            try:
                parsed.append(column.parse(raw))
            except ValueError as exc:
                raise BooksError(f"{source} line {line_no}", column.header, str(exc)) from None
        yield tuple(parsed)


def _utf8_error(path: Path) -> tuple[int, str]:
    """Line and reason for the first byte that is not UTF-8 (read again only once decoding has failed)."""
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return line, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    return 1, "not valid UTF-8"  # pragma: no cover - only called after decoding failed


def file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()


def read_manifest(books_dir: Path) -> dict[str, Any]:
    path = books_dir / "entity.json"
    if not path.is_file():
        raise BooksError(str(path.name), "(file)", f"is missing in {books_dir.name}: not a books directory")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BooksError("entity.json", "(json)", str(exc)) from None
    if not isinstance(manifest, dict):
        raise BooksError("entity.json", "(root)", "must be an object")
    for field in ("entity", "period", "currency"):
        if not isinstance(manifest.get(field), str) or not manifest[field]:
            raise BooksError("entity.json", field, "is required and must be a non-empty string")
    return manifest


async def _copy(
    conn: AsyncConnection[Any],
    table: str,
    fixed: Sequence[tuple[str, object]],
    columns: Sequence[tuple[str, str, Parser]],
    rows: Iterator[tuple[object, ...]],
    optional: Sequence[OptionalColumn] = (),
) -> int:
    names = [name for name, _ in fixed] + [column for _, column, _ in columns] + [o.column for o in optional]
    prefix = tuple(value for _, value in fixed)
    return await store_books.copy_rows(conn, table, names, (prefix + row for row in rows))


async def _copy_spec(
    conn: AsyncConnection[Any], spec: TableSpec, fixed: Sequence[tuple[str, object]], books_dir: Path
) -> int:
    rows = read_rows(books_dir / spec.file, spec.columns, spec.optional)
    return await _copy(conn, spec.table, fixed, spec.columns, rows, spec.optional)


async def load_books(conn: AsyncConnection[Any], books_dir: Path, *, loaded_by: str) -> LoadedBooks:
    """Load a books directory in one transaction. Loading identical books twice returns the first load."""
    manifest = read_manifest(books_dir)
    entity, period, currency = manifest["entity"], manifest["period"], manifest["currency"]
    digests = {
        spec: file_digest(books_dir / spec)
        for spec in sorted(
            [
                ACCOUNTS.file,
                GL_LINES.file,
                "bank_lines.csv",
                AP_ITEMS.file,
                AR_ITEMS.file,
                GRNI.file,
                INTERCOMPANY.file,
                "prior_period.csv",
                "budget.csv",
                *OPTIONAL_FILES,
            ]
        )
        if (books_dir / spec).is_file()
    }
    digest = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()
    async with conn.transaction():
        loaded = await store_books.loaded_before(conn, entity, period, digest)
        if loaded is not None:
            return LoadedBooks(
                loaded.book_set_id, entity, period, currency, digest, loaded.gl_lines, loaded.bank_feed_version
            )
        book_set_id = await store_books.insert_book_set(
            conn,
            entity=entity,
            period=period,
            currency=currency,
            source=books_dir.name,
            manifest=manifest,
            digest=digest,
        )
        fixed = (("book_set_id", book_set_id),)
        await _copy(
            conn, ACCOUNTS.table, fixed, ACCOUNTS.columns, _checked_accounts(books_dir, currency), ACCOUNTS.optional
        )
        gl_count = 0
        gl_count = await _copy(
            conn, GL_LINES.table, fixed, GL_LINES.columns, _checked_gl_lines(books_dir), GL_LINES.optional
        )
        for spec in (AP_ITEMS, AR_ITEMS, GRNI, INTERCOMPANY):
            await _copy_spec(conn, spec, fixed, books_dir)
        for spec in (RATES, SUPPLIER_BANK_CHANGES):
            if (books_dir / spec.file).is_file():
                await _copy_spec(conn, spec, fixed, books_dir)
        for basis, file in (("prior", "prior_period.csv"), ("budget", "budget.csv")):
            await _copy(
                conn,
                "book_pnl_reference",
                (("book_set_id", book_set_id), ("basis", basis)),
                PNL_COLUMNS,
                read_rows(books_dir / file, PNL_COLUMNS),
            )
        feed_version = await _insert_bank_feed(conn, book_set_id, books_dir / "bank_lines.csv", loaded_by)
        await _check_journals_balance(conn, book_set_id)
        await append_event(
            conn,
            actor=ENGINE_ACTOR,
            kind=TraceKind.BOOKS_LOADED,
            payload={
                "loaded_by": loaded_by,
                "entity": entity,
                "period": period,
                "book_set_id": book_set_id,
                "digest": digest,
                "gl_lines": gl_count,
                "profile": manifest.get("profile"),
                "seed": manifest.get("seed"),
            },
        )
    await seal_pending(conn)
    return LoadedBooks(book_set_id, entity, period, currency, digest, gl_count, feed_version)


def _checked_gl_lines(books_dir: Path) -> Iterator[tuple[object, ...]]:
    """GL lines whose transaction currency and amount come together or not at all."""
    for line_no, row in enumerate(read_rows(books_dir / GL_LINES.file, GL_LINES.columns, GL_LINES.optional), start=2):
        currency, currency_amount = row[-2:]
        if (currency is None) != (currency_amount is None):
            raise BooksError(
                f"{GL_LINES.file} line {line_no}",
                "currency" if currency is None else "currency_amount",
                "currency and currency_amount come together: the line's transaction currency and its amount in it",
            )
        yield row


def _checked_accounts(books_dir: Path, functional_currency: str) -> Iterator[tuple[object, ...]]:
    for row in read_rows(books_dir / ACCOUNTS.file, ACCOUNTS.columns, ACCOUNTS.optional):
        _account, _name, account_type, _subtype, currency = row
        if account_type not in ACCOUNT_TYPES:
            raise BooksError(ACCOUNTS.file, "type", f"{account_type!r} is not one of {sorted(ACCOUNT_TYPES)}")
        if currency == functional_currency:  # an account in the functional currency says nothing more
            row = (*row[:4], None)
        yield row


async def _check_journals_balance(conn: AsyncConnection[Any], book_set_id: int) -> None:
    bad = await store_books.first_unbalanced_journal(conn, book_set_id)
    if bad is not None:
        raise BooksError(GL_LINES.file, "amount", f"journal {bad.journal_id} does not balance (sums to {bad.total})")


def _feed_digest(path: Path) -> str:
    """A feed's digest: its lines' file, and its statements' file when one lies beside it."""
    if not path.is_file():
        return ""
    statements = path.parent / STATEMENTS_FILE
    if not statements.is_file():
        return file_digest(path)
    return hashlib.sha256(f"{file_digest(path)}:{file_digest(statements)}".encode()).hexdigest()


STATEMENTS_FILE = "bank_statements.csv"


async def _insert_bank_feed(conn: AsyncConnection[Any], book_set_id: int, path: Path, loaded_by: str) -> int:
    """A bank feed: `path` (bank_lines.csv) and, when `bank_statements.csv` lies beside it, the statements its lines
    belong to, each checked (account, currency, period, balances, a statement loaded for another period).

    A line naming a statement is checked against it as it is read (the statement exists, is of the line's account
    and currency, and has room for it), so a bad line is refused by its line number before the database's own
    statement trigger would refuse the whole file."""
    digest = _feed_digest(path)
    existing = await store_books.feed_version_with_digest(conn, book_set_id, digest)
    if existing is not None:
        return existing
    version = await store_books.next_feed_version(conn, book_set_id)
    await store_books.insert_bank_feed(conn, book_set_id, version, path.name, digest, loaded_by)
    fixed = (("book_set_id", book_set_id), ("feed_version", version))
    statements_path = path.parent / STATEMENTS_FILE
    statements = _read_statements(statements_path) if statements_path.is_file() else None
    if statements is not None:
        await _copy(conn, "book_bank_statement", fixed, BANK_STATEMENTS_COLUMNS, iter(statements.rows))
    await _copy(
        conn,
        "book_bank_line",
        fixed,
        BANK_LINES_COLUMNS,
        _checked_bank_lines(path, statements),
        BANK_LINES_OPTIONAL,
    )
    if statements is not None:
        await check_statements(conn, book_set_id, version)
    return version


@dataclass(frozen=True)
class _Statement:
    currency: str
    entries: int
    line: int


@dataclass(frozen=True)
class _Statements:
    rows: list[tuple[object, ...]]
    by_key: dict[tuple[str, str], _Statement]  # (GL account, statement id): banks number statements per account

    def accounts_of(self, statement_id: str) -> list[str]:
        return sorted(account for account, named in self.by_key if named == statement_id)


def _read_statements(path: Path) -> _Statements:
    """A feed's statements (a few per account and period, so held in memory), each account's statement id once."""
    rows: list[tuple[object, ...]] = []
    by_key: dict[tuple[str, str], _Statement] = {}
    for line_no, row in enumerate(read_rows(path, BANK_STATEMENTS_COLUMNS), start=2):
        statement_id, account, _bank_account, currency, *_dates_and_balances, entries = row[:10]
        assert isinstance(statement_id, str) and isinstance(account, str) and isinstance(currency, str)
        assert isinstance(entries, int)
        first = by_key.get((account, statement_id))
        if first is not None:
            raise BooksError(
                f"{path.name} line {line_no}",
                "statement_id",
                f"statement {statement_id} of account {account} is listed twice (first on line {first.line});"
                " expected each statement once",
            )
        by_key[account, statement_id] = _Statement(currency, entries, line_no)
        rows.append(row)
    return _Statements(rows, by_key)


def _checked_bank_lines(path: Path, statements: _Statements | None) -> Iterator[tuple[object, ...]]:
    """Bank lines, each naming (if any) a statement of the feed that is of its account and currency and that states
    at least as many entries as name it."""
    held: dict[tuple[str, str], int] = {}
    for line_no, row in enumerate(read_rows(path, BANK_LINES_COLUMNS, BANK_LINES_OPTIONAL), start=2):
        line_id, account, currency, named = row[0], str(row[1]), row[6], row[9]
        if named is None:
            yield row
            continue
        statement_id = str(named)
        where = f"{path.name} line {line_no}"
        if statements is None:
            raise BooksError(
                where,
                "statement_id",
                f"bank line {line_id} names statement {statement_id}, but there is no {STATEMENTS_FILE} beside"
                f" {path.name}",
            )
        statement = statements.by_key.get((account, statement_id))
        if statement is None:
            others = statements.accounts_of(statement_id)
            held_for = f"holds only for account {', '.join(others)}" if others else "does not hold"
            raise BooksError(
                where,
                "statement_id",
                f"bank line {line_id} of account {account} names statement {statement_id}, which {STATEMENTS_FILE}"
                f" {held_for}",
            )
        if currency is not None and currency != statement.currency:
            raise BooksError(
                where,
                "currency",
                f"bank line {line_id} is in {currency} but its statement {statement_id} is in {statement.currency}",
            )
        key = (account, statement_id)
        held[key] = held.get(key, 0) + 1
        if held[key] > statement.entries:
            raise BooksError(
                where,
                "statement_id",
                f"bank line {line_id} is entry {held[key]} of statement {statement_id}, which states"
                f" {statement.entries} entries ({STATEMENTS_FILE} line {statement.line})",
            )
        yield row


async def check_statements(conn: AsyncConnection[Any], book_set_id: int, feed_version: int) -> None:
    """Refuse a feed whose statements are of an account that is not cash, in another currency, loaded before for
    another period, of another period, out of balance with their lines, or not opening where the last one closed."""
    finding = await store_books.first_statement_finding(conn, book_set_id, feed_version)
    if finding is not None:
        raise BooksError(
            f"{STATEMENTS_FILE} statement {finding.statement_id}",
            finding.field,
            f"{finding.bank_account} {finding.problem}",
        )


async def load_bank_feed(
    conn: AsyncConnection[Any], book_set_id: int, path: Path, *, loaded_by: str, close_id: str | None = None
) -> int:
    """Load a corrected bank feed as a new feed version; the next reconciliation reads the latest version."""
    async with conn.transaction():
        version = await _insert_bank_feed(conn, book_set_id, path, loaded_by)
        await append_event(
            conn,
            actor=ENGINE_ACTOR,
            kind=TraceKind.BANK_FEED_LOADED,
            close_id=close_id,
            payload={"loaded_by": loaded_by, "book_set_id": book_set_id, "feed_version": version, "source": path.name},
        )
    await seal_pending(conn)
    return version


async def latest_book_set(conn: AsyncConnection[Any], entity: str, period: str) -> int | None:
    """The newest book set loaded for the entity and period, if any."""
    return await store_books.latest_book_set(conn, entity, period)


async def recorded_rate(
    conn: AsyncConnection[Any], book_set_id: int, from_currency: str, to_currency: str
) -> RecordedRate | None:
    """The rate a book set records for converting `from_currency` into `to_currency` (its rates.csv), if any."""
    return await store_books.recorded_rate(conn, book_set_id, from_currency, to_currency)


async def book_rates(conn: AsyncConnection[Any], book_set_id: int) -> list[RecordedRate]:
    """Every rate a book set records, by currency pair."""
    return await store_books.book_rates(conn, book_set_id)


async def account_names(conn: AsyncConnection[Any], book_set_id: int, accounts: Sequence[str]) -> dict[str, str]:
    """Each of `accounts` with its name in the book set's chart (the code itself when the chart lacks it)."""
    names = await store_books.account_names(conn, book_set_id, accounts)
    return {account: names.get(account, account) for account in accounts}
