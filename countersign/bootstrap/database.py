"""Where the database is: a DATABASE_URL, or an embedded PostgreSQL from the pgserver wheel."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"


def with_user(url: str, user: str, password: str | None = None) -> str:
    """The same server and database, connecting as another role, with that role's password when given.

    The URL's own credentials (the owner's) are never carried over. Without `password` the role must be trusted by
    the server (the embedded default). Deployments give each service its role's full URL instead
    (COUNTERSIGN_ENGINE_DATABASE_URL, COUNTERSIGN_CALLBACKS_DATABASE_URL); see the README's Deploy section.
    """
    from urllib.parse import quote, urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    credentials = quote(user, safe="") + (f":{quote(password, safe='')}" if password is not None else "")
    return urlunsplit((parts.scheme, f"{credentials}@{host}", parts.path, parts.query, parts.fragment))


class NoOwnerCredentials(RuntimeError):
    """A service process (serve, worker) was asked for the owner's connection, which it does not hold."""

    def __init__(self) -> None:
        super().__init__(
            "this process holds no owner credentials (DATABASE_URL is unset): run migrations and principal imports "
            "where the owner's URL is configured (`countersign db upgrade`, the compose file's migrate service)"
        )


class MissingRoleURL(RuntimeError):
    """A service process without DATABASE_URL needs its role's own URL."""

    def __init__(self, variable: str) -> None:
        super().__init__(f"{variable} is not set: without DATABASE_URL each role connects with its own URL")
        self.variable = variable


@dataclass
class Database:
    """Where PostgreSQL is, and as whom each part of Countersign connects.

    `url` is the owner: it runs migrations and imports principals. A service process (`serve`, `worker`) holds no
    owner credentials: its `url` is None and it connects only with its roles' URLs. The engine and the callbacks
    service connect as their own roles (migration 0002), which own nothing and hold only the grants their job needs.
    Without an explicit role URL, a role's URL is the owner's server with the role's name and `role_passwords`.
    """

    url: str | None
    embedded_server: Any | None = None
    engine_url_override: str | None = None
    callbacks_url_override: str | None = None
    role_passwords: dict[str, str] = field(default_factory=dict)

    @property
    def owner_url(self) -> str:
        if self.url is None:
            raise NoOwnerCredentials()
        return self.url

    @property
    def engine_url(self) -> str:
        return self._role_url(ENGINE_ROLE, self.engine_url_override, "COUNTERSIGN_ENGINE_DATABASE_URL")

    @property
    def callbacks_url(self) -> str:
        return self._role_url(CALLBACKS_ROLE, self.callbacks_url_override, "COUNTERSIGN_CALLBACKS_DATABASE_URL")

    def _role_url(self, role: str, override: str | None, variable: str) -> str:
        if override:
            return override
        if self.url is None:
            raise MissingRoleURL(variable)
        return with_user(self.url, role, self.role_passwords.get(role))

    def url_for(self, role: str) -> str:
        if role == "owner":
            return self.owner_url
        if role == "engine":
            return self.engine_url
        if role == "callbacks":
            return self.callbacks_url
        raise KeyError(role)

    def schema_check_url(self) -> str:
        """A URL to read the schema revision with: the owner's, else a role's (revision 0010 lets them read it)."""
        return self.url or self.engine_url_override or self.callbacks_url

    def sqlalchemy_url(self) -> str:
        url = self.owner_url
        if url.startswith("postgresql://"):
            return "postgresql+psycopg://" + url.removeprefix("postgresql://")
        if url.startswith("postgres://"):
            return "postgresql+psycopg://" + url.removeprefix("postgres://")
        return url

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(self.owner_url, **kwargs)

    async def connect_async(self, **kwargs: Any) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(self.owner_url, **kwargs)


class EmbeddedUnavailable(RuntimeError):
    """No DATABASE_URL and no embedded PostgreSQL: production images leave the `embedded` extra out."""

    def __init__(self) -> None:
        super().__init__(
            "no database: set DATABASE_URL (and the COUNTERSIGN_*_DATABASE_URL role URLs) "
            "or install the embedded PostgreSQL: pip install 'countersign-close[embedded]'"
        )


def start_embedded(data_dir: Path, *, cleanup_mode: str | None = "stop") -> Database:
    """Start (or join) the embedded PostgreSQL whose data lives in `data_dir` (the optional `embedded` extra)."""
    import warnings

    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on servers; not our concern
        warnings.simplefilter("ignore")
        try:
            from pgserver import postgres_server
        except ImportError:
            raise EmbeddedUnavailable() from None

        data_dir.mkdir(parents=True, exist_ok=True)
        server = postgres_server.get_server(data_dir, cleanup_mode=cleanup_mode)
    return Database(url=server.get_uri(), embedded_server=server)


def open_database(
    database_url: str | None,
    state_dir: Path,
    *,
    engine_url: str | None = None,
    callbacks_url: str | None = None,
    role_passwords: dict[str, str] | None = None,
) -> Database:
    """The owner's database (DATABASE_URL); else, given role URLs, a service's (no owner); else the embedded one."""
    if database_url:
        database = Database(url=database_url)
    elif engine_url or callbacks_url:
        database = Database(url=None)
    else:
        database = start_embedded(state_dir / "pgdata")
    database.engine_url_override = engine_url
    database.callbacks_url_override = callbacks_url
    database.role_passwords = dict(role_passwords or {})
    return database


def with_database_name(url: str, name: str) -> str:
    """The same server URL pointing at another database."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
