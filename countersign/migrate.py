"""Schema migrations: Alembic, driven from code so every command can upgrade before it runs."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations

from .database import Database

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent


def alembic_config(database: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database.sqlalchemy_url().replace("%", "%%"))
    return config


def upgrade(database: Database) -> None:
    command.upgrade(alembic_config(database), "head")


def current_revision(database: Database) -> str | None:
    with database.connect() as conn:
        exists = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return str(row[0]) if row else None
