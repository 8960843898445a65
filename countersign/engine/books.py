"""Loading a books directory (the format `countersign synth` writes) into the book tables.

Every row is validated before anything is written: a bad file fails with the file, the row, the field and the
reason, and the transaction rolls back so nothing is half-loaded.
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
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.audit.trace import append_event, seal_pending
from countersign.engine.actors import ENGINE_ACTOR

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
    count = 0
    async with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN") as copy:
        for row in rows:
            await copy.write_row(prefix + row)
            count += 1
    return count


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
        loaded = await _loaded_before(conn, entity, period, digest)
        if loaded is not None:
            return LoadedBooks(
                loaded.book_set_id, entity, period, currency, digest, loaded.gl_lines, loaded.bank_feed_version
            )
        async with conn.cursor(row_factory=scalar_row) as cur:
            await cur.execute(
                "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
                " VALUES (%s, %s, %s, %s, %s, %s) RETURNING book_set_id",
                (entity, period, currency, books_dir.name, Jsonb(manifest), digest),
            )
            new_id: int | None = await cur.fetchone()
            assert new_id is not None
            book_set_id = new_id
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
            kind="books_loaded",
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


@dataclass(frozen=True)
class _LoadedBefore:
    book_set_id: int
    gl_lines: int
    bank_feed_version: int


async def _loaded_before(conn: AsyncConnection[Any], entity: str, period: str, digest: str) -> _LoadedBefore | None:
    """The book set these exact files were loaded into before, if any."""
    async with conn.cursor(row_factory=class_row(_LoadedBefore)) as cur:
        await cur.execute(
            "SELECT s.book_set_id,"
            "       (SELECT count(*) FROM book_gl_line g WHERE g.book_set_id = s.book_set_id) AS gl_lines,"
            "       COALESCE((SELECT max(feed_version) FROM bank_feed f WHERE f.book_set_id = s.book_set_id), 1)"
            "         AS bank_feed_version"
            "  FROM book_set s WHERE s.entity = %s AND s.period = %s AND s.digest = %s",
            (entity, period, digest),
        )
        return await cur.fetchone()


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


@dataclass(frozen=True)
class _UnbalancedJournal:
    journal_id: str
    total: Decimal


async def _check_journals_balance(conn: AsyncConnection[Any], book_set_id: int) -> None:
    async with conn.cursor(row_factory=class_row(_UnbalancedJournal)) as cur:
        await cur.execute(
            "SELECT journal_id, sum(amount) AS total FROM book_gl_line WHERE book_set_id = %s"
            " GROUP BY journal_id HAVING sum(amount) <> 0 ORDER BY journal_id LIMIT 1",
            (book_set_id,),
        )
        bad = await cur.fetchone()
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
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT feed_version FROM bank_feed WHERE book_set_id = %s AND digest = %s", (book_set_id, digest)
        )
        existing: int | None = await cur.fetchone()
        if existing is not None:
            return existing
        await cur.execute(
            "SELECT COALESCE(max(feed_version), 0) + 1 FROM bank_feed WHERE book_set_id = %s", (book_set_id,)
        )
        next_version: int | None = await cur.fetchone()
        assert next_version is not None
        version = next_version
        await cur.execute(
            "INSERT INTO bank_feed (book_set_id, feed_version, source, digest, loaded_by) VALUES (%s, %s, %s, %s, %s)",
            (book_set_id, version, path.name, digest, loaded_by),
        )
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


@dataclass(frozen=True)
class _StatementFinding:
    statement_id: str
    bank_account: str
    field: str
    problem: str


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


async def check_statements(conn: AsyncConnection[Any], book_set_id: int, feed_version: int) -> None:
    """Refuse a feed whose statements are of an account that is not cash, in another currency, loaded before for
    another period, of another period, out of balance with their lines, or not opening where the last one closed."""
    async with conn.cursor(row_factory=class_row(_StatementFinding)) as cur:
        await cur.execute(STATEMENT_CHECKS, {"book_set_id": book_set_id, "feed": feed_version})
        finding = await cur.fetchone()
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
            kind="bank_feed_loaded",
            close_id=close_id,
            payload={"loaded_by": loaded_by, "book_set_id": book_set_id, "feed_version": version, "source": path.name},
        )
    await seal_pending(conn)
    return version


async def latest_book_set(conn: AsyncConnection[Any], entity: str, period: str) -> int | None:
    """The newest book set loaded for the entity and period, if any."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT book_set_id FROM book_set WHERE entity = %s AND period = %s ORDER BY book_set_id DESC LIMIT 1",
            (entity, period),
        )
        found = await cur.fetchone()
    return None if found is None else int(found)


@dataclass(frozen=True)
class RecordedRate:
    from_currency: str
    to_currency: str
    rate: Decimal
    rate_date: date
    source: str


async def recorded_rate(
    conn: AsyncConnection[Any], book_set_id: int, from_currency: str, to_currency: str
) -> RecordedRate | None:
    """The rate a book set records for converting `from_currency` into `to_currency` (its rates.csv), if any."""
    async with conn.cursor(row_factory=class_row(RecordedRate)) as cur:
        await cur.execute(
            "SELECT from_currency, to_currency, rate, rate_date, source FROM book_rate"
            " WHERE book_set_id = %s AND from_currency = %s AND to_currency = %s",
            (book_set_id, from_currency, to_currency),
        )
        return await cur.fetchone()


async def book_rates(conn: AsyncConnection[Any], book_set_id: int) -> list[RecordedRate]:
    """Every rate a book set records, by currency pair."""
    async with conn.cursor(row_factory=class_row(RecordedRate)) as cur:
        await cur.execute(
            "SELECT from_currency, to_currency, rate, rate_date, source FROM book_rate WHERE book_set_id = %s"
            " ORDER BY from_currency, to_currency",
            (book_set_id,),
        )
        return await cur.fetchall()


@dataclass(frozen=True)
class _AccountName:
    account: str
    name: str


async def account_names(conn: AsyncConnection[Any], book_set_id: int, accounts: Sequence[str]) -> dict[str, str]:
    """Each of `accounts` with its name in the book set's chart (the code itself when the chart lacks it)."""
    async with conn.cursor(row_factory=class_row(_AccountName)) as cur:
        await cur.execute(
            "SELECT account, name FROM book_account WHERE book_set_id = %s AND account = ANY(%s)",
            (book_set_id, list(accounts)),
        )
        names = {row.account: row.name for row in await cur.fetchall()}
    return {account: names.get(account, account) for account in accounts}
