"""Which books a new close runs on, whichever door starts it (CLI, Slack, any HTTP door).

Books given are loaded; otherwise the latest loaded for the entity and period are reused; otherwise, only when asked,
synthetic ones are generated. Generating them is the composition root's (the engine cannot import `synthetic`), so it
comes in as a callable.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from engine.books import BooksError, LoadedBooks, latest_book_set, load_books, read_manifest
from engine.runs import check_entity_and_period

SynthesizeBooks = Callable[[str, str], Path]  # (entity, period) -> a directory of freshly generated books


class NoBooksLoaded(RuntimeError):
    """`close start` for an entity and period with no books: a typo must not become a close on invented books."""

    def __init__(self, entity: str, period: str) -> None:
        super().__init__(
            f"{entity} {period} has no loaded books: pass --books DIR (from `countersign synth`), "
            "or --synthetic to start on synthetic books seeded from the entity's name"
        )
        self.entity = entity
        self.period = period


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
        return (await load_books(conn, books_dir, loaded_by=loaded_by)).book_set_id
    existing = await latest_book_set(conn, entity, period)
    if existing is not None:
        return existing
    if not synthetic:
        raise NoBooksLoaded(entity, period)
    loaded: LoadedBooks = await load_books(conn, synthesize(entity, period), loaded_by=loaded_by)
    return loaded.book_set_id
