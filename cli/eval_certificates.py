"""`countersign eval certificates`: the invariant engine and the duplicate detector against seeded ground truth."""

from __future__ import annotations

import json
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from certificates import INVARIANTS, CertificateDataError, sweep
from certificates.pipeline import run_pipeline
from countersign.settings import load_settings
from evals.certificate_files import read_certificates, read_contracts, read_ground_truth
from evals.certificates import TARGET_PRECISION, TARGET_RECALL, CertificateEvalReport, GroundTruthError, evaluate
from synthetic import ProfileError
from synthetic.construction import generate_construction
from synthetic.construction_profile import load_construction_profile

console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

CONSTRUCTION_PROFILE = "construction"
DEFAULT_SEED = 101
NOT_MEASURED = (
    "measures the deterministic invariant engine and the duplicate detector against the generator's seeded ground "
    "truth; it does NOT measure extraction precision on real scans, retrieval of clauses, or calibration"
)


def certificates_command(
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the generated contracts and certificates.")
    ] = DEFAULT_SEED,
    data: Annotated[
        Path | None, typer.Option("--data", help="Use this construction data directory instead of generating one.")
    ] = None,
    disable: Annotated[
        str | None,
        typer.Option("--disable", help="Negative control: run with this invariant switched off (must exit 1)."),
    ] = None,
    contracts: Annotated[int | None, typer.Option("--contracts", help="Override the profile's contracts.")] = None,
    months: Annotated[int | None, typer.Option("--months", help="Override the profile's months.")] = None,
    show_sweep: Annotated[
        bool, typer.Option("--sweep", help="Also print the duplicate detector's precision/recall sweep.")
    ] = False,
) -> None:
    """Per-invariant confusion matrix and duplicate detector scores; exit 1 when a target is missed."""
    if disable is not None and disable not in INVARIANTS:
        err.print(f"[bold red]error:[/] unknown invariant {escape(disable)!r}; known: {', '.join(INVARIANTS)}")
        raise typer.Exit(2)
    try:
        if data is not None:
            report, sweep_rows = _run(data, disable, show_sweep)
            source = str(data)
        else:
            with tempfile.TemporaryDirectory(prefix="countersign-certificates-") as scratch:
                _generate(Path(scratch), seed, contracts, months)
                report, sweep_rows = _run(Path(scratch), disable, show_sweep)
            source = f"seed {seed}"
    except (ProfileError, CertificateDataError, GroundTruthError, OSError, ValueError, KeyError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc

    print_report(report, source)
    if sweep_rows is not None:
        print_sweep(sweep_rows)
    failures = report.failures()
    if disable is not None:
        if failures:
            console.print(f"negative control ({escape(disable)} disabled): [bold green]RED[/] as it should be")
            for failure in failures:
                console.print(f"  {escape(failure)}")
            raise typer.Exit(1)
        err.print(
            f"[bold red]the negative control is wrong:[/] every target is still met with {escape(disable)} disabled"
        )
        return
    if failures:
        console.print("certificate eval: [bold red]RED[/]")
        for failure in failures:
            console.print(f"  {escape(failure)}")
        raise typer.Exit(1)
    console.print("certificate eval: [bold green]GREEN[/] every target met")


def _generate(out: Path, seed: int, contracts: int | None, months: int | None) -> None:
    settings = load_settings()
    profile = load_construction_profile(settings.profile_path(CONSTRUCTION_PROFILE))
    corpus_path = settings.config_dir / "clauses" / "corpus.json"
    corpus: dict[str, Any] | None = None
    if corpus_path.exists():
        corpus = json.loads(corpus_path.read_text(encoding="utf-8"))
    generate_construction(profile, seed, out, contracts=contracts, months=months, clause_corpus=corpus)


def _run(data: Path, disable: str | None, show_sweep: bool) -> tuple[CertificateEvalReport, Any]:
    contracts = read_contracts(data)
    certificates = read_certificates(data)
    truth = read_ground_truth(data)
    report = evaluate(contracts, certificates, truth, disabled=disable)
    rows = None
    if show_sweep:
        certified = run_pipeline(contracts, certificates).certified
        rows = sweep(certificates, truth.duplicates, comparable=certified)
    return report, rows


def _fmt(value: Decimal | None) -> str:
    return "    n/a" if value is None else f"{value:>7.3f}"


def print_report(report: CertificateEvalReport, source: str) -> None:
    console.print(
        f"certificate eval ({escape(source)}: {report.certificates} certificates, {report.assessed} reached "
        f"reconstruction): {NOT_MEASURED}."
    )
    console.print(f"targets: recall >= {TARGET_RECALL} and precision >= {TARGET_PRECISION} on every seeded class")
    console.print(f"  {'invariant':<46} {'TP':>5} {'FP':>5} {'FN':>5} {'TN':>6} {'prec':>7} {'recall':>7}")
    for row in report.confusion:
        name = row.invariant + (" (disabled)" if row.disabled else "")
        console.print(
            f"  {name:<46} {row.true_positives:>5} {row.false_positives:>5} {row.false_negatives:>5} "
            f"{row.true_negatives:>6} {_fmt(row.precision)} {_fmt(row.recall)}"
        )
    console.print(
        f"  {'seeded class':<26} {'deciding invariant':<46} {'seeded':>6} {'caught':>6} {'prec':>7} {'recall':>7}"
    )
    for score in report.classes:
        console.print(
            f"  {score.fault_class:<26} {score.invariant:<46} {score.seeded:>6} {score.caught:>6} "
            f"{_fmt(score.precision)} {_fmt(score.recall)}"
        )
    console.print(f"  {'crafted violations':<46} {'planted':>7} {'caught':>6}")
    for crafted in report.crafted:
        console.print(f"  {crafted.invariant:<46} {crafted.planted:>7} {crafted.caught:>6}")
    duplicates = report.duplicates
    thresholds = duplicates.thresholds
    console.print(
        f"duplicate detector (amount within {thresholds.amount_tolerance:.1%}, {thresholds.date_window_days} days, "
        f"similarity >= {thresholds.similarity}): TP {duplicates.true_positives} FP {duplicates.false_positives} "
        f"FN {duplicates.false_negatives} precision {_fmt(duplicates.precision).strip()} "
        f"recall {_fmt(duplicates.recall).strip()}"
    )


def print_sweep(rows: Any) -> None:
    console.print("| similarity >= | amount within | held | TP | FP | FN | precision | recall |")
    console.print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        console.print(
            f"| {row.similarity:.2f} | {row.amount_tolerance:.1%} | {row.held} | {row.true_positives} | "
            f"{row.false_positives} | {row.false_negatives} | {row.precision:.3f} | {row.recall:.3f} |"
        )
