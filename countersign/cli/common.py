"""What every command shares: the consoles, one-line errors and exit 2, settings, the runtime, the close id.

Imports here are the start-up cost of every command, `countersign --help` included: typer, rich and the standard
library only. What a command needs beyond that (the runtime, the engine, the database driver) is imported inside the
function that uses it, so a command pays for what it runs and `--help` for nothing (tests/cli/test_cli_start.py).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Coroutine, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from countersign.bootstrap.runtime import Runtime
    from countersign.bootstrap.settings import Settings

# A pipe or a file has no width: rich would cut every table and line at 80 columns for it. There, lines are as wide
# as their content (a script or `less -S` reads them whole); COLUMNS, when set, still wins, and a terminal is measured.
PIPED_WIDTH = 10_000


def output_width(stream: object, environ: Mapping[str, str] = os.environ) -> int | None:
    """The width to render for `stream`: None (rich measures the terminal, or reads COLUMNS) or PIPED_WIDTH."""
    isatty = getattr(stream, "isatty", None)
    if environ.get("COLUMNS", "").isdigit() or (callable(isatty) and isatty()):
        return None
    return PIPED_WIDTH


console = Console(width=output_width(sys.stdout))


err = Console(stderr=True, width=output_width(sys.stderr))


T = TypeVar("T")


class ProofRequestError(ValueError):
    pass


@cache
def user_errors() -> tuple[type[BaseException], ...]:
    """The refusals `run` turns into one line and exit 2; imported when a command runs, not at start."""
    from countersign.bootstrap.database import MissingRoleURL, NoOwnerCredentials
    from countersign.bootstrap.runtime import MissingSpecialistToken
    from countersign.bootstrap.unreachable import DatabaseUnreachable
    from countersign.policy import PolicyError
    from countersign.services.errors import shown_refusals
    from countersign.synthetic import ProfileError

    return (
        ProofRequestError,
        PolicyError,
        ProfileError,
        MissingSpecialistToken,
        DatabaseUnreachable,
        NoOwnerCredentials,
        MissingRoleURL,
        *shown_refusals(),  # the use cases' and the engine's refusals (countersign/services/errors.py)
    )


@cache
def startup_errors() -> tuple[type[BaseException], ...]:
    """The refusals `runtime` turns into one line and exit 2 (rules, the embedded server, the schema, credentials)."""
    from countersign.bootstrap.database import EmbeddedUnavailable, MissingRoleURL, NoOwnerCredentials
    from countersign.bootstrap.migrate import ObjectCreationAllowed, PolicyNotEnforced, SchemaNotAtHead
    from countersign.bootstrap.runtime import PasswordFileUnreadable
    from countersign.policy import PolicyError

    return (
        PolicyError,
        EmbeddedUnavailable,
        SchemaNotAtHead,
        PolicyNotEnforced,
        ObjectCreationAllowed,
        NoOwnerCredentials,
        MissingRoleURL,
        PasswordFileUnreadable,
    )


def write_json(value: object) -> None:
    """A command's `--json` output: one document on stdout, indented, nothing else on stdout."""
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def run(coro_factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    import asyncio

    refusals = user_errors()
    try:
        return asyncio.run(coro_factory())
    except refusals as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from exc


def settings_or_exit() -> Settings:
    """Every setting, validated; a wrong or missing one is a line naming its variable, then exit 2."""
    from countersign.bootstrap.settings import SettingsError, load_settings

    try:
        return load_settings()
    except SettingsError as exc:
        for line in exc.lines:
            err.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def runtime(*, upgrade: bool = False, roles: tuple[str, ...] = ()) -> Runtime:
    """Settings, rules and the database. Only `db upgrade` (`upgrade`) and the embedded default migrate; every other
    command refuses, in one line, a schema that is not at this release's head. `roles`: connections it will open."""
    import psycopg
    from sqlalchemy.exc import OperationalError

    from countersign.bootstrap.runtime import boot
    from countersign.bootstrap.unreachable import DatabaseUnreachable

    settings = settings_or_exit()
    refusals = startup_errors()
    try:
        return boot(settings, upgrade=upgrade, roles=roles)
    except refusals as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from exc
    except (OperationalError, psycopg.OperationalError) as exc:  # migrating, or reading the schema revision
        role, url = _schema_check_role(settings, upgrade)
        fail(str(DatabaseUnreachable(role, url, exc)))
        raise AssertionError("unreachable") from exc


def _schema_check_role(settings: Settings, upgrade: bool) -> tuple[str, str]:
    """The role (and URL) start-up connected as: the owner when it has the URL or migrates, else a service role."""
    if settings.database_url or upgrade:
        return "owner", settings.database_url or "postgresql:///embedded"
    if settings.engine_database_url:
        return "engine", settings.engine_database_url
    return "callbacks", settings.callbacks_database_url or "postgresql:///embedded"


async def resolve_close_id(rt: Runtime, close_id: str | None) -> str:
    from countersign.bootstrap.runtime import connection
    from countersign.services.errors import NoCloseStarted, ServiceError
    from countersign.services.operating import latest_close_or_named

    async with connection(rt) as conn:
        try:
            return await latest_close_or_named(conn, close_id)
        except NoCloseStarted:
            raise ServiceError("no close has been started; run `countersign close start`") from None


class LazyNames:
    """Names a command module takes from heavy modules, imported into the module on first use instead of at start.

    A command calls `bind()` before it uses them; the module sets `__getattr__ = names.attribute` (PEP 562) so that
    `module.name` answers as if imported at the top (a test comparing or replacing it). A name already bound, such
    as a test's stand-in, is kept. Declare the same names under `if TYPE_CHECKING:` for the type checker.
    """

    def __init__(self, namespace: dict[str, Any], sources: Mapping[str, tuple[str, ...]]) -> None:
        self._namespace = namespace
        self._owner = {name: module for module, names in sources.items() for name in names}

    def bind(self) -> None:
        for name, module in self._owner.items():
            if name not in self._namespace:
                self._namespace[name] = getattr(importlib.import_module(module), name)

    def attribute(self, name: str) -> Any:
        if name not in self._owner:
            raise AttributeError(f"module {self._namespace['__name__']!r} has no attribute {name!r}")
        self.bind()
        return self._namespace[name]
