"""What every command shares: the consoles, one-line errors and exit 2, settings, the runtime, the close id."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import psycopg
import typer
from rich.console import Console
from rich.markup import escape

from callbacks.callers import UnknownPrincipal
from callbacks.principals import PrincipalFileError
from countersign.database import EmbeddedUnavailable, MissingRoleURL, NoOwnerCredentials
from countersign.migrate import ObjectCreationAllowed, PolicyNotEnforced, SchemaNotAtHead
from countersign.runtime import MissingSpecialistToken, PasswordFileUnreadable, Runtime, boot, connection
from countersign.settings import Settings, SettingsError, load_settings
from countersign.unreachable import DatabaseUnreachable
from engine.books import BooksError
from engine.runs import CloseAlreadyExists, CloseNotFound, InvalidCloseKey, PeriodClosed, latest_close_id
from policy import PolicyError
from services.errors import NoBooksLoaded, ServiceError
from synthetic import ProfileError

console = Console()


err = Console(stderr=True)


T = TypeVar("T")


class ProofRequestError(ValueError):
    pass


USER_ERRORS: tuple[type[BaseException], ...] = (
    ProofRequestError,
    InvalidCloseKey,
    BooksError,
    CloseAlreadyExists,
    CloseNotFound,
    PeriodClosed,
    PolicyError,
    PrincipalFileError,
    ProfileError,
    MissingSpecialistToken,
    UnknownPrincipal,
    DatabaseUnreachable,
    NoBooksLoaded,
    NoOwnerCredentials,
    MissingRoleURL,
    ServiceError,  # the use cases' refusals (services/errors.py): their message is safe to show
)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def run(coro_factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return asyncio.run(coro_factory())
    except USER_ERRORS as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from exc


def settings_or_exit() -> Settings:
    """Every setting, validated; a wrong or missing one is a line naming its variable, then exit 2."""
    try:
        return load_settings()
    except SettingsError as exc:
        for line in exc.lines:
            err.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def runtime(*, upgrade: bool = False, roles: tuple[str, ...] = ()) -> Runtime:
    """Settings, rules and the database. Only `db upgrade` (`upgrade`) and the embedded default migrate; every other
    command refuses, in one line, a schema that is not at this release's head. `roles`: connections it will open."""
    from sqlalchemy.exc import OperationalError

    settings = settings_or_exit()
    try:
        return boot(settings, upgrade=upgrade, roles=roles)
    except STARTUP_ERRORS as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from exc
    except (OperationalError, psycopg.OperationalError) as exc:  # migrating, or reading the schema revision
        role, url = _schema_check_role(settings, upgrade)
        fail(str(DatabaseUnreachable(role, url, exc)))
        raise AssertionError("unreachable") from exc


STARTUP_ERRORS: tuple[type[BaseException], ...] = (
    PolicyError,
    EmbeddedUnavailable,
    SchemaNotAtHead,
    PolicyNotEnforced,
    ObjectCreationAllowed,
    NoOwnerCredentials,
    MissingRoleURL,
    PasswordFileUnreadable,
)


def _schema_check_role(settings: Settings, upgrade: bool) -> tuple[str, str]:
    """The role (and URL) start-up connected as: the owner when it has the URL or migrates, else a service role."""
    if settings.database_url or upgrade:
        return "owner", settings.database_url or "postgresql:///embedded"
    if settings.engine_database_url:
        return "engine", settings.engine_database_url
    return "callbacks", settings.callbacks_database_url or "postgresql:///embedded"


async def resolve_close_id(rt: Runtime, close_id: str | None) -> str:
    if close_id:
        return close_id
    async with connection(rt) as conn:
        latest = await latest_close_id(conn)
    if latest is None:
        raise CloseNotFound("(latest): no close has been started; run `countersign close start`")
    return latest
