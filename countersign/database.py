"""Where the database is: a DATABASE_URL, or an embedded PostgreSQL from the pgserver wheel."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"


def with_user(url: str, user: str) -> str:
    """The same server and database, connecting as another role (no password: embedded trust auth)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{user}@{host}", parts.path, parts.query, parts.fragment))


@dataclass
class Database:
    """Where PostgreSQL is, and as whom each part of Countersign connects.

    `url` is the owner: it runs migrations and imports principals. The engine and the callbacks service connect as
    their own roles (migration 0002), which own nothing and hold only the grants their job needs.
    """

    url: str
    embedded_server: Any | None = None
    engine_url_override: str | None = None
    callbacks_url_override: str | None = None

    @property
    def engine_url(self) -> str:
        return self.engine_url_override or with_user(self.url, ENGINE_ROLE)

    @property
    def callbacks_url(self) -> str:
        return self.callbacks_url_override or with_user(self.url, CALLBACKS_ROLE)

    def url_for(self, role: str) -> str:
        return {"owner": self.url, "engine": self.engine_url, "callbacks": self.callbacks_url}[role]

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


def open_database(
    database_url: str | None,
    state_dir: Path,
    *,
    engine_url: str | None = None,
    callbacks_url: str | None = None,
) -> Database:
    database = Database(url=database_url) if database_url else start_embedded(state_dir / "pgdata")
    database.engine_url_override = engine_url
    database.callbacks_url_override = callbacks_url
    return database


def with_database_name(url: str, name: str) -> str:
    """The same server URL pointing at another database."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
