"""The million-line close benchmark (bench/bench_close_1m.py) runs at a tiny size on every `make test`: 1,000 and then
2,000 GL lines (the two sizes its cost growth is printed from), each from `close start` to the first gates and on to
`closed` (scripted people sign every decision) on its own embedded PostgreSQL, the bank reconciliation forced onto its
paged path with ambiguous groups for a page, with the benchmark's own checks (ground truth, no dead letter, no A2A
body over the page bound, the close closed with every gate approved). Nothing is timed here: the figures belong in
docs/benchmarks.md."""

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
    "signed decisions (the corrected bank feed loaded first) in",
    "close closed, 0 open gates",
    "close start to closed:",
    "cost growth, close start to closed, 1,000 -> 2,000 GL lines:",
    "smoke run, not timed",
    "embedded postgres stopped",
)


def test_the_million_line_close_benchmark_runs_at_a_tiny_size_and_checks_itself() -> None:
    run_smoke("bench_close_1m.py", ["--smoke", "--growth-lines", "1000"], EXPECTED, timeout_s=TIMEOUT_S)
