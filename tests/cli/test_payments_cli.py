"""`countersign payments status`: one line per payment run, in a fresh process, from the database alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from countersign.scenarios.demo_certificates import run_certificates_demo
from tests.cli.test_cli import cli

PERIOD = "2025-06"
COLUMNS = {"certificate_id", "contract_id", "amount_to_certify", "currency", "stage", "gate", "escalation", "certified"}


async def demo_month(runtime: Any) -> None:
    assert await run_certificates_demo(runtime, seed=42, console=Console(quiet=True))


async def test_payments_status_shows_one_line_per_certificate_with_its_outcome(
    runtime: Any, database: Any, tmp_path: Path
) -> None:
    await demo_month(runtime)
    done = cli(database, tmp_path, "payments", "status", "--period", PERIOD, "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) == 13 and all(row.keys() >= COLUMNS for row in rows)
    assert len({row["certificate_id"] for row in rows}) == 13
    certified = [row for row in rows if row["certified"]]
    assert len(certified) == 12  # four clean at their claims, eight with violations at the reconstructed sum
    assert all(row["gate"]["status"] == "approved" and row["stage"] == "done" for row in certified)
    corrected = [row for row in certified if row["certified_amount"] != row["claimed_amount"]]
    assert corrected and all(row["certified_amount"] == row["amount_to_certify"] for row in certified)
    assert all(row["gate"]["tier"] in ("high", "critical") for row in corrected)  # findings raise the tier
    rejected = [row for row in rows if row["gate"] and row["gate"]["status"] == "rejected"]
    assert len(rejected) == 1 and not any(row["certified"] for row in rejected)  # the duplicate
    assert [row["escalation"] for row in rows if row["escalation"]] == ["suspected_injection"]
    other_month = cli(database, tmp_path, "payments", "status", "--period", "2025-05", "--json")
    assert other_month.returncode == 0 and json.loads(other_month.stdout) == []

    # The same rows as a table a person can read.
    done = cli(database, tmp_path, "payments", "status", "--period", PERIOD)
    assert done.returncode == 0, done.stderr
    assert f"payment runs {PERIOD}: 13, 12 certified" in done.stdout
    table = [line for line in done.stdout.splitlines() if "IPC-" in line]
    assert len(table) == 13
    for row in rows:
        line = next(line for line in table if row["certificate_id"] in line)
        cells = [cell.strip() for cell in line.split("│") if cell.strip()]
        assert cells[:2] == [row["certificate_id"], row["contract_id"]]
        assert cells[-1] == ("yes" if row["certified"] else "no")


def test_a_period_that_is_not_a_month_is_refused(database: Any, tmp_path: Path) -> None:
    done = cli(database, tmp_path, "payments", "status", "--period", "2025-13")
    assert done.returncode == 2
    assert "--period must be a month YYYY-MM" in done.stderr
