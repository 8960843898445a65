"""Where the database is: a DATABASE_URL, or an embedded PostgreSQL from the pgserver wheel."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg


@dataclass
class Database:
    """A conninfo for psycopg plus, for the embedded default, the handle that keeps the server running."""

    url: str
    embedded_server: Any | None = None

    def sqlalchemy_url(self) -> str:
        if self.url.startswith("postgresql://"):
            return "postgresql+psycopg://" + self.url.removeprefix("postgresql://")
        if self.url.startswith("postgres://"):
            return "postgresql+psycopg://" + self.url.removeprefix("postgres://")
        return self.url

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url, **kwargs)

    async def connect_async(self, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(self.url, **kwargs)


def start_embedded(data_dir: Path, *, cleanup_mode: str | None = "stop") -> Database:
    """Start (or join) the embedded PostgreSQL whose data lives in `data_dir`."""
    import warnings

    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on servers; not our concern
        warnings.simplefilter("ignore")
        from pgserver import postgres_server

        data_dir.mkdir(parents=True, exist_ok=True)
        server = postgres_server.get_server(data_dir, cleanup_mode=cleanup_mode)
    return Database(url=server.get_uri(), embedded_server=server)


def open_database(database_url: str | None, state_dir: Path) -> Database:
    if database_url:
        return Database(url=database_url)
    return start_embedded(state_dir / "pgdata")


def with_database_name(url: str, name: str) -> str:
    """The same server URL pointing at another database."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
