"""countersign.services.loading: which books a new close runs on, and loading a construction set (issue 20)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from countersign.engine.books import BooksError
from countersign.services.errors import NoBooksLoaded
from countersign.services.loading import books_for_close, load_book_set, load_construction
from tests.engine import payment_run_support as support

ENTITY, PERIOD = "ACME-UK", "2026-10"


def _refuse(entity: str, period: str) -> Path:
    raise AssertionError(f"synthesized books for {entity} {period} although books were there")


async def test_books_given_are_loaded_and_their_book_set_returned(conn: Any, default_books: Path) -> None:
    book_set_id = await books_for_close(
        conn, entity=ENTITY, period=PERIOD, books_dir=default_books, synthetic=False, synthesize=_refuse, loaded_by="t"
    )
    assert book_set_id == (await load_book_set(conn, default_books, loaded_by="t")).book_set_id


async def test_books_loaded_before_are_reused_without_synthesizing(conn: Any, default_books: Path) -> None:
    loaded = await load_book_set(conn, default_books, loaded_by="t")
    reused = await books_for_close(
        conn, entity=ENTITY, period=PERIOD, books_dir=None, synthetic=True, synthesize=_refuse, loaded_by="t"
    )
    assert reused == loaded.book_set_id


async def test_no_books_and_no_synthetic_refuses_naming_the_entity_and_period(conn: Any) -> None:
    with pytest.raises(NoBooksLoaded) as refused:
        await books_for_close(
            conn, entity=ENTITY, period=PERIOD, books_dir=None, synthetic=False, synthesize=_refuse, loaded_by="t"
        )
    assert (refused.value.entity, refused.value.period) == (ENTITY, PERIOD)


async def test_synthetic_asks_the_synthesizer_once_and_loads_what_it_wrote(
    conn: Any, default_books: Path, tmp_path: Path
) -> None:
    asked: list[tuple[str, str]] = []

    def synthesize(entity: str, period: str) -> Path:
        asked.append((entity, period))
        return Path(shutil.copytree(default_books, tmp_path / "synthesized"))

    book_set_id = await books_for_close(
        conn, entity=ENTITY, period=PERIOD, books_dir=None, synthetic=True, synthesize=synthesize, loaded_by="t"
    )
    assert asked == [(ENTITY, PERIOD)]
    assert book_set_id == (await load_book_set(conn, default_books, loaded_by="t")).book_set_id


async def test_books_for_another_entity_are_refused(conn: Any, default_books: Path) -> None:
    with pytest.raises(BooksError, match="not ACME-DE"):
        await books_for_close(
            conn,
            entity="ACME-DE",
            period=PERIOD,
            books_dir=default_books,
            synthetic=False,
            synthesize=_refuse,
            loaded_by="t",
        )


async def test_the_same_construction_files_loaded_twice_are_one_set(conn: Any, tmp_path: Path) -> None:
    data_dir = support.generate(tmp_path / "construction")
    first = await load_construction(conn, data_dir, loaded_by="t")
    assert await load_construction(conn, data_dir, loaded_by="t") == first
