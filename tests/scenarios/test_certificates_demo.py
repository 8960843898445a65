"""`countersign demo --workflow certificates`: a month of payment runs end to end over the committed cassettes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from countersign.scenarios import demo_certificates
from countersign.scenarios.demo_certificates import DemoRefused, run_certificates_demo
from countersign.synthetic.construction import FAULT_CLASSES
from tests.cli.test_cli import cli
from tests.support import count


def recorded() -> Console:
    return Console(record=True, width=200, force_terminal=False)


async def test_the_demo_month_gates_every_seeded_class_certifies_corrected_sums_and_serves_pay_less_notices(
    runtime: Any, conn: Any
) -> None:
    console = recorded()
    ok = await run_certificates_demo(runtime, seed=42, console=console)
    out = console.export_text()
    assert ok, out
    assert "seeded classes caught and gated: 9 of 9" in out
    for name in FAULT_CLASSES:
        assert f"seeded: {name}" in out
    assert "REJECTS payment" in out and "approves extraction (escalation" in out
    assert "certify the reconstructed sum, not the claim" in out
    # The hostile text is flagged, and moves neither the amount nor a verdict.
    assert "escalated suspected_injection" in out and "extraction: suspected_injection in variation:" in out
    hostile = re.search(r"with it (\(.*?\)), without it (\(.*?\)), in its run (\(.*?\))", out)
    assert hostile is not None and hostile[1] == hostile[2] == hostile[3], out
    # Every model request the month made had a committed recorded response.
    assert "no_recorded_response" not in out
    assert (
        await count(
            conn, "SELECT count(*) FROM close_task WHERE escalation IS NOT NULL AND escalation <> 'suspected_injection'"
        )
        == 0
    )
    assert await count(conn, "SELECT count(*) FROM close_task WHERE escalation = 'suspected_injection'") == 1
    # Four clean certificates certified at their claims, eight with violations at the reconstructed sum, the
    # duplicate rejected; each certified once.
    assert await count(conn, "SELECT count(*) FROM payment_certification WHERE basis = 'claimed'") == 4
    assert await count(conn, "SELECT count(*) FROM payment_certification WHERE basis = 'reconstructed'") == 8
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'certificate_certified'") == 12
    rejected = "SELECT count(*) FROM gate_state WHERE task = 'payment' AND status = 'rejected'"
    assert await count(conn, rejected) == 1
    # A pay-less notice for the rejection and for every certification below its claim, each before its deadline.
    reduced = "SELECT count(*) FROM payment_certification WHERE amount < claimed_amount"
    notices = "SELECT count(*) FROM payment_notice WHERE kind = 'pay_less' AND served_in_time"
    assert await count(conn, reduced) >= 1
    assert await count(conn, notices) == await count(conn, reduced) + 1
    on_rejection = (
        "SELECT count(*) FROM payment_notice n JOIN gate_state s USING (gate_id)"
        " WHERE s.status = 'rejected' AND n.sum_to_pay = 0"
    )
    assert await count(conn, on_rejection + " AND n.kind = 'pay_less'") == 1
    # The payment notice (s. 110A) on every decided certificate, in time, stating the sum decided.
    payment_notices = "SELECT count(*) FROM payment_notice WHERE kind = 'payment' AND served_in_time"
    assert await count(conn, payment_notices) == 13
    assert await count(conn, on_rejection + " AND n.kind = 'payment'") == 1
    stated = (
        "SELECT count(*) FROM payment_notice n JOIN payment_certification p USING (gate_id)"
        " WHERE n.kind = 'payment' AND n.sum_to_pay = p.amount"
    )
    assert await count(conn, stated) == 12
    assert "payment notices served: 13; pay-less notices served: " in out
    assert "pay-less notice" in out and "in time" in out
    # The same certificates cannot be paid twice: a second demo in this database is refused before anything runs.
    runs = await count(conn, "SELECT count(*) FROM close_run")
    with pytest.raises(DemoRefused, match="already ran"):
        await run_certificates_demo(runtime, seed=42, console=recorded())
    assert await count(conn, "SELECT count(*) FROM close_run") == runs


async def test_a_script_that_pays_a_duplicate_fails_the_demo(
    runtime: Any, conn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo_certificates, "_payment_decision", lambda tasks: ("approve", "pay everything"))
    console = recorded()
    assert not await run_certificates_demo(runtime, seed=42, console=console)
    out = console.export_text()
    assert "certified although held as a duplicate" in out and "no rejection served a pay-less notice" in out
    assert await count(conn, "SELECT count(*) FROM payment_certification") == 13


def test_the_cli_runs_the_certificates_demo_once_per_database(database: Any, tmp_path: Path) -> None:
    first = cli(database, tmp_path, "demo", "--workflow", "certificates")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "seeded classes caught and gated: 9 of 9" in first.stdout and "trace: intact" in first.stdout
    again = cli(database, tmp_path, "demo", "--workflow", "certificates")
    assert again.returncode == 1 and "already ran" in again.stderr
    unknown = cli(database, tmp_path, "demo", "--workflow", "payroll")
    assert unknown.returncode == 2 and "--workflow must be close or certificates" in unknown.stderr
