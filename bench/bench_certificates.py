"""Benchmark: 10,000 interim certificates across 500 contracts, reconstructed and checked against the 16 invariants.

Run: .venv/bin/python bench/bench_certificates.py [--smoke]
Generates the construction profile at 500 contracts x 20 months (plus the seeded re-submissions), then times:
  baseline  reading the same files with json (what any consumer pays to read them),
  parse     reading them into the domain's frozen dataclasses (money and quantities as exact integers),
  check     the pipeline: duplicate check, then every contract's cumulative position rebuilt in order with all
            sixteen invariants on every certificate.
Prints a markdown block with the ratio to the baseline. Target: parse + check under 30 s on 2 cores.
`--smoke` runs 20 contracts x 12 months and gives no timing verdict (exit 1 only if a seeded fault or re-submission is
missed): make test runs it so the bench cannot rot. Bounded: aborts itself after ABORT_AFTER_SECONDS.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from countersign.certificates import INVARIANTS, parse_certificate, parse_contract  # noqa: E402
from countersign.certificates.pipeline import run_pipeline  # noqa: E402
from countersign.synthetic.construction import CERTIFICATES_FILE, CONTRACTS_FILE, generate_construction  # noqa: E402
from countersign.synthetic.construction_profile import load_construction_profile  # noqa: E402
from countersign.synthetic.ground_truth import GROUND_TRUTH_FILE  # noqa: E402

SEED = 404
CONTRACTS = 500
MONTHS = 20
TARGET_S = 30.0
ABORT_AFTER_SECONDS = 600
SMOKE_CONTRACTS = 20
SMOKE_MONTHS = 12


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="tiny size, no timing verdict (make test)")
    args = parser.parse_args(argv)
    n_contracts, n_months = (SMOKE_CONTRACTS, SMOKE_MONTHS) if args.smoke else (CONTRACTS, MONTHS)
    if hasattr(signal, "alarm"):
        signal.alarm(ABORT_AFTER_SECONDS)
    profile = load_construction_profile(REPO_ROOT / "config" / "profiles" / "construction.yaml")
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        out = Path(tmp)
        started = time.perf_counter()
        manifest = generate_construction(profile, SEED, out, contracts=n_contracts, months=n_months)
        synthesis_s = time.perf_counter() - started

        started = time.perf_counter()
        raw_contracts = json.loads((out / CONTRACTS_FILE).read_text(encoding="utf-8"))["contracts"]
        with (out / CERTIFICATES_FILE).open(encoding="utf-8") as handle:
            raw_certificates = [json.loads(line) for line in handle]
        baseline_s = time.perf_counter() - started
        del raw_contracts, raw_certificates

        started = time.perf_counter()
        document = json.loads((out / CONTRACTS_FILE).read_text(encoding="utf-8"))
        contracts = {c.id: c for c in (parse_contract(item) for item in document["contracts"])}
        with (out / CERTIFICATES_FILE).open(encoding="utf-8") as handle:
            certificates = [parse_certificate(json.loads(line)) for line in handle]
        parse_s = time.perf_counter() - started

        started = time.perf_counter()
        run = run_pipeline(contracts, certificates)
        check_s = time.perf_counter() - started

        truth = json.loads((out / GROUND_TRUTH_FILE).read_text(encoding="utf-8"))
    faulted = {fault["certificate"] for fault in truth["faults"]}
    flagged = {a.certificate.id for a in run.assessments if not a.certified}
    held = {hold.certificate for hold in run.holds}
    duplicates = {d["certificate"] for d in truth["duplicates"]}
    checks = sum(len(a.results) for a in run.assessments)
    total_s = parse_s + check_s
    caught_all = faulted <= flagged and duplicates <= held
    if args.smoke:
        verdict = "smoke run, not timed" if caught_all else "FAIL"
    else:
        verdict = "PASS" if total_s < TARGET_S and caught_all else "FAIL"
    print("```")
    print(f"python {platform.python_version()} on {platform.machine()}, cpus={_cpu_count()}")
    print(
        f"data: {manifest.certificates:,} monthly certificates across {manifest.contracts} contracts "
        f"+ {manifest.duplicates} re-submissions; {manifest.faults} seeded faults; synthesis {synthesis_s:.2f} s"
    )
    print(f"baseline: json read of the same files in {baseline_s:.2f} s")
    print(f"parse into the domain: {parse_s:.2f} s")
    print(
        f"check: {len(run.assessments):,} certificates reconstructed x {len(INVARIANTS)} invariants "
        f"({checks:,} checks) + duplicate check of {len(certificates):,} in {check_s:.2f} s "
        f"({len(run.assessments) / check_s:,.0f} certificates/s)"
    )
    print(
        f"caught: {len(faulted & flagged)}/{len(faulted)} seeded faults, "
        f"{len(duplicates & held)}/{len(duplicates)} re-submissions; "
        f"{len(flagged - faulted)} other certificates held by an invariant, {len(held - duplicates)} other holds"
    )
    print(f"ratio (parse + check) / json baseline: {total_s / baseline_s:.1f}x")
    print(f"parse + check: {total_s:.2f} s (target < {TARGET_S:.0f} s): {verdict}")
    print("```")
    return 1 if verdict == "FAIL" else 0


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
