"""The workers benchmark (bench/bench_workers.py) runs at a tiny size on every `make test`: two closes on two worker
processes decided by scripted people, and two closes nobody decides watched for a second, on its own embedded
PostgreSQL, with the drill's own checks (every effect once, the waiting runs with no job ready). Nothing is timed
here: the figures belong in docs/benchmarks.md."""

from __future__ import annotations

from tests.bench.smoke import run_smoke

TIMEOUT_S = 300
EXPECTED = (
    "2 closes on 2 workers: 2 of 2 closed by 2 workers",
    "decision to the next gate: p50",
    "2 closes waiting on people: 0 of 2 closed by 2 workers",
    "idle window 1 s with 2 runs waiting on people:",
    "0 jobs ready or running",
    "smoke run, not timed",
    "embedded postgres stopped",
)


def test_the_workers_benchmark_runs_at_a_tiny_size_and_checks_itself() -> None:
    run_smoke("bench_workers.py", ["--smoke"], EXPECTED, timeout_s=TIMEOUT_S)
