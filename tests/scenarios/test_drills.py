"""The drills, run small in the suite against the test's PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from countersign.scenarios.drills import IdempotencyReport, StormCounts, run_idempotency_drill, run_restart_drill


def test_the_idempotency_storm_leaves_one_posting_and_refuses_a_changed_payload(runtime: Any) -> None:
    report = run_idempotency_drill(runtime, retries=36, processes=3)
    assert report.server.startswith("PostgreSQL")
    assert (report.dispatch_rows, report.specialist_calls, report.journals) == (1, 1, 1)
    assert report.storm.created == 1 and report.storm.reused == 35 and not report.storm.errors
    assert report.changed_storm is not None and report.changed_storm.conflicts == 36
    assert report.rows_written_by_changed_storm == 0
    assert report.passed


def test_the_storm_report_fails_on_any_duplicate() -> None:
    counts = StormCounts(created=2)
    report = IdempotencyReport("PostgreSQL 16", "h", "d", 2, 1, 0.1, counts, 1, 1, 2, 4)
    assert report.duplicates == 1 and not report.passed


@pytest.mark.parametrize("point", ["posting.mid", "card.before_post", "trace.mid_seal", "job.after_advance"])
def test_a_worker_killed_at_a_kill_point_is_replaced_and_every_effect_happens_once(
    runtime: Any, database: Any, fake_slack: Any, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    slack = {
        "DATABASE_URL": database.url,
        "COUNTERSIGN_STATE_DIR": str(runtime.settings.state_dir),
        "SLACK_BOT_TOKEN": "xoxb-drill",
        "SLACK_SIGNING_SECRET": "drill-signing-secret",
        "SLACK_API_URL": fake_slack.url,
        "COUNTERSIGN_SLACK_CHANNEL": "C0DRILL",
    }
    for key, value in slack.items():
        monkeypatch.setenv(key, value)
    rt = replace(
        runtime,
        settings=runtime.settings.model_copy(
            update=dict(
                slack_bot_token="xoxb-drill", slack_signing_secret="drill-signing-secret", slack_channel="C0DRILL"
            )
        ),
    )
    (result,) = run_restart_drill(rt, (point,))
    assert result.killed, f"{point} was never reached"
    assert result.closed
    assert result.problems == []
    posts = [c for c in fake_slack.calls_to("chat.postMessage") if "blocks" in c.params]
    gates = {p.params.get("text") for p in posts}
    assert len(posts) == len(gates)  # no gate card posted twice


def test_four_workers_carry_many_closes_with_every_effect_once(
    runtime: Any, database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from countersign.scenarios.drills import run_workers_drill

    monkeypatch.setenv("DATABASE_URL", database.url)
    monkeypatch.setenv("COUNTERSIGN_STATE_DIR", str(runtime.settings.state_dir))
    report = run_workers_drill(runtime, closes=6, workers=4, timeout_s=300)
    assert report.problems == []
    assert report.closed == 6


def test_the_workers_drill_fails_when_sealing_stops_keeping_up(
    runtime: Any, database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control for the drill's queue watch: a session holds the sealer's lock for 12 s, so events queue
    while the worker runs; the drill must fail naming it, even though its own final seal would drain the queue."""
    import threading

    import psycopg

    from countersign.scenarios.drills import run_workers_drill
    from countersign.store.trace import SEAL_LOCK

    monkeypatch.setenv("DATABASE_URL", database.url)
    monkeypatch.setenv("COUNTERSIGN_STATE_DIR", str(runtime.settings.state_dir))
    holder = psycopg.connect(database.url, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s)", (SEAL_LOCK,))
    release = threading.Timer(12.0, holder.close)  # closing the session lets the lock go
    release.start()
    try:
        report = run_workers_drill(runtime, closes=1, workers=1, timeout_s=40, seal_wait_limit_s=3.0)
    finally:
        release.cancel()
        holder.close()
    stalls = [problem for problem in report.problems if "sealing fell behind" in problem]
    assert len(stalls) == 1 and "limit 3s" in stalls[0], report.problems
    assert report.longest_seal_wait_s > 3.0 and not report.passed
