"""The benchmarks that need PostgreSQL and HTTP (the trace, the signed callback, the attacked doors) run at a tiny
size on every `make test`, so none can rot unnoticed as `bench_trace.py --skip-appends` did (issue 25). Each starts
its own embedded PostgreSQL and, for the callbacks and doors, `countersign serve`. Nothing is timed here: the
figures belong in docs/benchmarks.md, and a missed speed target does not fail a smoke run."""

from __future__ import annotations

import pytest

from tests.bench.smoke import run_smoke

TIMEOUT_S = 180

SMOKE: dict[str, list[str]] = {
    "bench_trace.py": [
        "--writers", "2", "--events", "200", "--events-b1", "50", "--verify-events", "2000", "--new-events", "20",
        "--proofs", "10",
    ],
    "bench_callbacks.py": ["--decisions", "20", "--concurrency", "4", "--profile", "--growth-decisions", "10"],
    "bench_doors.py": ["--smoke"],
}  # fmt: skip

# What each run must print: proof that every phase ran to its table and its checks held.
EXPECTED: dict[str, list[str]] = {
    "bench_trace.py": [
        "| plain INSERT baseline, B=10 |",
        "| append_event + seal_pending per commit, B=1, 2 writers |",
        "| append_event + GroupSealer, B=10, 2 writers |",
        "| append_event + background sealer, B=1, 2 writers |",
        "verify ok=True, gap-free=True, pending left=0",
        "| same rows read in 5,000-row keyset pages, nothing done (baseline), 2,000 events |",
        "| same rows read streamed, as the verifier reads them, nothing done (baseline), 2,000 events |",
        "| verify_chain, 2,000 events |",
        "(ok=True,",
        "| verify_log (`trace verify`: chain + every signed root), 2,000 events |",
        "| CPU of the verify_log, 2,000 events | bench ",
        "| first checkpoint, 2,000 events (full read",
        "| checkpoint from the stored frontier, 2,063 events, 20 new |",
        "(extends=True)",
        "| sealer's lock held while signing from the frontier |",
        "| load_tree, 2,064 leaves |",
        "| consistency_proof (10 random) |",
    ],
    "bench_callbacks.py": [
        "decisions (HTTP): 20 of 20 requests",
        "healthz baseline (HTTP): 20 of 20 requests",
        "record_decision in-process (no HTTP, pool 10): 20 of 20 requests",
        "ratio decisions/s / healthz req/s:",
        "{'warmup': 200, 'bench': 20, 'direct': 20, 'growth': 10}",
        "cost growth, signed decisions, 10 -> 20:",
        "postgres functions by self time over every decision phase (250 decisions;",
        "public.admit_gate_decision",
        "signed decisions: ",
        "target >= 0.5 x /healthz and p99 < 100 ms:",
        "top 20 functions by own",  # --profile: py-spy's samples when it is installed, else cProfile's own time
    ],
    "bench_doors.py": [
        "baseline  decisions    3",
        "heads     decisions   13",
        "idle      decisions   13",
        "decisions recorded: 39 of 39",
        "smoke run: tiny sizes, time and RSS not judged",
    ],
}


@pytest.mark.parametrize("bench", sorted(SMOKE))
def test_the_benchmark_runs_at_a_tiny_size_and_prints_its_table(bench: str) -> None:
    printed = run_smoke(bench, SMOKE[bench], EXPECTED[bench], timeout_s=TIMEOUT_S)
    assert "embedded postgres stopped" in printed or "server stopped" in printed


def test_every_smoke_run_says_what_it_expects() -> None:
    assert set(EXPECTED) == set(SMOKE)
