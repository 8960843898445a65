"""The ledger-import benchmark runs at a tiny size on every `make test`, so it cannot rot unnoticed. Nothing is
timed here: the figures belong in docs/benchmarks.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_books_import.py"


def test_the_import_benchmark_runs_and_reports_both_arms() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--lines", "1000"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "input: 1,000 GL lines" in done.stdout
    assert "baseline" in done.stdout and "import" in done.stdout and "ratio import / baseline" in done.stdout
