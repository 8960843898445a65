"""`countersign trace reproduce CLOSE`: the recorded specialist calls re-run and compared byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg

from tests.cli.test_cli import cli


def _advanced_close(database: Any, tmp_path: Path) -> str:
    started = cli(
        database, tmp_path, "close", "start", "--entity", "NEWCO", "--period", "2026-10", "--synthetic", "--json"
    )
    assert started.returncode == 0, started.stderr
    assert cli(database, tmp_path, "close", "advance").returncode == 0
    return str(json.loads(started.stdout)["close_id"])


def test_a_close_reproduces_byte_for_byte_and_a_changed_result_is_named(database: Any, tmp_path: Path) -> None:
    close_id = _advanced_close(database, tmp_path)
    same = cli(database, tmp_path, "trace", "reproduce", close_id, "--json")
    assert same.returncode == 0, same.stdout + same.stderr
    report = json.loads(same.stdout)
    assert report["identical"] is True and report["version_changes"] == {}
    reran = [c for c in report["calls"] if c["output_same"] is not None]
    assert {"accruals", "ap_reconciliation"} <= {c["task"] for c in reran}
    assert all(c["input_same"] and c["output_same"] for c in reran), report["calls"]
    shown = cli(database, tmp_path, "trace", "reproduce", close_id)
    assert shown.returncode == 0 and "every call reproduced byte for byte" in shown.stdout

    # Negative control: a stored result edited behind the engine's back (its frozen-row trigger set aside).
    with psycopg.connect(database.url, autocommit=True) as admin:
        admin.execute("ALTER TABLE dispatch DISABLE TRIGGER USER")
        (task,) = admin.execute(
            "UPDATE dispatch SET result = result || '{\"tampered\": true}'::jsonb WHERE dispatch_id ="
            " (SELECT min(dispatch_id) FROM dispatch WHERE close_id = %s AND status = 'completed'"
            " AND task = 'accruals')"
            " RETURNING task",
            (close_id,),
        ).fetchone()  # type: ignore[misc]
        admin.execute("ALTER TABLE dispatch ENABLE TRIGGER USER")
    differs = cli(database, tmp_path, "trace", "reproduce", close_id, "--json")
    assert differs.returncode == 1, differs.stdout + differs.stderr
    changed = [c for c in json.loads(differs.stdout)["calls"] if c["output_same"] is False]
    assert [c["task"] for c in changed] == [task]
    assert changed[0]["difference"]["recorded_size"] > changed[0]["difference"]["reproduced_size"]
    assert "tampered" in changed[0]["difference"]["recorded"]

    missing = cli(database, tmp_path, "trace", "reproduce", "00000000-0000-0000-0000-000000000000")
    assert missing.returncode == 2 and "error:" in missing.stderr
