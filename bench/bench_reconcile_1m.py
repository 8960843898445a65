"""Benchmark: synthesise 1,000,000 GL lines (large profile) and bank-reconcile them.

Run: .venv/bin/python bench/bench_reconcile_1m.py [--smoke]
Prints synthesis time, reconciliation time (CSV load + matching), lines/s and a same-run baseline: the time to
merely parse the same CSV rows with the csv module. `--smoke` synthesises 5,000 GL lines and gives no timing
verdict (exit 1 only on a wrong match): make test runs it so the bench cannot rot. Bounded: aborts itself after
ABORT_AFTER_SECONDS.
"""

from __future__ import annotations

import argparse
import csv
import platform
import signal
import sys
import tempfile
import time
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from countersign.specialists.reconciliation import CashLine, handle, match_bank_lines  # noqa: E402
from countersign.synthetic import generate_books, load_profile, read_ground_truth  # noqa: E402

SEED = 42
WINDOW_DAYS = 3
ABORT_AFTER_SECONDS = 600
SMOKE_GL_LINES = 5_000


def read_cash_lines(path: Path, id_column: str, accounts: set[str] | None) -> dict[str, list[CashLine]]:
    """Lines on `accounts` grouped by account; accounts=None pools every row under one key."""
    by_account: dict[str, list[CashLine]] = {account: [] for account in accounts or ("*",)}
    with path.open(encoding="utf-8", newline="") as handle_:
        reader = csv.reader(handle_)
        header = next(reader)
        id_at, account_at = header.index(id_column), header.index("account")
        date_at, amount_at, reference_at = (
            header.index("date"),
            header.index("amount"),
            header.index("reference"),
        )
        fromisoformat = date.fromisoformat
        for row in reader:
            lines = by_account.get(row[account_at]) if accounts is not None else by_account["*"]
            if lines is not None:
                lines.append(
                    CashLine(row[id_at], fromisoformat(row[date_at]), Decimal(row[amount_at]), row[reference_at])
                )
    return by_account


def parse_only(paths: list[Path]) -> int:
    rows = 0
    for path in paths:
        with path.open(encoding="utf-8", newline="") as handle_:
            for _ in csv.reader(handle_):
                rows += 1
    return rows


def wire(lines: list[CashLine]) -> list[dict[str, str]]:
    return [{"id": x.id, "date": x.date.isoformat(), "amount": str(x.amount), "reference": x.reference} for x in lines]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="tiny size, no timing verdict (make test)")
    args = parser.parse_args(argv)
    if hasattr(signal, "alarm"):
        signal.alarm(ABORT_AFTER_SECONDS)
    profile = load_profile(REPO_ROOT / "config" / "profiles" / "large.yaml")
    print(f"python {platform.python_version()} on {platform.machine()}, cpus={_cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        out = Path(tmp)
        started = time.perf_counter()
        manifest = generate_books(profile, SEED, out, gl_lines=SMOKE_GL_LINES if args.smoke else None)
        synthesis_s = time.perf_counter() - started
        print(
            f"synthesis: {manifest.gl_line_count:,} GL lines in {synthesis_s:.2f} s "
            f"({manifest.gl_line_count / synthesis_s:,.0f} lines/s)"
        )

        accounts = set(profile.bank_accounts)
        gl_path, bank_path = out / "gl_lines.csv", out / "corrected" / "bank_lines.csv"

        started = time.perf_counter()
        parsed_rows = parse_only([gl_path, bank_path])
        baseline_s = time.perf_counter() - started

        started = time.perf_counter()
        gl = read_cash_lines(gl_path, "line_id", accounts)
        bank = read_cash_lines(bank_path, "bank_line_id", accounts)
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        results = {account: match_bank_lines(bank[account], gl[account], WINDOW_DAYS) for account in sorted(accounts)}
        match_s = time.perf_counter() - started
        reconciliation_s = load_s + match_s

        bank_count = sum(len(lines) for lines in bank.values())
        gl_cash_count = sum(len(lines) for lines in gl.values())
        matched = sum(len(result.matches) for result in results.values())
        truth = read_ground_truth(out)["expected"]["bank_reconciliation_corrected"]
        if matched != sum(entry["matched"] for entry in truth.values()) or matched != bank_count:
            print(f"FAIL: matched {matched} of {bank_count} bank lines; ground truth disagrees")
            return 1

        started = time.perf_counter()
        every_gl_line = [line for lines in read_cash_lines(gl_path, "line_id", None).values() for line in lines]
        every_bank_line = [line for lines in bank.values() for line in lines]
        pooled = match_bank_lines(every_bank_line, every_gl_line, WINDOW_DAYS)
        pooled_s = time.perf_counter() - started
        if len(pooled.matches) != bank_count:
            print(f"FAIL: pooled match found {len(pooled.matches)} of {bank_count}")
            return 1
        del every_gl_line

        payload: dict[str, Any] = {
            "kind": "bank",
            "date_window_days": WINDOW_DAYS,
            "unmatched_tolerance": "0.55",
            "accounts": [
                {"account": a, "bank_lines": wire(bank[a]), "gl_lines": wire(gl[a])} for a in sorted(accounts)
            ],
        }
        started = time.perf_counter()
        reply = handle(payload)
        handle_s = time.perf_counter() - started
        if reply["halted"]:
            print(f"FAIL: corrected feed halted: {reply['halt_reason']}")
            return 1

    print(f"baseline: csv.reader parse of the same {parsed_rows:,} rows (GL + bank) in {baseline_s:.2f} s")
    print(
        f"reconciliation: {bank_count:,} bank lines vs {gl_cash_count:,} GL cash lines "
        f"(of {manifest.gl_line_count:,} GL lines read): load {load_s:.2f} s + match {match_s:.2f} s "
        f"= {reconciliation_s:.2f} s ({manifest.gl_line_count / reconciliation_s:,.0f} GL lines/s)"
    )
    print(f"matched: {matched:,} of {bank_count:,} bank lines (100%)")
    print(f"ratio reconciliation / csv-parse baseline: {reconciliation_s / baseline_s:.2f}x")
    print(
        f"stress: {bank_count:,} bank lines vs all {manifest.gl_line_count:,} GL lines in one pool "
        f"(load + match): {pooled_s:.2f} s, {len(pooled.matches):,} matched"
    )
    print(f"specialist handle() on the same lines as a JSON-shaped payload: {handle_s:.2f} s")
    total_s = synthesis_s + reconciliation_s
    verdict = "smoke run, not timed" if args.smoke else "PASS" if total_s < 60 else "FAIL"
    print(f"synthesis + reconciliation: {total_s:.2f} s (target < 60 s): {verdict}")
    return 1 if verdict == "FAIL" else 0


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
