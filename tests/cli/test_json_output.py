"""`--json` on the commands a script drives, and output that a pipe receives whole (not cut at 80 columns).

Each command runs in a fresh process against the test database, as a deploy script would run it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from typer.testing import CliRunner

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.cli.common import PIPED_WIDTH, output_width
from countersign.cli.main import app
from tests.cli.test_cli import cli


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # stdout holds the one document and nothing else


def test_a_script_drives_a_close_through_json_alone(database: Any, tmp_path: Path) -> None:
    started = _json(
        cli(database, tmp_path, "close", "start", "--entity", "NEWCO", "--period", "2026-10", "--synthetic", "--json")
    )
    assert started["entity"] == "NEWCO" and started["period"] == "2026-10"
    close_id = started["close_id"]

    advanced = _json(cli(database, tmp_path, "close", "advance", "--close", close_id, "--json"))
    assert advanced["close_id"] == close_id and advanced["steps"], advanced
    assert advanced["status"] == _json(cli(database, tmp_path, "close", "status", "--json"))["status"]

    listed = _json(cli(database, tmp_path, "close", "list", "--json"))
    [line] = [c for c in listed if c["close_id"] == close_id]
    assert (line["entity"], line["period"], line["status"]) == ("NEWCO", "2026-10", advanced["status"])
    assert line["currency"] and line["updated_at"].endswith("+00:00")
    status = _json(cli(database, tmp_path, "close", "status", "--close", close_id, "--json"))
    open_gates = {g["gate_id"] for g in status["gates"] if g["status"] == "open"}
    assert {w["gate_id"] for w in line["waiting_on"]} == open_gates and open_gates  # the synthetic close stops at gates

    verified = _json(cli(database, tmp_path, "trace", "verify", "--close", close_id, "--json"))
    assert verified["ok"] is True and verified["tree_size"] > 0 and len(verified["root"]) == 64
    assert verified["close"]["close_id"] == close_id and verified["close"]["events"] > 0

    with psycopg.connect(database.url, autocommit=True) as admin:  # a changed event: the chain no longer holds
        admin.execute("ALTER TABLE trace_event DISABLE TRIGGER trace_event_append_only")
        admin.execute("UPDATE trace_event SET actor = 'mallory' WHERE seq = 2")
    broken = cli(database, tmp_path, "trace", "verify", "--json")
    assert broken.returncode == 1, broken.stdout
    report = json.loads(broken.stdout)
    assert report["ok"] is False and report["problem"]


def test_principals_list_names_roles_channels_and_keys(database: Any, tmp_path: Path) -> None:
    machines = _json(cli(database, tmp_path, "principals", "list", "--json"))
    assert machines and {p["kind"] for p in machines} == {"machine"}  # the specialists, seeded by the schema
    imported = cli(database, tmp_path, "principals", "import", str(PROJECT_ROOT / "config" / "principals.yaml"))
    assert imported.returncode == 0, imported.stderr
    with psycopg.connect(database.url, autocommit=True) as admin:
        expected = {r[0]: r for r in admin.execute("SELECT principal_id, kind, roles, active FROM principal")}
    listed = _json(cli(database, tmp_path, "principals", "list", "--json"))
    assert [p["principal_id"] for p in listed] == sorted(expected)
    for p in listed:
        _, kind, roles, active = expected[p["principal_id"]]
        assert (p["kind"], p["roles"], p["active"]) == (kind, roles, active)
        assert p["live_passkeys"] == 0
    humans = [p for p in listed if p["kind"] == "human"]
    assert humans and not any(p["has_signing_key"] for p in humans)  # the shipped file carries no keys
    assert any("slack" in p["channels"] for p in humans)  # the shipped people are mapped to their chat identities

    table = cli(database, tmp_path, "principals", "list")
    assert table.returncode == 0 and all(p["principal_id"] in table.stdout for p in listed)


def test_config_check_json_is_one_document_with_the_errors() -> None:
    good = CliRunner().invoke(
        app,
        ["config", "check", "--json"],
        env={"SLACK_BOT_TOKEN": "xoxb-0123456789-abcdefWXYZ", "SLACK_SIGNING_SECRET": "signing-secret-0123456789"},
    )
    assert good.exit_code == 0, good.output
    document = json.loads(good.stdout)
    assert document["valid"] is True and document["errors"] == []
    token = {v["variable"]: v for v in document["variables"]}["SLACK_BOT_TOKEN"]
    assert token["from"] == "env" and "0123456789" not in good.stdout  # redacted as in the table

    bad = CliRunner().invoke(app, ["config", "check", "--json"], env={"COUNTERSIGN_OPENAPI": "maybe"})
    assert bad.exit_code == 2
    assert json.loads(bad.stdout)["errors"] == [
        "COUNTERSIGN_OPENAPI: not a boolean: use 1/0, true/false, yes/no ('maybe')"
    ]


def test_piped_output_keeps_whole_lines(database: Any, tmp_path: Path) -> None:
    assert (
        cli(database, tmp_path, "close", "start", "--entity", "NEWCO", "--period", "2026-10", "--synthetic").returncode
        == 0
    )
    assert cli(database, tmp_path, "close", "advance").returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env |= {"DATABASE_URL": database.url, "COUNTERSIGN_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", "close", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    widths = [len(line) for line in done.stdout.splitlines()]
    assert max(widths) > 80, widths  # rich alone would fit every table into 80 columns for a pipe
    gate_rows = [line for line in done.stdout.splitlines() if "needs" in line and "role" in line]
    assert gate_rows and all(line.rstrip().endswith("│") for line in gate_rows)  # no cell wrapped onto a second line


def test_the_width_is_the_terminal_s_or_columns_and_unbounded_for_a_pipe() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert output_width(Tty(), {}) is None  # rich measures the terminal
    assert output_width(io.StringIO(), {"COLUMNS": "120"}) is None  # rich reads COLUMNS
    assert output_width(io.StringIO(), {}) == PIPED_WIDTH
    assert output_width(io.StringIO(), {"COLUMNS": "wide"}) == PIPED_WIDTH
