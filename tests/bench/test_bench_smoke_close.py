"""The million-line close benchmark (bench/bench_close_1m.py) runs at a tiny size on every `make test`: about 2,000
GL lines from `close start` to the first gates on its own embedded PostgreSQL, the bank reconciliation forced onto its
paged path with 50 ambiguous groups for a page, with the benchmark's own checks (ground truth, no dead letter, no A2A
body over the page bound). Nothing is timed here: the figures belong in docs/benchmarks.md."""

from __future__ import annotations

from tests.bench.smoke import run_smoke

TIMEOUT_S = 180
EXPECTED = (
    "close halted, 3 open gates",
    "bank account 1000: 17 bank / 467 GL lines, 0 matched (0 in the database, 0 pages)",
    "bank lines of account 1010 duplicated (ambiguous groups for pages): 50",
    "bank account 1010: 154 bank / 108 GL lines, 104 matched (54 in the database, 1 pages)",
    "baseline: 2,000 GL lines read back with COPY TO STDOUT",
    "ratio (close start + first advance) / read-back:",
    "smoke run, not timed",
    "embedded postgres stopped",
)


def test_the_million_line_close_benchmark_runs_at_a_tiny_size_and_checks_itself() -> None:
    run_smoke("bench_close_1m.py", ["--smoke"], EXPECTED, timeout_s=TIMEOUT_S)
