"""Loading what a close runs on, whichever door asks: a books directory, or a construction data directory.

Books given are loaded; otherwise the latest loaded for the entity and period are reused; otherwise, only when asked,
synthetic ones are generated. Generating them needs the settings (the profile, the state directory), which are the
composition root's, so it comes in as a callable.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.books import BooksError, LoadedBooks, latest_book_set, load_books, read_manifest
from countersign.engine.construction import load_construction_files, load_construction_set
from countersign.engine.runs import check_entity_and_period
from countersign.services.construction_input import ConstructionInput
from countersign.services.errors import NoBooksLoaded

SynthesizeBooks = Callable[[str, str], Path]  # (entity, period) -> a directory of freshly generated books


async def load_book_set(conn: AsyncConnection[Any], books_dir: Path, *, loaded_by: str) -> LoadedBooks:
    """Load a books directory (from `countersign synth`); the same files loaded again return the same book set."""
    return await load_books(conn, books_dir, loaded_by=loaded_by)


async def load_construction(conn: AsyncConnection[Any], data_dir: Path, *, loaded_by: str) -> int:
    """Load a construction data directory (contracts and certificates); returns the construction set id."""
    return await load_construction_set(conn, data_dir, loaded_by=loaded_by)


async def load_construction_input(
    conn: AsyncConnection[Any], construction: ConstructionInput, *, loaded_by: str
) -> int:
    """Load what `countersign.services.construction_input.read_construction_input` read (a directory, or pay
    applications with
    their contracts) as one construction set; the same contents loaded again return the same set id."""
    return await load_construction_files(
        conn,
        construction.contracts_raw,
        construction.certificates_raw,
        source=construction.source,
        loaded_by=loaded_by,
    )


async def books_for_close(
    conn: AsyncConnection[Any],
    *,
    entity: str,
    period: str,
    books_dir: Path | None,
    synthetic: bool,
    synthesize: SynthesizeBooks,
    loaded_by: str,
) -> int:
    """The book set a close of `entity` `period` starts on: `books_dir` loaded, the latest loaded, or (`synthetic`)
    books `synthesize` generates, loaded. Neither books nor `synthetic` raises NoBooksLoaded."""
    check_entity_and_period(entity, period)
    if books_dir is not None:
        manifest = read_manifest(books_dir)
        if (manifest["entity"], manifest["period"]) != (entity, period):
            raise BooksError(
                "entity.json",
                "entity/period",
                f"books are for {manifest['entity']} {manifest['period']}, not {entity} {period}",
            )
        return (await load_book_set(conn, books_dir, loaded_by=loaded_by)).book_set_id
    existing = await latest_book_set(conn, entity, period)
    if existing is not None:
        return existing
    if not synthetic:
        raise NoBooksLoaded(entity, period)
    loaded = await load_book_set(conn, synthesize(entity, period), loaded_by=loaded_by)
    return loaded.book_set_id
