"""Run one benchmark as its own process at a tiny size and check what it printed (the smoke runs in make test)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def run_smoke(script: str, args: Sequence[str], expected: Sequence[str], *, timeout_s: float) -> str:
    """Run `bench/<script> <args>` from the project root; fail unless it exits 0, prints no `FAIL` and prints every
    line of `expected`. Returns what it printed."""
    done = subprocess.run(
        [sys.executable, str(BENCH_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=BENCH_DIR.parent,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "FAIL" not in done.stdout, done.stdout[-3000:]
    missing = [line for line in expected if line not in done.stdout]
    assert not missing, f"{script} did not print {missing}\n{done.stdout[-3000:]}"
    return done.stdout
