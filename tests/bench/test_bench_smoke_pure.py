"""The pure benchmarks (no database, no services) run at a tiny size on every `make test`, so none can rot unnoticed.

Each runs as its own process, as a person would run it, with its `--smoke` flag: tiny sizes and no timing verdict.
Nothing is timed here: the figures belong in docs/benchmarks.md.
"""

from __future__ import annotations

import pytest

from tests.bench.smoke import BENCH_DIR, run_smoke

SMOKE: dict[str, list[str]] = {
    "bench_certificates.py": ["--smoke"],
    "bench_duplicates.py": ["--smoke"],
    "bench_reconcile_1m.py": ["--smoke"],
    "bench_retrieval.py": ["--smoke"],
}
"""Each bench this file covers, with the arguments of its smoke run."""

PROOF: dict[str, tuple[str, ...]] = {
    "bench_certificates.py": (
        "monthly certificates across 20 contracts",
        "ratio (parse + check) / json baseline:",
        "smoke run, not timed",
    ),
    "bench_duplicates.py": (
        "| window | similarity >= | amount within | held | TP | FP | FN | precision | recall |",
        "| re-submission: as generated |",
        "| seed | contracts | certificates | re-submissions | held against the original | legitimate held |",
    ),
    "bench_reconcile_1m.py": (
        "synthesis: 5,000 GL lines",
        "matched: ",
        "ratio reconciliation / csv-parse baseline:",
        "smoke run, not timed",
    ),
    "bench_retrieval.py": (
        "| corpus | clauses | index build | filter |",
        "| scaled | 200 |",
        "smoke run, not judged",
    ),
}
"""Lines that prove the bench ran through to its table."""

TIMEOUT_S = 120


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_the_benchmark_runs_at_a_tiny_size_and_prints_its_table(name: str) -> None:
    run_smoke(name, SMOKE[name], PROOF[name], timeout_s=TIMEOUT_S)


def test_every_bench_here_has_its_proof_and_exists() -> None:
    assert set(PROOF) == set(SMOKE)
    for name in SMOKE:
        assert (BENCH_DIR / name).is_file(), name
