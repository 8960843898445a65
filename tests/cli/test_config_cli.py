"""The CLI's edge: settings checked at start, `config check`, an unreachable database, `close start` without books."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from typer.testing import CliRunner

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.cli.main import app

SECRET_ENV = {
    "SLACK_BOT_TOKEN": "xoxb-0123456789-abcdefWXYZ",
    "SLACK_SIGNING_SECRET": "signing-secret-0123456789",
    "COUNTERSIGN_CALLBACK_SECRET": "callback-secret-0123456789",
    "DATABASE_URL": "postgresql://owner:hunter2@db.internal:6543/close",
}


def _invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    environment: dict[str, str | None] = {"COLUMNS": "200", **(env or {})}
    return CliRunner().invoke(app, list(args), env=environment)


def test_config_check_prints_every_variable_redacted_and_its_source() -> None:
    done = _invoke("config", "check", env=SECRET_ENV)
    assert done.exit_code == 0, done.output
    lines = {line.split("│")[1].strip(): line for line in done.output.splitlines() if line.count("│") == 4}
    assert "***WXYZ" in lines["SLACK_BOT_TOKEN"] and "env" in lines["SLACK_BOT_TOKEN"]
    assert "postgresql://owner:***@db.internal:6543/close" in lines["DATABASE_URL"]
    assert "default" in lines["TEAMS_APP_TYPE"] and "MultiTenant" in lines["TEAMS_APP_TYPE"]
    for secret in ("0123456789-abcdef", "hunter2", "signing-secret", "callback-secret"):
        assert secret not in done.output
    assert "configuration valid" in done.output


def test_config_check_exits_2_with_one_line_per_error() -> None:
    done = _invoke("config", "check", env={"COUNTERSIGN_OPENAPI": "maybe", "SLACK_BOT_TOKEN": "xoxb-abc"})
    assert done.exit_code == 2
    errors = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: COUNTERSIGN_OPENAPI: not a boolean: use 1/0, true/false, yes/no ('maybe')",
    ]
    assert "COUNTERSIGN_OPENAPI" in done.output and "│" in done.output  # the table is still printed


def test_any_command_stops_at_start_on_a_wrong_setting(tmp_path: Path) -> None:
    done = _invoke("synth", "--out", str(tmp_path / "books"), env={"TEAMS_APP_TYPE": "Single"})
    assert done.exit_code == 2
    assert done.output.startswith("error: TEAMS_APP_TYPE: must be 'MultiTenant', 'SingleTenant' or")
    assert not (tmp_path / "books").exists()


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_database_is_one_line_naming_host_port_and_role(tmp_path: Path) -> None:
    port = _closed_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://owner:hunter2@127.0.0.1:{port}/close",
        "COUNTERSIGN_STATE_DIR": str(tmp_path),
        "COUNTERSIGN_CONFIG_DIR": str(PROJECT_ROOT / "config"),
        "COLUMNS": "80",
    }
    done = subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", "close", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the database at 127.0.0.1:{port} (database close, role owner, from")
    assert "DATABASE_URL" in line and "hunter2" not in line


def test_an_unreachable_engine_role_names_its_own_variable(database: Any, tmp_path: Path) -> None:
    port = _closed_port()
    env = {
        "DATABASE_URL": database.url,
        "COUNTERSIGN_ENGINE_DATABASE_URL": f"postgresql://countersign_engine@127.0.0.1:{port}/x",
        "COUNTERSIGN_STATE_DIR": str(tmp_path),
    }
    done = _invoke("close", "status", env=env)
    assert done.exit_code == 2
    assert f"127.0.0.1:{port}" in done.output and "from COUNTERSIGN_ENGINE_DATABASE_URL" in done.output
    assert "role countersign_engine" in done.output


def test_close_start_without_books_refuses_unless_synthetic(database: Any, tmp_path: Path) -> None:
    env = {"DATABASE_URL": database.url, "COUNTERSIGN_STATE_DIR": str(tmp_path)}
    typo = _invoke("close", "start", "--entity", "NEWC0", "--period", "2026-10", env=env)
    assert typo.exit_code == 2
    (line,) = typo.output.splitlines()
    assert line.startswith("error: NEWC0 2026-10 has no loaded books") and "--synthetic" in line
    with psycopg.connect(database.url) as conn:
        assert conn.execute("SELECT count(*) FROM book_set").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM close_run").fetchone() == (0,)
    started = _invoke(
        "close",
        "start",
        "--entity",
        "NEWCO",
        "--period",
        "2026-10",
        "--synthetic",
        env=env,
    )
    assert started.exit_code == 0, started.output
    assert "started close" in started.output
    # Books are loaded now: a second close for the same entity and period would reuse them without the flag.
    with psycopg.connect(database.url) as conn:
        assert conn.execute("SELECT entity FROM book_set").fetchall() == [("NEWCO",)]


def test_the_board_url_must_be_a_secure_origin_and_the_locale_a_real_one() -> None:
    refused = {
        "http://close.example.com": "must be https",
        "ftp://close.example.com": "not an http(s) URL",
        "https://close.example.com/board": "without a path",
        "http://127.0.0.1:8000": "http only for localhost",
        "https://10.0.0.5": "not an IP address",
    }
    for url, words in refused.items():
        done = _invoke("config", "check", env={"COUNTERSIGN_BOARD_URL": url})
        assert done.exit_code == 2 and "error: COUNTERSIGN_BOARD_URL: " in done.output and words in done.output, url
    for url in ("https://close.example.com", "http://localhost:8000"):
        assert _invoke("config", "check", env={"COUNTERSIGN_BOARD_URL": url}).exit_code == 0, url
    done = _invoke("config", "check", env={"COUNTERSIGN_LOCALE": "xx_YY"})
    assert done.exit_code == 2 and "error: COUNTERSIGN_LOCALE: unknown locale 'xx_YY'" in done.output
    assert _invoke("config", "check", env={"COUNTERSIGN_LOCALE": "de_CH"}).exit_code == 0


def _unusable_inputs(tmp_path: Path) -> dict[str, tuple[dict[str, str], str]]:
    """The two inputs that gave tracebacks (issue 24), and the one line each must give instead."""
    afile = tmp_path / "a-file"
    afile.write_text("")
    return {
        "non-numeric port": (
            {"DATABASE_URL": "postgresql://owner:hunter2@localhost:abc/close"},
            "error: DATABASE_URL: the port after the host must be a number from 1 to 65535",
        ),
        "state dir under a file": (
            {"COUNTERSIGN_STATE_DIR": str(afile / "state")},
            f"error: COUNTERSIGN_STATE_DIR: {afile / 'state'} cannot be created: {afile} is a file, not a directory",
        ),
    }


def test_a_non_numeric_port_or_an_unusable_state_dir_is_one_line_from_every_command(tmp_path: Path) -> None:
    for case, (bad, line) in _unusable_inputs(tmp_path).items():
        for command in (["config", "check"], ["close", "status"], ["synth", "--out", str(tmp_path / "books")]):
            done = _invoke(*command, env={"COUNTERSIGN_STATE_DIR": str(tmp_path / "state"), **bad})
            where = f"{case}: countersign {' '.join(command)}"
            errors = [text for text in done.output.splitlines() if text.startswith("error:")]
            assert done.exit_code == 2 and isinstance(done.exception, SystemExit), f"{where}: {done.output}"
            assert len(errors) == 1 and errors[0].startswith(line), f"{where}: {errors}"
            assert "configuration valid" not in done.output and "hunter2" not in done.output, where
    assert not (tmp_path / "state").exists() and not (tmp_path / "books").exists(), "a refused command wrote"


def test_a_non_numeric_port_is_one_line_from_a_real_process(tmp_path: Path) -> None:
    """As an operator meets it (this was a 108-line traceback from inside the unreachable-database message)."""
    (bad, line) = _unusable_inputs(tmp_path)["non-numeric port"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COUNTERSIGN_", "DATABASE_URL"))}
    done = subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", "close", "status"],
        env={**base, "COUNTERSIGN_STATE_DIR": str(tmp_path / "state"), **bad, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == "", done.stdout[-2000:] + done.stderr[-2000:]
    (only,) = done.stderr.splitlines()
    assert only == line and "hunter2" not in only


def test_config_check_reports_bad_urls_and_paths_one_line_each(tmp_path: Path) -> None:
    refused = {
        "COUNTERSIGN_ENGINE_DATABASE_URL": (
            "postgresql://e:hunter2@db:99999/c",
            "port after the host must be a number",
        ),
        "COUNTERSIGN_CALLBACKS_DATABASE_URL": ("postgresql://c:hunter2@/c", "no host (want postgresql://"),
        "DATABASE_URL": ("http://owner:hunter2@db/c", "not a postgresql:// URL (scheme 'http')"),
        "COUNTERSIGN_SPECIALISTS_URL": ("http://specialists:eighty", "not a valid http(s) URL: invalid port number"),
        "COUNTERSIGN_CONFIG_DIR": (str(tmp_path), "has no risk.yaml"),
        "COUNTERSIGN_OUTBOX_BUDGET_HOURS": ("-1", "must be above 0 ('-1')"),
    }
    for name, (value, words) in refused.items():
        done = _invoke("config", "check", env={name: value})
        errors = [line for line in done.output.splitlines() if line.startswith("error:")]
        assert done.exit_code == 2 and len(errors) == 1, (name, done.output)
        assert errors[0].startswith(f"error: {name}: ") and words in errors[0], errors
        assert "hunter2" not in done.output and isinstance(done.exception, SystemExit), name
    done = _invoke("config", "check", env={"COUNTERSIGN_OUTBOX_BUDGET_HOURS": "2.5"})
    assert done.exit_code == 0 and "configuration valid" in done.output
    row = next(line for line in done.output.splitlines() if "COUNTERSIGN_OUTBOX_BUDGET_HOURS" in line)
    assert "2.5" in row and "env" in row
