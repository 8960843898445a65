"""Real PostgreSQL for every test that touches data.

One server per test session: `COUNTERSIGN_TEST_DATABASE_URL` when set (it needs CREATEDB), otherwise a throwaway
embedded server from the pgserver wheel. The schema is migrated once into a template database; each test gets a
fresh database cloned from it.

Under pytest-xdist (`-n 2`) every worker is a session of its own: its own embedded server under its own basetemp
(a Unix socket in its data folder, no TCP port), or on the shared server its own template, named after the worker.
Roles are the whole server's, so the template is migrated under a server-wide advisory lock: two sessions starting
on a fresh server do not both create them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from countersign.bootstrap import migrate
from countersign.bootstrap.database import Database, start_embedded, with_database_name
from countersign.bootstrap.runtime import Runtime, load_rules_all
from countersign.bootstrap.settings import PROJECT_ROOT, Settings
from tests import support

# The xdist worker ("gw0", "gw1"...; "main" without xdist) and the process: unique among sessions on one server.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
TEMPLATE = f"countersign_template_{WORKER}_{os.getpid()}"
# Held while a session migrates its template, on the server's `postgres` database (advisory locks are per database).
MIGRATION_LOCK = "countersign-tests-migrate-template"


# An xdist worker imports readline, which exports COLUMNS=80 and LINES=24 when its output is no terminal; a console
# made at import (countersign/cli/common.py) then keeps 80 columns whatever COLUMNS a test sets later. Each worker
# starts with the
# terminal variables its controller had, as a serial session does.
TERMINAL_VARIABLES = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller, per worker: hand over its own terminal variables."""
    node.workerinput["countersign_terminal"] = {name: os.environ.get(name) for name in TERMINAL_VARIABLES}


def pytest_configure(config: pytest.Config) -> None:
    terminal = getattr(config, "workerinput", {}).get("countersign_terminal")
    for name, value in (terminal or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("COUNTERSIGN_TEST_DATABASE_URL")
    if url:
        yield url
        return
    database = start_embedded(tmp_path_factory.mktemp("pg") / "data", cleanup_mode="delete")
    yield database.url
    database.embedded_server.cleanup()  # type: ignore[union-attr]


def _admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(with_database_name(url, "postgres"), autocommit=True)


@pytest.fixture(scope="session")
def template_url(pg_server_url: str) -> Iterator[str]:
    url = with_database_name(pg_server_url, TEMPLATE)
    with _admin(pg_server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{TEMPLATE}"')
        # Migration 0002 creates the service roles when missing: serialised, so a second session sees them.
        admin.execute("SELECT pg_advisory_lock(hashtext(%s))", (MIGRATION_LOCK,))
        try:
            migrate.upgrade(Database(url))
        finally:
            admin.execute("SELECT pg_advisory_unlock(hashtext(%s))", (MIGRATION_LOCK,))
    yield url
    with _admin(pg_server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')


@pytest.fixture
def database(pg_server_url: str, template_url: str) -> Iterator[Database]:
    """A fresh, migrated database for one test."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    with _admin(pg_server_url) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    database = Database(with_database_name(pg_server_url, name))
    migrate.harden_database(database)  # a clone starts with PostgreSQL's default database rights; db upgrade's step
    support.CURRENT_DATABASE.append(database.url)
    yield database
    support.CURRENT_DATABASE.remove(database.url)
    with _admin(pg_server_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest_asyncio.fixture
async def conn(database: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    connection = await psycopg.AsyncConnection.connect(database.url, autocommit=True)
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        database_url=None,
        state_dir=tmp_path / "state",
        config_dir=PROJECT_ROOT / "config",
        callback_secret="test-callback-secret",
    )


@pytest.fixture
def runtime(settings: Settings, database: Database) -> Runtime:
    policy, workflows = load_rules_all(settings)
    return Runtime(settings, database, policy, workflows)


@pytest.fixture(scope="session")
def default_books(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default profile's books (seed 42), generated once per session; tests load them into their database."""
    from countersign.synthetic import generate_books, load_profile

    out = tmp_path_factory.mktemp("books") / "ACME-UK-2026-10"
    generate_books(load_profile(PROJECT_ROOT / "config" / "profiles" / "default.yaml"), 42, out)
    return out


@pytest_asyncio.fixture
async def api(runtime: Runtime) -> AsyncIterator[Any]:
    """The FastAPI app through its ASGI interface, lifespan included."""
    import httpx

    from countersign.bootstrap.app import create_app

    app = create_app(runtime)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://countersign.test") as client:
            yield client


@pytest_asyncio.fixture
async def engine_ctx(runtime: Runtime) -> AsyncIterator[Any]:
    """The engine context with the real specialists served over A2A on an in-process ASGI transport."""
    from countersign.bootstrap.runtime import engine_context

    async with engine_context(runtime) as ctx:
        yield ctx


@pytest.fixture
def fake_slack() -> Iterator[Any]:
    """A local fake Slack Web API server with a few users (see tests/fakes/slack_api.py)."""
    from tests.fakes.slack_api import FakeSlack

    fake = FakeSlack().start()
    for user in ("U0DANA", "U0ALICE", "U0BOB", "U0CAROL", "U0MALLORY"):
        fake.add_user(user, team="T01ACME")
    fake.add_user("UBOTTY", team="T01ACME", is_bot=True)
    fake.add_user("U0GONE", team="T01ACME", deleted=True)
    yield fake
    fake.stop()
