"""Benchmark: many closes at once on several worker processes (the job engine, ADR 0040).

Run: .venv/bin/python bench/bench_workers.py [--closes 500] [--workers 8] [--blocked 50] [--smoke]
On its own embedded PostgreSQL, three runs of `countersign drill workers` (countersign/scenarios/drills.py), each with
fresh
closes of the default profile and scripted approvers:

1. the baseline: one close on one worker, decided as it goes (the same machine, the same run);
2. `--closes` closes on `--workers` worker processes, every gate decided by the scripted people: all must close with
   every effect once; prints closes per minute (and as a ratio to the baseline's), p50/p99 from the decision that
   completed a gate to the next gate opened on that run, database sessions opened and the most connected at once;
3. `--blocked` closes that nobody decides: once every run waits on a person and no job is ready, a 10 s window in
   which the workers' cost is counted as transactions committed on the database (after 11 s for PostgreSQL's late
   counters to settle) and jobs ready or running are sampled, beside the same window with no close at all (the
   workers' heartbeats and polls alone). Blocked runs cost nothing when the two are about equal and no job ran.

`--smoke` runs 2 closes on 2 workers and 2 blocked ones with a 1 s window, without the baseline and the empty run,
no verdict (make test runs it). Bounded: aborts itself after ABORT_AFTER_SECONDS.
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import exit_code, stop_embedded  # noqa: E402

from countersign.bootstrap import migrate  # noqa: E402
from countersign.bootstrap.database import Database, start_embedded  # noqa: E402
from countersign.bootstrap.runtime import Runtime, load_rules_all  # noqa: E402
from countersign.bootstrap.settings import PROJECT_ROOT, Settings  # noqa: E402
from countersign.scenarios.drills import WorkersReport, run_workers_drill  # noqa: E402

ABORT_AFTER_SECONDS = 3600
TIMEOUT_S = 1800.0


class BenchAborted(RuntimeError):
    pass


def _abort(_signum: int, _frame: FrameType | None) -> None:
    raise BenchAborted(f"the benchmark ran past {ABORT_AFTER_SECONDS} s")


def describe_machine() -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"python {platform.python_version()} on {platform.machine()}, cpus={cpus}"


def show(label: str, report: WorkersReport) -> None:
    print(
        f"{label}: {report.closed} of {report.closes} closed by {report.workers} workers in {report.seconds:.1f} s"
        f" ({report.closes_per_minute:.1f} closes a minute); problems {len(report.problems)}"
    )
    if report.reaction is not None and report.reaction.samples:
        print(
            f"  decision to the next gate: p50 {report.reaction.p50_s:.2f} s, p99 {report.reaction.p99_s:.2f} s"
            f" over {report.reaction.samples} gates"
        )
    sessions = "unknown" if report.sessions_opened is None else f"{report.sessions_opened:,}"
    print(
        f"  database sessions opened {sessions} (the drill's own included); most connected at once"
        f" {report.peak_connections}, of which workers {report.peak_worker_connections}"
    )
    if report.idle is not None:
        idle = report.idle
        print(
            f"  idle window {idle.seconds:.0f} s with {idle.waiting_runs} runs waiting on people:"
            f" {idle.commits} commits ({idle.commits_per_s:.1f}/s), {idle.ready_jobs} jobs ready or running"
        )
    for problem in report.problems[:5]:
        print(f"  problem: {problem[:300]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--closes", type=int, default=500)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--blocked", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="2 closes, 2 workers, 2 blocked; no verdict (make test)")
    args = parser.parse_args(argv)
    smoke = (2, 2, 2, 1.0, 0.0)
    full = (args.closes, args.workers, args.blocked, 10.0, 11.0)
    closes, workers, blocked, idle_s, settle_s = smoke if args.smoke else full
    signal.signal(signal.SIGALRM, _abort)
    signal.alarm(ABORT_AFTER_SECONDS)
    print(describe_machine())
    database: Database | None = None
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        root = Path(tmp)
        try:
            database = start_embedded(root / "pgdata", cleanup_mode="delete")
            migrate.upgrade(database)
            settings = Settings(
                database_url=database.owner_url,
                state_dir=root / "state",
                config_dir=PROJECT_ROOT / "config",
                callback_secret=secrets.token_urlsafe(16),
            )
            # the drill's worker processes read the same configuration from their environment
            os.environ.update(
                {
                    "DATABASE_URL": database.owner_url,
                    "COUNTERSIGN_STATE_DIR": str(root / "state"),
                    "COUNTERSIGN_CONFIG_DIR": str(PROJECT_ROOT / "config"),
                }
            )
            policy, workflows = load_rules_all(settings)
            rt = Runtime(settings, database, policy, workflows)

            started = time.perf_counter()
            reports: list[tuple[str, WorkersReport]] = []
            baseline = None
            if not args.smoke:
                baseline = run_workers_drill(rt, closes=1, workers=1, timeout_s=TIMEOUT_S)
                show("baseline, one close on one worker", baseline)
                reports.append(("baseline", baseline))
            many = run_workers_drill(rt, closes=closes, workers=workers, timeout_s=TIMEOUT_S)
            show(f"{closes} closes on {workers} workers", many)
            reports.append(("many", many))
            if baseline is not None and baseline.closes_per_minute > 0:
                print(f"  ratio closes a minute / baseline: {many.closes_per_minute / baseline.closes_per_minute:.1f}x")
            empty = None
            if not args.smoke:
                empty = run_workers_drill(
                    rt, closes=0, workers=workers, timeout_s=TIMEOUT_S, decide=False, idle_s=idle_s, settle_s=settle_s
                )
                show("no close at all (the workers' own cost)", empty)
                reports.append(("empty", empty))
            waiting = run_workers_drill(
                rt, closes=blocked, workers=workers, timeout_s=TIMEOUT_S, decide=False, idle_s=idle_s, settle_s=settle_s
            )
            show(f"{blocked} closes waiting on people", waiting)
            reports.append(("waiting", waiting))
            if empty is not None and empty.idle is not None and waiting.idle is not None and empty.idle.commits:
                ratio = waiting.idle.commits / empty.idle.commits
                print(f"  ratio idle commits with {blocked} waiting runs / with none: {ratio:.2f}x")
            print(f"bench wall time {time.perf_counter() - started:.0f} s")
            for label, report in reports:
                problems += [f"{label}: {p[:300]}" for p in report.problems]
                if not report.passed:
                    problems.append(f"{label}: the drill did not pass")
            print("smoke run, not timed" if args.smoke else "figures for docs/benchmarks.md")
        except (BenchAborted, KeyboardInterrupt) as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            stop_embedded(database)
            signal.alarm(0)
    return exit_code(problems)


if __name__ == "__main__":
    sys.exit(main())
