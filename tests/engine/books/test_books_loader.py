"""Loading books: everything or nothing, and a bad file names the file, the line and the field."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from countersign.engine.books import BooksError, load_books
from tests.support import count


def _copy_books(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "books"
    shutil.copytree(src, dst)
    return dst


async def test_books_load_once_and_a_second_load_is_a_no_op(conn: Any, default_books: Path) -> None:
    first = await load_books(conn, default_books, loaded_by="test")
    second = await load_books(conn, default_books, loaded_by="test")
    assert first.book_set_id == second.book_set_id
    assert first.gl_lines == 2000
    assert await count(conn, "SELECT count(*) FROM book_gl_line") == 2000
    assert await count(conn, "SELECT count(*) FROM book_bank_line WHERE account = '1000'") == 17


@pytest.mark.parametrize(
    ("file", "mutate", "where", "field"),
    [
        (
            "gl_lines.csv",
            lambda rows: [*rows[:5], rows[5].replace(rows[5].split(",")[4], "12.3.4", 1), *rows[6:]],
            "gl_lines.csv line 6",
            "amount",
        ),
        (
            "bank_lines.csv",
            lambda rows: [*rows[:3], rows[3].replace(rows[3].split(",")[2], "2026-13-01", 1), *rows[4:]],
            "bank_lines.csv line 4",
            "date",
        ),
        ("accounts.csv", lambda rows: ["acct,name,type,subtype", *rows[1:]], "accounts.csv", "(header)"),
    ],
)
async def test_a_bad_value_names_file_line_and_field_and_loads_nothing(
    conn: Any, default_books: Path, tmp_path: Path, file: str, mutate: Any, where: str, field: str
) -> None:
    books = _copy_books(default_books, tmp_path)
    rows = (books / file).read_text().splitlines()
    (books / file).write_text("\n".join(mutate(rows)) + "\n")
    with pytest.raises(BooksError) as failure:
        await load_books(conn, books, loaded_by="test")
    assert failure.value.source == where
    assert failure.value.field == field
    for table in ("book_set", "book_account", "book_gl_line", "book_bank_line", "trace_event"):
        assert await count(conn, f"SELECT count(*) FROM {table}") == 0


async def test_an_unbalanced_source_journal_is_refused(conn: Any, default_books: Path, tmp_path: Path) -> None:
    books = _copy_books(default_books, tmp_path)
    path = books / "gl_lines.csv"
    rows = path.read_text().splitlines()
    fields = rows[1].split(",")
    fields[4] = str(Decimal(fields[4]) + 1)
    rows[1] = ",".join(fields)
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(BooksError, match="does not balance"):
        await load_books(conn, books, loaded_by="test")
    assert await count(conn, "SELECT count(*) FROM book_set") == 0


async def test_loaded_books_are_immutable(conn: Any, default_books: Path) -> None:
    await load_books(conn, default_books, loaded_by="test")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="immutable"):
        await conn.execute("UPDATE book_bank_line SET amount = 0")
