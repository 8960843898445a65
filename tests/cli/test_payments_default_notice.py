"""`countersign payments default-notice`: the payee's default notice (s. 110B) recorded from a fresh process, with
the words the database's refusals give."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import cli
from tests.engine import payment_run_support as support
from tests.engine.workflows.test_payee_default_notice import _first, _late_set


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return support.generate(tmp_path / "construction")


def _notice(database: Any, tmp_path: Path, certificate: str, *options: str) -> Any:
    return cli(database, tmp_path, "payments", "default-notice", certificate, *options)


async def test_the_cli_records_the_notice_and_refuses_a_second_in_words(
    database: Any, conn: Any, tmp_path: Path, data_dir: Path
) -> None:
    first = _first(data_dir)
    await _late_set(conn, data_dir)
    today = datetime.now(UTC).date().isoformat()
    done = _notice(
        database, tmp_path, first["id"], "--sum", "1200.50", "--basis", "as valued", "--given-on", today, "--json"
    )
    assert done.returncode == 0, done.stderr
    recorded = json.loads(done.stdout)
    assert (recorded["currency"], recorded["stated_sum"], recorded["claimed_sum"]) == (
        "GBP",
        "1200.50",
        f"{Decimal(first['totals']['amount_due']):.2f}",
    )
    assert recorded["days_late"] == 18 and recorded["payment_notice_given_late"] is False
    final = datetime.fromisoformat(recorded["final_date"]).date()
    assert recorded["postponed_final_date"] == (final + timedelta(days=18)).isoformat()
    again = _notice(database, tmp_path, first["id"], "--sum", "1", "--basis", "again", "--given-on", today)
    assert again.returncode == 2 and f"certificate {first['id']} has one already" in again.stderr
    assert "Traceback" not in again.stderr


async def test_the_cli_prints_the_notice_in_words(database: Any, conn: Any, tmp_path: Path, data_dir: Path) -> None:
    first = _first(data_dir)
    await _late_set(conn, data_dir)
    today = datetime.now(UTC).date().isoformat()
    done = _notice(database, tmp_path, first["id"], "--sum", "0", "--basis", "nothing is due", "--given-on", today)
    assert done.returncode == 0, done.stderr
    words = " ".join(done.stdout.split())
    assert "recorded default notice 1: Payee's default notice for certificate" in words
    assert "the payee states GBP 0.00 is due" in words and "(18 days later)" in words


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (("--sum", "a lot", "--basis", "b", "--given-on", "2026-01-01"), "--sum must be an amount like 12500.00"),
        (("--sum", "-5", "--basis", "b", "--given-on", "2026-01-01"), "--sum -5 is not an amount of nothing or more"),
        (("--sum", "1.001", "--basis", "b", "--given-on", "2026-01-01"), "in hundredths"),
        (("--sum", "5", "--basis", " ", "--given-on", "2026-01-01"), "--basis is empty"),
        (("--sum", "5", "--basis", "b", "--given-on", "1 March"), "--given-on must be a day YYYY-MM-DD"),
    ],
)
def test_bad_input_is_one_line_naming_the_option(
    database: Any, tmp_path: Path, options: tuple[str, ...], says: str
) -> None:
    done = _notice(database, tmp_path, "IPC-ANY", *options)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_certificate_is_named(database: Any, tmp_path: Path) -> None:
    done = _notice(database, tmp_path, "IPC-NOPE", "--sum", "5", "--basis", "b", "--given-on", "2026-01-01")
    assert done.returncode == 2 and "no certificate IPC-NOPE was loaded" in done.stderr
