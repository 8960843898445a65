"""What refuses to start a close: an entity and period with no books, and no synthetic ones asked for.

Choosing and loading the books is a use case every door shares (`services.loading.books_for_close`); the error stays
in the engine so the chat adapters, which may not import the services' loading, can name it.
"""

from __future__ import annotations


class NoBooksLoaded(RuntimeError):
    """`close start` for an entity and period with no books: a typo must not become a close on invented books."""

    def __init__(self, entity: str, period: str) -> None:
        super().__init__(
            f"{entity} {period} has no loaded books: pass --books DIR (from `countersign synth`), "
            "or --synthetic to start on synthetic books seeded from the entity's name"
        )
        self.entity = entity
        self.period = period
