"""`countersign payments check PATH [--json]`: the checks alone, with no database (an unreachable DATABASE_URL) and
nothing started; per certificate in submission order, held or not, each violation with its amounts and currency,
each duplicate naming the certificate it repeats. Exit 0 when nothing is held, 1 when something is, 2 on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from countersign.certificates import parse_certificate, parse_contract
from countersign.certificates.pipeline import run_pipeline, submission_order
from tests.cli.test_cli import PROJECT_ROOT

APPLICATIONS = Path(__file__).resolve().parents[1] / "data" / "applications"
NO_DATABASE = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"  # nothing listens: any connection fails


def check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": NO_DATABASE,
        "COUNTERSIGN_STATE_DIR": str(tmp_path / "state"),
        "COUNTERSIGN_CONFIG_DIR": str(PROJECT_ROOT / "config"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_test_applications_are_all_clear_without_a_database(tmp_path: Path) -> None:
    done = check(tmp_path, "payments", "check", str(APPLICATIONS))
    assert done.returncode == 0, done.stderr
    assert "3 certificates checked: 0 held, 3 clear" in done.stdout
    lines = [line for line in done.stdout.splitlines() if "IPC-CT100-" in line]
    assert [line.split("│")[1].strip() for line in lines] == ["IPC-CT100-001", "IPC-CT100-002", "IPC-CT100-003"]
    assert all("clear" in line for line in lines)


def test_a_planted_error_in_a_spreadsheet_is_held_with_its_amounts(tmp_path: Path) -> None:
    month = tmp_path / "month"
    month.mkdir()
    for name in ("contracts.json", "app.csv"):
        (month / name).write_bytes((APPLICATIONS / name).read_bytes())
    text = (APPLICATIONS / "app.csv").read_text()
    (month / "app.csv").write_text(text.replace('Amount due,"7,030.00"', 'Amount due,"7,130.00"'))
    done = check(tmp_path, "payments", "check", str(month), "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"] == {"certificates": 1, "held": 1, "clear": 0}
    (held,) = report["certificates"]
    assert held["verdict"] == "held" and held["duplicate_of"] is None
    (violation,) = held["violations"]
    assert violation["invariant"] == "statement_foots"
    assert violation["amounts"]["difference"] == {"amount": "100.00", "currency": "GBP"}
    assert held["sources"]["totals.amount_due"] == "app.csv, row 33"
    table = check(tmp_path, "payments", "check", str(month))
    assert table.returncode == 1
    assert "IPC-CT100-001 (CT-100 no. 1) held:" in table.stdout
    assert "difference GBP 100.00" in table.stdout


def test_a_generated_set_is_checked_as_the_pipeline_checks_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "construction"
    synth = check(tmp_path, "synth", "--profile", "construction-demo", "--seed", "42", "--out", str(data_dir))
    assert synth.returncode == 0, synth.stderr
    done = check(tmp_path, "payments", "check", str(data_dir), "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)

    contracts = {
        item["id"]: parse_contract(item) for item in json.loads((data_dir / "contracts.json").read_text())["contracts"]
    }
    certificates = [
        parse_certificate(json.loads(line)) for line in (data_dir / "certificates.jsonl").read_text().splitlines()
    ]
    run = run_pipeline(contracts, certificates)
    held = {hold.certificate for hold in run.holds} | {a.certificate.id for a in run.assessments if not a.certified}
    assert held, "the demo set plants faults and a duplicate"
    assert [c["certificate"] for c in report["certificates"]] == [
        c.id for c in sorted(certificates, key=submission_order)
    ]
    assert {c["certificate"] for c in report["certificates"] if c["verdict"] == "held"} == held
    assert report["summary"]["held"] == len(held)
    duplicates = {
        c["certificate"]: c["duplicate_of"]["certificate"] for c in report["certificates"] if c["duplicate_of"]
    }
    assert duplicates == {hold.certificate: hold.other_certificate for hold in run.holds}
    for c in report["certificates"]:
        for violation in c["violations"]:
            assert violation["amounts"], violation["invariant"]
            currency = contracts[c["contract"]].currency
            assert all(amount["currency"] == currency for amount in violation["amounts"].values())

    table = check(tmp_path, "payments", "check", str(data_dir))
    assert table.returncode == 1
    assert f"{len(certificates)} certificates checked: {len(held)} held" in table.stdout
    for certificate, other in duplicates.items():
        assert f"duplicate of {other}" in table.stdout and f"{certificate} (" in table.stdout


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "app.csv").write_text("")
    (tmp_path / "contracts.json").write_bytes((APPLICATIONS / "contracts.json").read_bytes())
    done = check(tmp_path, "payments", "check", str(tmp_path / "app.csv"))
    assert done.returncode == 2
    assert done.stderr.strip() == "error: app.csv: (file): is empty: no pay application in it"
    assert done.stdout == ""
