"""Schema migrations: Alembic, driven from code. Only the owner migrates (`countersign db upgrade`, or the embedded
default, which is its own owner); every other process checks the schema is at this release's head and refuses to
start otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from psycopg import AsyncConnection, sql

import migrations

from .database import Database

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent
UNREADABLE_REVISION = "a revision before 0010"  # service roles may read alembic_version from 0010 on


def alembic_config(database: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database.sqlalchemy_url().replace("%", "%%"))
    return config


def upgrade(database: Database) -> None:
    """Apply every pending migration as the owner."""
    command.upgrade(alembic_config(database), "head")


def head_revision() -> str:
    """The newest revision in migrations/versions: what `db upgrade` brings a database to."""
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None, "migrations/versions has no head revision"
    return str(head)


def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at; None before the first migration.

    Any role may ask: the service roles read alembic_version from revision 0010 on; before that they cannot, and the
    answer is UNREADABLE_REVISION. Connection errors (psycopg.OperationalError) reach the caller unchanged.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return None
        try:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except psycopg.errors.InsufficientPrivilege:
            return UNREADABLE_REVISION
        return str(row[0]) if row else None


class SchemaNotAtHead(RuntimeError):
    """The database's schema is not the one this release needs; only `countersign db upgrade` moves it."""

    def __init__(self, current: str | None, head: str) -> None:
        self.current = current
        self.head = head
        super().__init__(
            f"database schema is at {current or 'no revision (never migrated)'}, this release needs {head}: "
            "run `countersign db upgrade`"
        )


def require_head(url: str) -> None:
    """Raise SchemaNotAtHead unless the database at `url` is at this release's head revision."""
    current, head = current_revision(url), head_revision()
    if current != head:
        raise SchemaNotAtHead(current, head)


def set_role_passwords(database: Database, passwords: Mapping[str, str]) -> list[str]:
    """Set each service role's password (as the owner); returns the roles changed.

    The password is hashed on this side (libpq's PQencryptPasswordConn, with the server's `password_encryption`,
    e.g. SCRAM-SHA-256) and sent as a literal (psycopg's sql.Literal), so the plain text reaches neither the server's
    statement log nor ours.
    """
    changed = []
    with database.connect(autocommit=True) as conn:
        for role, password in passwords.items():
            verifier = _encrypted(conn, password, role)
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(verifier)))
            changed.append(role)
    return changed


def _encrypted(conn: psycopg.Connection[Any], password: str, role: str) -> str:
    return conn.pgconn.encrypt_password(password.encode(), role.encode()).decode()


async def schema_revision(conn: AsyncConnection[Any]) -> str | None:
    """The revision the database's schema is at (alembic_version), or None before the first migration.

    Service roles may read it from revision 0010 on; before that the table is the owner's, and the schema is behind.
    """
    async with conn.cursor() as cur:
        await cur.execute("SELECT to_regclass('alembic_version') IS NOT NULL")
        exists = await cur.fetchone()
        if not exists or not exists[0]:
            return None
        try:
            await cur.execute("SELECT version_num FROM alembic_version")
        except psycopg.errors.InsufficientPrivilege:
            return "an older revision (before 0010)"
        row = await cur.fetchone()
    return str(row[0]) if row else None


async def ping(conn: AsyncConnection[Any]) -> None:
    """Ask the database one trivial question: it answers, as this connection's role."""
    await conn.execute("SELECT 1")
