"""Only `countersign db upgrade` migrates; service processes hold no owner credentials and refuse, in one line, a
schema that is not at this release's head; role passwords come from configuration."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from countersign.bootstrap import migrate
from countersign.bootstrap.database import (
    CALLBACKS_ROLE,
    ENGINE_ROLE,
    Database,
    MissingRoleURL,
    NoOwnerCredentials,
    with_user,
)
from countersign.bootstrap.runtime import PasswordFileUnreadable, role_passwords
from countersign.bootstrap.settings import SettingsError, default_config_dir, load_settings
from countersign.cli.main import app


def _invoke(*args: str, env: dict[str, str | None]) -> Any:
    unset: dict[str, str | None] = {"DATABASE_URL": None, "COUNTERSIGN_CALLBACKS_DATABASE_URL": None}
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300", **unset, **env})


@pytest.mark.parametrize("command", [("worker", "--once"), ("serve", "--port", "9")])
def test_a_service_refuses_a_schema_behind_head_in_one_line(
    database: Database, tmp_path: Path, command: tuple[str, ...]
) -> None:
    with psycopg.connect(database.owner_url, autocommit=True) as owner:
        owner.execute("UPDATE alembic_version SET version_num = '0009'")  # as if the release were newer
    env: dict[str, str | None] = {
        "COUNTERSIGN_ENGINE_DATABASE_URL": with_user(database.owner_url, ENGINE_ROLE),
        "COUNTERSIGN_CALLBACKS_DATABASE_URL": with_user(database.owner_url, CALLBACKS_ROLE),
        "COUNTERSIGN_STATE_DIR": str(tmp_path),
        "COUNTERSIGN_CALLBACK_SECRET": "secret",
    }
    done = _invoke(*command, env=env)
    assert done.exit_code == 2, done.output
    assert done.output.splitlines() == [
        f"error: database schema is at 0009, this release needs {migrate.head_revision()}: run `countersign db upgrade`"
    ]
    assert migrate.current_revision(database.owner_url) == "0009"  # nobody migrated it


def _service_env(database: Database, tmp_path: Path, **extra: str) -> dict[str, str | None]:
    return {
        "COUNTERSIGN_ENGINE_DATABASE_URL": with_user(database.owner_url, ENGINE_ROLE),
        "COUNTERSIGN_CALLBACKS_DATABASE_URL": with_user(database.owner_url, CALLBACKS_ROLE),
        "COUNTERSIGN_STATE_DIR": str(tmp_path),
        **extra,
    }


def test_a_service_refuses_a_policy_the_database_does_not_enforce_until_db_upgrade(
    database: Database, tmp_path: Path
) -> None:
    """A changed risk.yaml takes effect only through the owner's `db upgrade`: until then no service starts on it."""
    config = tmp_path / "config"
    shutil.copytree(default_config_dir(), config)
    risk = config / "risk.yaml"
    risk.write_text(risk.read_text().replace("quorum: 2, approver_role: cfo", "quorum: 1, approver_role: cfo"))
    env = _service_env(database, tmp_path, COUNTERSIGN_CONFIG_DIR=str(config))
    done = _invoke("worker", "--once", env=env)
    assert done.exit_code == 2, done.output
    (line,) = done.output.splitlines()
    assert line.startswith("error: the database enforces policy ") and "run `countersign db upgrade`" in line
    upgraded = _invoke("db", "upgrade", env={**env, "DATABASE_URL": database.owner_url})
    assert upgraded.exit_code == 0, upgraded.output
    with psycopg.connect(database.owner_url) as owner:
        assert owner.execute("SELECT quorum FROM policy_tier WHERE name = 'critical'").fetchone() == (1,)
    assert _invoke("worker", "--once", env=env).exit_code == 0


def test_a_service_refuses_a_database_where_its_role_could_create_objects(database: Database, tmp_path: Path) -> None:
    with psycopg.connect(database.owner_url, autocommit=True) as owner:
        name = owner.execute("SELECT quote_ident(current_database())").fetchone()
        assert name is not None
        owner.execute(f"GRANT TEMPORARY ON DATABASE {name[0]} TO PUBLIC")  # a clone or a restore's defaults
    env = _service_env(database, tmp_path)
    done = _invoke("worker", "--once", env=env)
    assert done.exit_code == 2, done.output
    (line,) = done.output.splitlines()
    assert line.startswith("error: role countersign_callbacks may create temporary tables in this database")
    assert _invoke("db", "upgrade", env={**env, "DATABASE_URL": database.owner_url}).exit_code == 0
    assert _invoke("worker", "--once", env=env).exit_code == 0


def test_a_service_starts_on_its_role_url_alone(database: Database, tmp_path: Path) -> None:
    env: dict[str, str | None] = {
        "COUNTERSIGN_ENGINE_DATABASE_URL": with_user(database.owner_url, ENGINE_ROLE),
        "COUNTERSIGN_STATE_DIR": str(tmp_path),
    }
    done = _invoke("worker", "--once", env=env)
    assert done.exit_code == 0, done.output


def test_db_upgrade_needs_the_owner(database: Database, tmp_path: Path) -> None:
    env: dict[str, str | None] = {
        "COUNTERSIGN_ENGINE_DATABASE_URL": with_user(database.owner_url, ENGINE_ROLE),
        "COUNTERSIGN_STATE_DIR": str(tmp_path),
    }
    done = _invoke("db", "upgrade", env=env)
    assert done.exit_code == 2
    (line,) = done.output.splitlines()
    assert line.startswith("error: this process holds no owner credentials (DATABASE_URL is unset)")


def test_db_upgrade_sets_the_service_roles_passwords(database: Database, tmp_path: Path) -> None:
    password_file = tmp_path / "callbacks.pw"
    password_file.write_text("callbacks-pass'word\n")  # a quote: passed as a literal, never spliced into SQL
    env: dict[str, str | None] = {
        "DATABASE_URL": database.owner_url,
        "COUNTERSIGN_ENGINE_DB_PASSWORD": "engine-pass",
        "COUNTERSIGN_CALLBACKS_DB_PASSWORD_FILE": str(password_file),
        "COUNTERSIGN_STATE_DIR": str(tmp_path),
    }
    try:
        done = _invoke("db", "upgrade", env=env)
        assert done.exit_code == 0, done.output
        with psycopg.connect(database.owner_url) as owner:
            stored = dict(
                owner.execute(
                    "SELECT rolname, rolpassword FROM pg_authid WHERE rolname = ANY(%s)",
                    ([ENGINE_ROLE, CALLBACKS_ROLE],),
                ).fetchall()
            )
    finally:  # roles are the whole server's: leave them as the other tests expect
        with psycopg.connect(database.owner_url, autocommit=True) as owner:
            for role in (ENGINE_ROLE, CALLBACKS_ROLE):
                owner.execute(f"ALTER ROLE {role} PASSWORD NULL")
    assert "engine-pass" not in done.output and "pass'word" not in done.output
    assert all(value and value.startswith("SCRAM-SHA-256$") for value in stored.values()), stored
    # The server holds only verifiers, never the plain text.
    assert not any("engine-pass" in value or "pass'word" in value for value in stored.values())


def test_role_passwords_come_from_the_variable_or_its_file(tmp_path: Path) -> None:
    secret = tmp_path / "engine.pw"
    secret.write_text("from-a-secret\n")
    settings = load_settings(
        {"COUNTERSIGN_ENGINE_DB_PASSWORD_FILE": str(secret), "COUNTERSIGN_CALLBACKS_DB_PASSWORD": "x"}
    )
    assert role_passwords(settings) == {ENGINE_ROLE: "from-a-secret", CALLBACKS_ROLE: "x"}
    missing = load_settings({"COUNTERSIGN_ENGINE_DB_PASSWORD_FILE": str(tmp_path / "nope")})
    with pytest.raises(PasswordFileUnreadable, match="COUNTERSIGN_ENGINE_DB_PASSWORD_FILE"):
        role_passwords(missing)
    with pytest.raises(SettingsError) as both:
        load_settings({"COUNTERSIGN_ENGINE_DB_PASSWORD_FILE": str(secret), "COUNTERSIGN_ENGINE_DB_PASSWORD": "y"})
    assert both.value.lines[0].startswith("COUNTERSIGN_ENGINE_DB_PASSWORD_FILE: set together with")


def test_with_user_carries_the_roles_password_never_the_owners() -> None:
    owner = "postgresql://owner:owner-secret@db.internal:6543/close?sslmode=require"
    engine = with_user(owner, ENGINE_ROLE, "p@ss/w:rd")
    assert engine == "postgresql://countersign_engine:p%40ss%2Fw%3Ard@db.internal:6543/close?sslmode=require"
    assert psycopg.conninfo.conninfo_to_dict(engine)["password"] == "p@ss/w:rd"
    assert "owner-secret" not in with_user(owner, ENGINE_ROLE)
    database = Database(owner, role_passwords={ENGINE_ROLE: "e"})
    assert database.engine_url.startswith("postgresql://countersign_engine:e@db.internal:6543/")


def test_a_service_database_holds_no_owner() -> None:
    service = Database(None, engine_url_override="postgresql://countersign_engine:e@db/close")
    with pytest.raises(NoOwnerCredentials):
        service.url_for("owner")
    with pytest.raises(MissingRoleURL, match="COUNTERSIGN_CALLBACKS_DATABASE_URL"):
        service.url_for("callbacks")
    assert service.url_for("engine") == "postgresql://countersign_engine:e@db/close"
