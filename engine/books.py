"""Loading a books directory (the format `countersign synth` writes) into the book tables.

Every row is validated before anything is written: a bad file fails with the file, the row, the field and the
reason, and the transaction rolls back so nothing is half-loaded.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from audit.trace import append_event, seal_pending
from engine.actors import ENGINE_ACTOR

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


@dataclass(frozen=True)
class TableSpec:
    file: str
    table: str
    columns: Sequence[tuple[str, str, Parser]]  # (csv header, table column, parser)


ACCOUNTS = TableSpec(
    "accounts.csv",
    "book_account",
    (
        ("account", "account", _text),
        ("name", "name", _text),
        ("type", "type", _text),
        ("subtype", "subtype", _text),
    ),
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
)
BANK_LINES_COLUMNS: Sequence[tuple[str, str, Parser]] = (
    ("bank_line_id", "bank_line_id", _text),
    ("account", "account", _text),
    ("date", "line_date", _date),
    ("amount", "amount", _amount),
    ("reference", "reference", _text),
    ("description", "description", _text),
)
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


def read_rows(path: Path, columns: Sequence[tuple[str, str, Parser]]) -> Iterator[tuple[object, ...]]:
    """Parse a CSV against its expected columns, naming file, line and field on the first bad value."""
    source = path.name
    if not path.is_file():
        raise BooksError(source, "(file)", "is missing")
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            try:
                yield from _parsed_rows(reader, source, columns)
            except csv.Error as exc:
                raise BooksError(f"{source} line {reader.line_num}", "(row)", f"malformed CSV: {exc}") from None
    except UnicodeDecodeError:
        line, reason = _utf8_error(path)
        raise BooksError(f"{source} line {line}", "(encoding)", reason) from None
    except OSError as exc:
        raise BooksError(source, "(file)", f"cannot read: {exc.strerror or exc}") from None


def _parsed_rows(
    reader: Iterator[list[str]], source: str, columns: Sequence[tuple[str, str, Parser]]
) -> Iterator[tuple[object, ...]]:
    header = next(reader, None)
    expected = [name for name, _, _ in columns]
    if header != expected:
        raise BooksError(source, "(header)", f"expected columns {expected}, found {header}")
    for line_no, row in enumerate(reader, start=2):
        if len(row) != len(columns):
            raise BooksError(f"{source} line {line_no}", "(row)", f"expected {len(columns)} fields, got {len(row)}")
        parsed: list[object] = []
        for (name, _, parse), raw in zip(columns, row, strict=True):
            try:
                parsed.append(parse(raw))
            except ValueError as exc:
                raise BooksError(f"{source} line {line_no}", name, str(exc)) from None
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
) -> int:
    names = [name for name, _ in fixed] + [column for _, column, _ in columns]
    prefix = tuple(value for _, value in fixed)
    count = 0
    async with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN") as copy:
        for row in rows:
            await copy.write_row(prefix + row)
            count += 1
    return count


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
        await _copy(conn, ACCOUNTS.table, fixed, ACCOUNTS.columns, _checked_accounts(books_dir))
        gl_count = 0
        for spec in (GL_LINES, AP_ITEMS, AR_ITEMS, GRNI, INTERCOMPANY):
            count = await _copy(conn, spec.table, fixed, spec.columns, read_rows(books_dir / spec.file, spec.columns))
            if spec is GL_LINES:
                gl_count = count
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


def _checked_accounts(books_dir: Path) -> Iterator[tuple[object, ...]]:
    for row in read_rows(books_dir / ACCOUNTS.file, ACCOUNTS.columns):
        _account, _name, account_type, _subtype = row
        if account_type not in ACCOUNT_TYPES:
            raise BooksError(ACCOUNTS.file, "type", f"{account_type!r} is not one of {sorted(ACCOUNT_TYPES)}")
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


async def _insert_bank_feed(conn: AsyncConnection[Any], book_set_id: int, path: Path, loaded_by: str) -> int:
    digest = file_digest(path) if path.is_file() else ""
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
    await _copy(
        conn,
        "book_bank_line",
        (("book_set_id", book_set_id), ("feed_version", version)),
        BANK_LINES_COLUMNS,
        read_rows(path, BANK_LINES_COLUMNS),
    )
    return version


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
