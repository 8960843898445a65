"""The duplicate detector's threshold sweep on vendor data with issue 22's variations (docs/benchmarks.md).

Run: .venv/bin/python bench/bench_duplicates.py [--smoke]
Generates the construction profile at 60 contracts x 20 months for each held-out seed, varies it
(tests/certificates/duplicate_variations.py: legal forms, inflated full overlap, late and same-day re-submissions;
corrections, sister releases and per-contract numbering as legitimate look-alikes), and scores the detector's holds
against the seeded re-submissions. Each certificate is compared with the earlier ones the pipeline certified, as the
engine compares with those not rejected at their payment gate. Prints markdown: the grid (similarity x amount
tolerance) under each contract's own window, the operating point under fixed windows, recall per variation and holds
per look-alike. Then, at the operating point, the structurally different second-style generator (ADR 0032) on its
held-out seeds, as it is: re-submissions held against the right original, and legitimate certificates held (with the
tricky kinds that generator gave them). Counts only: nothing here is timed. `--smoke` runs one seed at 10 contracts x 12
months and one 20-contract second-style run: make test runs it so the bench cannot rot. Bounded: aborts itself after
ABORT_AFTER_SECONDS.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from countersign.certificates.duplicates import (  # noqa: E402
    AMOUNT_TOLERANCE,
    DATE_WINDOW_DAYS,
    SIMILARITY_THRESHOLD,
    SweepRow,
    Thresholds,
    detect_submissions,
    submissions_of,
    sweep,
)
from countersign.certificates.pipeline import run_pipeline  # noqa: E402
from countersign.evals.certificate_files import read_certificates, read_contracts, read_ground_truth  # noqa: E402
from countersign.synthetic.construction_profile import load_construction_profile  # noqa: E402
from countersign.synthetic.construction_second_style import generate_second_style  # noqa: E402
from tests.certificates.duplicate_variations import LookAlike, Variation, VariedSet, vary  # noqa: E402
from tests.certificates.generated import TUNED_SEEDS, generate  # noqa: E402

SEEDS = (201, 202, 203, 204, 205)
CONTRACTS = 60
MONTHS = 20
FIXED_WINDOWS = (DATE_WINDOW_DAYS, 55, 120)
SECOND_STYLE_RUNS = ((9104, 250), (31415, 250), (12, 150))
"""(seed, contracts) of the second-style generator: its held-out seeds, and the one it showed a false hold on."""
ABORT_AFTER_SECONDS = 1200
SMOKE_SEEDS = SEEDS[:1]
SMOKE_CONTRACTS = 10
SMOKE_MONTHS = 12
SMOKE_SECOND_STYLE_RUNS = ((SECOND_STYLE_RUNS[0][0], 20),)


def _varied(seed: int, contracts: int, months: int) -> tuple[VariedSet, frozenset[str]]:
    with tempfile.TemporaryDirectory(prefix="countersign-duplicates-") as tmp:
        data = generate(Path(tmp), seed, contracts=contracts, months=months)
    varied = vary(data.contracts, data.certificates, data.truth.duplicates, seed)
    return varied, run_pipeline(varied.contracts, varied.certificates).certified


def _summed(tables: list[tuple[SweepRow, ...]]) -> list[SweepRow]:
    rows = []
    for same in zip(*tables, strict=True):
        first = same[0]
        rows.append(
            SweepRow(
                first.similarity,
                first.amount_tolerance,
                sum(r.held for r in same),
                sum(r.true_positives for r in same),
                sum(r.false_positives for r in same),
                sum(r.false_negatives for r in same),
            )
        )
    return rows


def _row(label: str, row: SweepRow) -> str:
    return (
        f"| {label} | {row.similarity:.2f} | {row.amount_tolerance:.1%} | {row.held} | {row.true_positives} | "
        f"{row.false_positives} | {row.false_negatives} | {row.precision:.3f} | {row.recall:.3f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="one seed at a tiny size (make test)")
    args = parser.parse_args(argv)
    seeds, contracts, months = (
        (SMOKE_SEEDS, SMOKE_CONTRACTS, SMOKE_MONTHS) if args.smoke else (SEEDS, CONTRACTS, MONTHS)
    )
    if hasattr(signal, "alarm"):
        signal.alarm(ABORT_AFTER_SECONDS)
    assert not set(SEEDS) & set(TUNED_SEEDS)
    sets = [_varied(seed, contracts, months) for seed in seeds]
    duplicates = sum(len(v.duplicates) for v, _ in sets)
    look_alikes = Counter(kind for v, _ in sets for kind in v.look_alikes.values())
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; seeds {seeds} "
        f"(held out: tuned on {TUNED_SEEDS}), {contracts} contracts x {months} months each"
    )
    print(
        f"data: {sum(len(v.certificates) for v, _ in sets)} certificates, {duplicates} seeded re-submissions, "
        + ", ".join(f"{count} {kind}" for kind, count in sorted(look_alikes.items()))
    )
    print()
    print("Each contract's own window (declared, else due + final date + 2 valuation periods: 86 days here):")
    print()
    print("| window | similarity >= | amount within | held | TP | FP | FN | precision | recall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    grid = _summed(
        [sweep(v.certificates, v.duplicates, comparable=certified, contracts=v.contracts) for v, certified in sets]
    )
    for row in grid:
        print(_row("contract's", row))
    print()
    print(
        f"The operating point (similarity >= {SIMILARITY_THRESHOLD}, amount within {AMOUNT_TOLERANCE:.0%}) "
        "under fixed windows:"
    )
    print()
    print("| window | similarity >= | amount within | held | TP | FP | FN | precision | recall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for days in FIXED_WINDOWS:
        fixed = _summed(
            [
                sweep(
                    v.certificates,
                    v.duplicates,
                    similarities=(SIMILARITY_THRESHOLD,),
                    amount_tolerances=(AMOUNT_TOLERANCE,),
                    date_window_days=days,
                    comparable=certified,
                    contracts=v.contracts,
                )
                for v, certified in sets
            ]
        )
        print(_row(f"{days} days", fixed[0]))
    print()
    held_by_kind: Counter[str] = Counter()
    seeded_by_kind: Counter[str] = Counter()
    wrongly: Counter[str] = Counter()
    for varied, certified in sets:
        holds = detect_submissions(
            submissions_of(varied.certificates, varied.contracts), Thresholds(), comparable=certified
        )
        held = {hold.certificate: hold.other_certificate for hold in holds}
        for duplicate, original in varied.duplicates.items():
            kind = varied.variations[duplicate]
            seeded_by_kind[kind] += 1
            held_by_kind[kind] += held.get(duplicate) == original
        for certificate in held:
            if certificate in varied.look_alikes:
                wrongly[varied.look_alikes[certificate]] += 1
    print("At the operating point, per variation (held against the right original) and per look-alike (held):")
    print()
    print("| case | seeded | held |")
    print("|---|---:|---:|")
    for kind in Variation:
        print(f"| re-submission: {kind} | {seeded_by_kind[kind]} | {held_by_kind[kind]} |")
    for look in LookAlike:
        print(f"| legitimate: {look} | {look_alikes[look]} | {wrongly[look]} |")
    second_style(SMOKE_SECOND_STYLE_RUNS if args.smoke else SECOND_STYLE_RUNS)
    return 0


def second_style(runs: tuple[tuple[int, int], ...]) -> None:
    profile = load_construction_profile(REPO_ROOT / "config" / "profiles" / "construction-second-style.yaml")
    print()
    print("The second-style generator as it is (each contract's window, similarity >= 0.70, amount within 5 %):")
    print()
    print("| seed | contracts | certificates | re-submissions | held against the original | legitimate held |")
    print("|---:|---:|---:|---:|---:|---|")
    for seed, contracts in runs:
        with tempfile.TemporaryDirectory(prefix="countersign-duplicates-") as tmp:
            out = Path(tmp)
            generate_second_style(profile, seed, out, contracts=contracts)
            found, certificates, truth = read_contracts(out), read_certificates(out), read_ground_truth(out)
            tricky: dict[str, set[str]] = {}
            for case in json.loads((out / "ground_truth.json").read_text(encoding="utf-8")).get("tricky", []):
                tricky.setdefault(case["certificate"], set()).add(str(case.get("kind")))
        held = {hold.certificate: hold.other_certificate for hold in run_pipeline(found, certificates).holds}
        right = sum(1 for duplicate, original in truth.duplicates.items() if held.get(duplicate) == original)
        wrong = [", ".join(sorted(tricky.get(c, {"not marked tricky"}))) for c in held if c not in truth.duplicates]
        print(
            f"| {seed} | {contracts} | {len(certificates)} | {len(truth.duplicates)} | {right} | "
            f"{len(wrong)}{': ' + '; '.join(wrong) if wrong else ''} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
