"""`countersign outbox redrive` and `outbox status`, run in-process against a migrated database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.cli.outbox import BadOption, outbox_app, parse_gate, parse_platform, parse_since

NOTICE = (
    "INSERT INTO outbox_message (dedupe_key, platform, channel, kind, payload, template, status, dead_lettered_at)"
    " VALUES (%s, %s, %s, 'notice', '{\"tree_size\": 1}', 'checkpoint', 'failed', now() - interval '3 hours')"
)


def outbox(database: Any, tmp_path: Path, *args: str) -> Any:
    env = {
        "DATABASE_URL": database.url,
        "COUNTERSIGN_STATE_DIR": str(tmp_path / "state"),
        "COUNTERSIGN_CONFIG_DIR": str(PROJECT_ROOT / "config"),
        "COUNTERSIGN_OUTBOX_BUDGET_HOURS": "6",
        "COLUMNS": "200",
    }
    return CliRunner().invoke(outbox_app, list(args), env=env)


def test_redrive_puts_matching_dead_letters_back_once_with_a_fresh_budget(database: Any, tmp_path: Path) -> None:
    with psycopg.connect(database.url, autocommit=True) as owner:
        for key, platform in (("a", "slack"), ("b", "slack"), ("c", "teams")):
            owner.execute(NOTICE, (f"checkpoint:1:{key}", platform, f"C-{key}"))

    recent = outbox(database, tmp_path, "redrive", "--platform", "slack", "--since", "1h")
    assert recent.exit_code == 0 and "nothing to redrive" in recent.output  # dead-lettered 3 h ago
    slack = outbox(database, tmp_path, "redrive", "--platform", "slack", "--since", "4h")
    assert slack.exit_code == 0, slack.output
    assert "redrove 2 dead-lettered messages with a fresh budget of 6 h" in slack.output
    again = outbox(database, tmp_path, "redrive", "--platform", "slack")
    assert again.exit_code == 0 and "nothing to redrive" in again.output

    status = outbox(database, tmp_path, "status", "--json")
    assert status.exit_code == 0, status.output
    summary = json.loads(status.output)
    assert summary["counts"]["pending"] == {"slack": 2} and summary["counts"]["failed"] == {"teams": 1}
    assert summary["past_budget"] == 0 and summary["budget_hours"] == 6 and summary["oldest_pending_age_s"] < 60
    with psycopg.connect(database.url, autocommit=True) as owner:
        rows = owner.execute(
            "SELECT status, redrives, attempts, next_attempt_at <= now(), dead_lettered_at IS NULL"
            " FROM outbox_message WHERE platform = 'slack'"
        ).fetchall()
    assert rows == [("pending", 1, 0, True, True)] * 2
    table = outbox(database, tmp_path, "status")
    assert table.exit_code == 0 and "past the 6 h budget and still pending: 0" in table.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--platform", "irc"), "--platform: must be one of slack, teams, not 'irc'"),
        (("--gate", "gate-7"), "--gate: not a gate id"),
        (("--since", "last tuesday"), "--since: not a time: 'last tuesday'"),
    ],
)
def test_a_wrong_option_is_one_line_naming_it(database: Any, tmp_path: Path, args: tuple[str, ...], named: str) -> None:
    result = outbox(database, tmp_path, "redrive", *args)
    assert result.exit_code == 2
    assert named in result.output and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_since_reads_iso_times_and_spans_ago() -> None:
    now = datetime(2025, 1, 31, 12, tzinfo=UTC)
    assert parse_since("90m", now=now) == now - timedelta(minutes=90)
    assert parse_since("2d", now=now) == now - timedelta(days=2)
    assert parse_since("2025-01-30") == datetime(2025, 1, 30, tzinfo=UTC)
    assert parse_since("2025-01-30T09:00+01:00") == datetime(2025, 1, 30, 8, tzinfo=UTC)
    assert parse_gate("0190B6D2-7A5B-7C3E-9F00-000000000001") == "0190b6d2-7a5b-7c3e-9f00-000000000001"
    assert parse_platform("teams") == "teams"
    with pytest.raises(BadOption):
        parse_since("6 hours")


def test_the_worker_delivers_with_the_configured_budget(
    database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COUNTERSIGN_OUTBOX_BUDGET_HOURS reaches the worker's deliverer (not the 24 h default)."""
    import countersign.delivery.worker
    from countersign.cli.main import app

    seen: list[float] = []
    deliver_due = countersign.delivery.worker.deliver_due

    async def recording(
        *args: Any, budget_hours: float = countersign.delivery.worker.DEFAULT_BUDGET_HOURS, **kwargs: Any
    ) -> Any:
        seen.append(budget_hours)
        return await deliver_due(*args, budget_hours=budget_hours, **kwargs)

    monkeypatch.setattr(countersign.delivery.worker, "deliver_due", recording)
    env = {
        "DATABASE_URL": database.url,
        "COUNTERSIGN_STATE_DIR": str(tmp_path / "state"),
        "COUNTERSIGN_CONFIG_DIR": str(PROJECT_ROOT / "config"),
        "COUNTERSIGN_OUTBOX_BUDGET_HOURS": "6",
    }
    result = CliRunner().invoke(app, ["worker", "--once"], env=env)
    assert result.exit_code == 0, result.output
    assert seen == [6.0]
