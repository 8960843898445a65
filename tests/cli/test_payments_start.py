"""`countersign payments start --period YYYY-MM [--set ID]`: one payment run per certificate of the month, on the
latest construction set with that month or the one named; a month started twice, a month nobody loaded, an unknown
set and a malformed month are each one line and exit 2, and start nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.test_cli import cli
from tests.support import count

APPLICATIONS = Path(__file__).resolve().parents[1] / "data" / "applications"
RUNS = "SELECT count(*) FROM close_run WHERE workflow = 'certificates'"


async def test_a_month_of_loaded_applications_starts_one_run_per_certificate(
    database: Any, conn: Any, tmp_path: Path
) -> None:
    loaded = cli(database, tmp_path, "payments", "load", str(APPLICATIONS))
    assert loaded.returncode == 0, loaded.stderr
    set_id = int(loaded.stdout.split("construction set ")[1].split()[0])

    done = cli(database, tmp_path, "payments", "start", "--period", "2025-05")
    assert done.returncode == 0, done.stderr
    assert f"started 1 payment runs for 2025-05 on construction set {set_id}" in done.stdout
    cur = await conn.execute("SELECT close_id, entity, period FROM close_run WHERE workflow = 'certificates'")
    ((close_id, entity, period),) = await cur.fetchall()
    assert (entity, period) == ("IPC-CT100-002", "2025-05") and str(close_id) in done.stdout

    named = cli(database, tmp_path, "payments", "start", "--period", "2025-06", "--set", str(set_id))
    assert named.returncode == 0, named.stderr
    assert await count(conn, RUNS) == 2

    refusals = {
        ("--period", "2025-05"): "the payment runs of 2025-05 are already started (IPC-CT100-002 runs as",
        ("--period", "2024-01"): "no certificate submitted in 2024-01 in any loaded construction set",
        ("--period", "2025-04", "--set", "999"): "no construction set 999",
        ("--period", "2025-13"): "--period must be a month YYYY-MM, got '2025-13'",
    }
    for args, words in refusals.items():
        refused = cli(database, tmp_path, "payments", "start", *args)
        assert refused.returncode == 2, (args, refused.stdout)
        assert refused.stderr.startswith("error: ") and words in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    assert await count(conn, RUNS) == 2
