"""Every benchmark under bench/ has a smoke run in `make test` (issue 25): a benchmark nobody runs rots unnoticed, as
`bench_trace.py --skip-appends` did. A new bench/bench_*.py without an entry here or in a smoke table fails."""

from __future__ import annotations

from pathlib import Path

from tests.bench.test_bench_smoke_pure import SMOKE as PURE
from tests.bench.test_bench_smoke_services import SMOKE as SERVICES

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"

# Benchmarks whose smoke run lives beside the code they measure.
SMOKED_ELSEWHERE = {
    "bench_books_import.py": "tests/importers/test_bench_books_import.py",
    "bench_cli_start.py": "tests/cli/test_cli_start.py",
    "bench_close_1m.py": "tests/bench/test_bench_smoke_close.py",
    "bench_workers.py": "tests/bench/test_bench_smoke_workers.py",
}


def smoked() -> dict[str, str]:
    where = {name: "tests/bench/test_bench_smoke_pure.py" for name in PURE}
    where.update({name: "tests/bench/test_bench_smoke_services.py" for name in SERVICES})
    where.update(SMOKED_ELSEWHERE)
    return where


def test_every_benchmark_has_a_smoke_run() -> None:
    benches = {path.name for path in BENCH_DIR.glob("bench_*.py")}
    assert benches, "no benchmark found under bench/"
    missing = sorted(benches - set(smoked()))
    assert not missing, f"benchmarks with no smoke run in make test: {missing} (add them to a SMOKE table)"
    gone = sorted(set(smoked()) - benches)
    assert not gone, f"smoke entries for benchmarks that no longer exist: {gone}"


def test_the_smoke_runs_said_to_live_elsewhere_run_their_benchmark() -> None:
    root = BENCH_DIR.parent
    for bench, test_file in SMOKED_ELSEWHERE.items():
        assert bench in (root / test_file).read_text(encoding="utf-8"), f"{test_file} does not run bench/{bench}"
