"""Bank statements in a books folder: the loader refuses a statement that does not hold, and loads nothing.

Each test starts from the seed-42 books (ACME-UK, 2026-10, cash accounts 1000 and 1010) with one statement per cash
account written beside their bank lines so that every statement holds, and changes one thing.
"""

from __future__ import annotations

import csv
import json
import shutil
from calendar import monthrange
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from countersign.engine.books import BooksError, load_bank_feed, load_books
from tests.support import count

SOURCE_SHA256 = "ab" * 32
OPENING = {"1000": Decimal("250000.00"), "1010": Decimal("80000.00")}
BANK_ACCOUNT = {"1000": "GB33BUKB20201555555555", "1010": "GB94BARC10201530093459"}
STATEMENT = {"1000": "OPS-2026-10", "1010": "PAY-2026-10"}
STATEMENT_HEADER = [
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
]
LOADED_TABLES = ("book_set", "bank_feed", "book_bank_line", "book_bank_statement")


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _write(path: Path, header: list[str], rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def add_statements(
    feed: Path, statements: dict[str, str], period: str, openings: dict[str, Decimal] = OPENING
) -> dict[str, dict[str, str]]:
    """Name each line of `feed` (a bank_lines.csv) its account's statement (`statements`: account -> statement id)
    and write the bank_statements.csv beside it, each statement covering the whole period and balancing: closing =
    its opening + its lines. Returns the statements by account."""
    lines = _read(feed)
    header = [*lines[0].keys(), "statement_id"] if lines else []
    moved: dict[str, Decimal] = defaultdict(Decimal)
    entries: dict[str, int] = defaultdict(int)
    for line in lines:
        line["statement_id"] = statements[line["account"]]
        moved[line["account"]] += Decimal(line["amount"])
        entries[line["account"]] += 1
    _write(feed, header, lines)
    year, month = (int(part) for part in period.split("-"))
    last_day = monthrange(year, month)[1]
    rows = {
        account: {
            "statement_id": statement_id,
            "account": account,
            "bank_account": BANK_ACCOUNT[account],
            "currency": "GBP",
            "from_date": f"{period}-01",
            "to_date": f"{period}-{last_day:02d}",
            "opening_balance": str(openings[account]),
            "closing_balance": str(openings[account] + moved[account]),
            "opening_stated": "true",
            "entries": str(entries[account]),
            "format": "books",
            "source": "bank_lines.csv",
            "source_sha256": SOURCE_SHA256,
        }
        for account, statement_id in statements.items()
    }
    _write(feed.parent / "bank_statements.csv", STATEMENT_HEADER, list(rows.values()))
    return rows


def with_statements(default_books: Path, tmp_path: Path, name: str = "books") -> Path:
    """A copy of the seed-42 books with one balancing statement per cash account."""
    books = tmp_path / name
    shutil.copytree(default_books, books)
    add_statements(books / "bank_lines.csv", STATEMENT, "2026-10")
    return books


def change_statement(books: Path, statement_id: str, **changes: str) -> None:
    path = books / "bank_statements.csv"
    rows = _read(path)
    assert statement_id in {row["statement_id"] for row in rows}
    for row in rows:
        if row["statement_id"] == statement_id:
            row.update(changes)
    _write(path, STATEMENT_HEADER, rows)


def statement_of(books: Path, statement_id: str) -> dict[str, str]:
    return next(row for row in _read(books / "bank_statements.csv") if row["statement_id"] == statement_id)


async def counts(conn: Any) -> dict[str, int]:
    return {table: await count(conn, f"SELECT count(*) FROM {table}") for table in LOADED_TABLES}


NOTHING = dict.fromkeys(LOADED_TABLES, 0)


async def refused(conn: Any, books: Path, statement_id: str, field: str, reason: str) -> BooksError:
    """Loading `books` fails with one error naming bank_statements.csv, the statement, its `field` and `reason`."""
    with pytest.raises(BooksError) as failure:
        await load_books(conn, books, loaded_by="test")
    message = str(failure.value)
    assert message.startswith(f"bank_statements.csv statement {statement_id}: {field}: "), message
    assert reason in message, message
    return failure.value


# --- a statement that holds loads, with its lines ------------------------------------------------------------


async def test_books_with_balancing_statements_load_and_each_line_names_its_statement(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    loaded = await load_books(conn, books, loaded_by="test")
    assert await counts(conn) == {"book_set": 1, "bank_feed": 1, "book_bank_line": 121, "book_bank_statement": 2}
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT s.statement_id, s.account, s.entries, s.opening_balance, s.closing_balance,"
            "       count(l.bank_line_id), s.opening_balance + sum(l.amount)"
            "  FROM book_bank_statement s JOIN book_bank_line l USING (book_set_id, feed_version, statement_id)"
            " WHERE s.book_set_id = %s GROUP BY s.statement_id, s.account, s.entries, s.opening_balance,"
            "       s.closing_balance ORDER BY s.statement_id",
            (loaded.book_set_id,),
        )
        rows = await cur.fetchall()
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [
        ("OPS-2026-10", "1000", 17, 17),
        ("PAY-2026-10", "1010", 104, 104),
    ]
    for row in rows:
        assert row[4] == row[6]  # closing = opening + the lines' sum, as loaded
    assert await count(conn, "SELECT count(*) FROM book_bank_line WHERE statement_id IS NULL") == 0


# --- one thing wrong with a statement: refused, nothing loaded -----------------------------------------------


async def test_a_statement_of_an_account_that_is_not_cash_is_refused(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    lines = _read(books / "bank_lines.csv")
    for line in lines:
        if line["statement_id"] == "OPS-2026-10":
            line["account"] = "2000"  # Accounts Payable, a payable_control account
    _write(books / "bank_lines.csv", list(lines[0].keys()), lines)
    change_statement(books, "OPS-2026-10", account="2000")
    await refused(conn, books, "OPS-2026-10", "account", "booked to account 2000, which is not a cash account")
    assert await counts(conn) == NOTHING


async def test_a_statement_of_an_account_missing_from_the_chart_is_refused(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    lines = _read(books / "bank_lines.csv")
    for line in lines:
        if line["statement_id"] == "OPS-2026-10":
            line["account"] = "1999"
    _write(books / "bank_lines.csv", list(lines[0].keys()), lines)
    change_statement(books, "OPS-2026-10", account="1999")
    await refused(conn, books, "OPS-2026-10", "account", "booked to account 1999, which is not a cash account")
    assert await counts(conn) == NOTHING


async def test_a_statement_in_another_currency_than_its_account_is_refused(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    change_statement(books, "PAY-2026-10", currency="USD")
    await refused(
        conn, books, "PAY-2026-10", "currency", "GB94BARC10201530093459 is in USD but account 1010 is kept in GBP"
    )
    assert await counts(conn) == NOTHING


async def test_a_statement_dated_outside_the_period_is_refused(conn: Any, default_books: Path, tmp_path: Path) -> None:
    books = with_statements(default_books, tmp_path)
    change_statement(books, "OPS-2026-10", from_date="2026-09-28")
    await refused(
        conn, books, "OPS-2026-10", "from_date", "covers 2026-09-28 to 2026-10-31, outside the period 2026-10"
    )
    assert await counts(conn) == NOTHING


async def test_a_statement_whose_closing_balance_is_a_penny_out_is_refused(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    statement = statement_of(books, "PAY-2026-10")
    closing = Decimal(statement["closing_balance"])
    change_statement(books, "PAY-2026-10", closing_balance=str(closing + Decimal("0.01")))
    movements = closing - Decimal(statement["opening_balance"])
    await refused(
        conn,
        books,
        "PAY-2026-10",
        "closing_balance",
        f"states 104 entries and opening 80000.00 + movements {movements + Decimal('0.01')} = closing"
        f" {closing + Decimal('0.01')}, but the feed holds 104 entries moving {movements}",
    )
    assert await counts(conn) == NOTHING


async def test_a_statement_stating_one_entry_more_than_it_holds_is_refused(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    change_statement(books, "OPS-2026-10", entries="18")
    error = await refused(conn, books, "OPS-2026-10", "entries", "states 18 entries")
    assert "the feed holds 17 entries" in str(error)
    assert await counts(conn) == NOTHING


async def test_a_statement_stating_one_entry_fewer_than_it_holds_is_refused(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    change_statement(books, "OPS-2026-10", entries="16")
    with pytest.raises(BooksError) as failure:
        await load_books(conn, books, loaded_by="test")
    assert str(failure.value) == (
        "bank_lines.csv line 18: statement_id: bank line BNK-1000-E000017 is entry 17 of statement OPS-2026-10,"
        " which states 16 entries (bank_statements.csv line 2)"
    )
    assert await counts(conn) == NOTHING


# --- a bank line that names a statement the feed does not hold for it ----------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"statement_id": "NO-SUCH-STATEMENT"},
            "BNK-1000-E000003 of account 1000 names statement NO-SUCH-STATEMENT,"
            " which bank_statements.csv does not hold",
        ),
        (
            {"statement_id": "PAY-2026-10"},
            "of account 1000 names statement PAY-2026-10, which bank_statements.csv holds only for account 1010",
        ),
        ({"currency": "EUR"}, "is in EUR but its statement OPS-2026-10 is in GBP"),
    ],
)
async def test_a_bank_line_naming_a_statement_not_its_own_is_refused_by_line(
    conn: Any, default_books: Path, tmp_path: Path, change: dict[str, str], reason: str
) -> None:
    books = with_statements(default_books, tmp_path)
    lines = _read(books / "bank_lines.csv")
    header = [*lines[0].keys(), "currency"]
    for line in lines:
        line["currency"] = ""
    lines[2].update(change)  # BNK-1000-E000003, of statement OPS-2026-10
    _write(books / "bank_lines.csv", header, lines)
    with pytest.raises(BooksError) as failure:
        await load_books(conn, books, loaded_by="test")
    message = str(failure.value)
    assert failure.value.source == "bank_lines.csv line 4", message
    assert reason in message, message
    assert await counts(conn) == NOTHING


async def test_a_bank_line_naming_a_statement_without_a_statements_file_is_refused(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    (books / "bank_statements.csv").unlink()
    with pytest.raises(BooksError) as failure:
        await load_books(conn, books, loaded_by="test")
    message = str(failure.value)
    assert failure.value.source == "bank_lines.csv line 2", message
    assert "statement_id" in message and "OPS-2026-10" in message and "bank_statements.csv" in message, message
    assert await counts(conn) == NOTHING


async def test_a_statement_listed_twice_is_refused(conn: Any, default_books: Path, tmp_path: Path) -> None:
    books = with_statements(default_books, tmp_path)
    path = books / "bank_statements.csv"
    rows = _read(path)
    _write(path, STATEMENT_HEADER, [*rows, rows[0]])
    with pytest.raises(BooksError) as failure:
        await load_books(conn, books, loaded_by="test")
    message = str(failure.value)
    assert failure.value.source == "bank_statements.csv line 4", message
    assert "statement_id" in message and "OPS-2026-10" in message and "line 2" in message, message
    assert await counts(conn) == NOTHING


async def test_two_accounts_statements_sharing_a_number_load_each_with_its_own_lines(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    """Banks number statements per account (MT940 :28C: 1/1 on both): a line's statement is its account's."""
    books = tmp_path / "books"
    shutil.copytree(default_books, books)
    add_statements(books / "bank_lines.csv", {"1000": "00001/001", "1010": "00001/001"}, "2026-10")
    loaded = await load_books(conn, books, loaded_by="test")
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT s.account, s.entries, count(l.bank_line_id), s.closing_balance - s.opening_balance, sum(l.amount)"
            "  FROM book_bank_statement s"
            "  JOIN book_bank_line l USING (book_set_id, feed_version, account, statement_id)"
            " WHERE s.book_set_id = %s GROUP BY 1, 2, s.closing_balance, s.opening_balance ORDER BY 1",
            (loaded.book_set_id,),
        )
        rows = await cur.fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [("1000", 17, 17), ("1010", 104, 104)]
    assert all(r[3] == r[4] for r in rows)


# --- across periods: continuity and duplicates -----------------------------------------------------------------


def november_books(tmp_path: Path, default_books: Path, *, opening: Decimal, name: str = "november") -> Path:
    """A small hand-written November for ACME-UK: the same chart, one balanced journal, three bank lines on account
    1000 in one statement opening at `opening`."""
    books = tmp_path / name
    books.mkdir()
    shutil.copy(default_books / "accounts.csv", books / "accounts.csv")
    for file in ("ap_subledger.csv", "ar_subledger.csv", "grni.csv", "intercompany.csv", "prior_period.csv"):
        header = (default_books / file).read_text(encoding="utf-8").splitlines()[0]
        (books / file).write_text(header + "\n", encoding="utf-8")
    (books / "budget.csv").write_text("account,amount\n", encoding="utf-8")
    (books / "entity.json").write_text(
        json.dumps({"entity": "ACME-UK", "period": "2026-11", "currency": "GBP"}), encoding="utf-8"
    )
    (books / "gl_lines.csv").write_text(
        "line_id,journal_id,date,account,amount,reference,description\n"
        "N-1,NJ-1,2026-11-03,1000,1200.00,SI-9001,Receipt from Pennine Retail LLP\n"
        "N-2,NJ-1,2026-11-03,1100,-1200.00,SI-9001,Receipt from Pennine Retail LLP\n",
        encoding="utf-8",
    )
    (books / "bank_lines.csv").write_text(
        "bank_line_id,account,date,amount,reference,description\n"
        "BNK-N-1,1000,2026-11-03,1200.00,SI-9001,BACS CREDIT\n"
        "BNK-N-2,1000,2026-11-10,-350.25,EXT-1,FASTER PAYMENT OUT\n"
        "BNK-N-3,1000,2026-11-27,-49.75,EXT-2,CARD FEE\n",
        encoding="utf-8",
    )
    add_statements(books / "bank_lines.csv", {"1000": "OPS-2026-11"}, "2026-11", {"1000": opening})
    return books


async def test_a_statement_opening_elsewhere_than_the_last_period_closed_is_refused(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    october = with_statements(default_books, tmp_path)
    await load_books(conn, october, loaded_by="test")
    october_closing = Decimal(statement_of(october, "OPS-2026-10")["closing_balance"])
    before = await counts(conn)
    november = november_books(tmp_path, default_books, opening=october_closing + Decimal("100.00"))
    await refused(
        conn,
        november,
        "OPS-2026-11",
        "opening_balance",
        f"GB33BUKB20201555555555 opens at {october_closing + Decimal('100.00')}"
        f" but statement OPS-2026-10 closed 2026-10 at {october_closing}",
    )
    assert await counts(conn) == before


async def test_a_statement_opening_where_the_last_period_closed_loads(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    october = with_statements(default_books, tmp_path)
    await load_books(conn, october, loaded_by="test")
    october_closing = Decimal(statement_of(october, "OPS-2026-10")["closing_balance"])
    november = november_books(tmp_path, default_books, opening=october_closing)
    loaded = await load_books(conn, november, loaded_by="test")
    assert loaded.period == "2026-11"
    assert await count(conn, "SELECT count(*) FROM book_bank_statement WHERE book_set_id = %s", loaded.book_set_id) == 1
    assert await counts(conn) == {"book_set": 2, "bank_feed": 2, "book_bank_line": 124, "book_bank_statement": 3}


async def test_the_same_statement_loaded_for_another_period_is_refused_as_a_duplicate(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    october = with_statements(default_books, tmp_path)
    await load_books(conn, october, loaded_by="test")
    before = await counts(conn)
    # November's books carry October's operating statement again: the same file, the same account and id.
    november = with_statements(default_books, tmp_path, name="november-with-october")
    manifest = json.loads((november / "entity.json").read_text(encoding="utf-8"))
    (november / "entity.json").write_text(json.dumps({**manifest, "period": "2026-11"}), encoding="utf-8")
    await refused(
        conn, november, "OPS-2026-10", "source_sha256", "was loaded before for ACME-UK 2026-10 (a duplicate statement)"
    )
    assert await counts(conn) == before


async def test_the_same_statement_in_reloaded_books_of_the_same_period_is_not_a_duplicate(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    """The control for the test above: books of the same period loaded again (another digest) carry it again."""
    october = with_statements(default_books, tmp_path)
    first = await load_books(conn, october, loaded_by="test")
    again = with_statements(default_books, tmp_path, name="october-again")
    (again / "grni.csv").write_text((again / "grni.csv").read_text(encoding="utf-8").splitlines()[0] + "\n")
    second = await load_books(conn, again, loaded_by="test")
    assert second.book_set_id != first.book_set_id
    assert await count(conn, "SELECT count(*) FROM book_bank_statement") == 4


# --- a corrected feed with its statements ----------------------------------------------------------------------


async def test_a_corrected_feed_with_statements_loads_as_a_new_feed_version(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    loaded = await load_books(conn, books, loaded_by="test")
    corrected = tmp_path / "corrected"
    corrected.mkdir()
    shutil.copy(default_books / "corrected" / "bank_lines.csv", corrected / "bank_lines.csv")
    add_statements(corrected / "bank_lines.csv", STATEMENT, "2026-10")
    version = await load_bank_feed(conn, loaded.book_set_id, corrected / "bank_lines.csv", loaded_by="test")
    assert version == 2
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT s.statement_id, s.entries, count(l.bank_line_id) FROM book_bank_statement s"
            "  JOIN book_bank_line l USING (book_set_id, feed_version, statement_id)"
            " WHERE s.book_set_id = %s AND s.feed_version = 2 GROUP BY 1, 2 ORDER BY 1",
            (loaded.book_set_id,),
        )
        statements = await cur.fetchall()
    lines = _read(corrected / "bank_lines.csv")
    held = {sid: sum(1 for line in lines if line["statement_id"] == sid) for sid in STATEMENT.values()}
    assert statements == [(sid, held[sid], held[sid]) for sid in sorted(held)]
    assert sum(held.values()) == 567
    assert await count(conn, "SELECT count(*) FROM book_bank_statement WHERE feed_version = 1") == 2
    again = await load_bank_feed(conn, loaded.book_set_id, corrected / "bank_lines.csv", loaded_by="test")
    assert again == 2  # the same feed twice is one version


async def test_a_corrected_feed_whose_statement_does_not_balance_is_refused_and_loads_nothing(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    books = with_statements(default_books, tmp_path)
    loaded = await load_books(conn, books, loaded_by="test")
    before = await counts(conn)
    corrected = tmp_path / "corrected"
    corrected.mkdir()
    shutil.copy(default_books / "corrected" / "bank_lines.csv", corrected / "bank_lines.csv")
    add_statements(corrected / "bank_lines.csv", STATEMENT, "2026-10")
    closing = Decimal(statement_of(corrected, "OPS-2026-10")["closing_balance"])
    change_statement(corrected, "OPS-2026-10", closing_balance=str(closing - Decimal("0.01")))
    with pytest.raises(BooksError) as failure:
        await load_bank_feed(conn, loaded.book_set_id, corrected / "bank_lines.csv", loaded_by="test")
    assert failure.value.source == "bank_statements.csv statement OPS-2026-10"
    assert f"closing {closing - Decimal('0.01')}" in str(failure.value)
    assert await counts(conn) == before


# --- the ledger's transaction currency --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("currency", "currency_amount", "field"),
    [("USD", "", "currency_amount"), ("", "1500.00", "currency")],
)
async def test_a_ledger_line_with_half_its_transaction_currency_is_refused(
    conn: Any, default_books: Path, tmp_path: Path, currency: str, currency_amount: str, field: str
) -> None:
    books = with_statements(default_books, tmp_path)
    path = books / "gl_lines.csv"
    lines = _read(path)
    header = [*lines[0].keys(), "currency", "currency_amount"]
    for line in lines:
        line.update(currency="", currency_amount="")
    lines[6].update(currency=currency, currency_amount=currency_amount)
    _write(path, header, lines)
    with pytest.raises(BooksError) as failure:
        await load_books(conn, books, loaded_by="test")
    assert failure.value.source == "gl_lines.csv line 8"
    assert failure.value.field == field
    assert "currency and currency_amount come together" in str(failure.value)
    assert await counts(conn) == NOTHING
