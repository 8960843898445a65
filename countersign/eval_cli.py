"""`countersign eval`: evals that grade the close's rules. Needs no database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from policy import PolicyError, UnknownTierError
from policy.errors import GateInputError
from policy.gate_eval import EvalReport, load_cases, negative_control, run_gate_eval

from .runtime import load_rules
from .settings import load_settings

EVAL_HELP = "Evals that grade the close's rules against hand-written expectations."
eval_app = typer.Typer(help=EVAL_HELP, no_args_is_help=True)

console = Console(highlight=False, soft_wrap=True)  # one line per case, whatever the terminal width
err = Console(stderr=True, highlight=False, soft_wrap=True)
SHOWN_CONTROL_FAILURES = 3


@eval_app.callback()
def eval_group() -> None:
    """Evals that grade the close's rules against hand-written expectations."""


@eval_app.command("gates")
def gates(
    cases: Annotated[
        Path | None, typer.Option("--cases", help="Case table (default: config/evals/gate_cases.yaml).")
    ] = None,
    control_tier: Annotated[
        str, typer.Option("--control-tier", help="Tier whose gate the negative control deletes.")
    ] = "medium",
) -> None:
    """Check derived gates against the case table; a policy with one tier's gate deleted must fail it."""
    settings = load_settings()
    cases_path = cases or settings.config_dir / "evals" / "gate_cases.yaml"
    try:
        policy, checklist = load_rules(settings)
        table = load_cases(cases_path)
        report = run_gate_eval(policy, checklist, table)
        control = negative_control(policy, checklist, table, tier=control_tier)
    except (PolicyError, GateInputError, UnknownTierError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc

    print_eval(report, cases_path)
    print_control(control, control_tier)
    if not report.passed:
        err.print("[bold red]the eval is wrong:[/] derived gates disagree with the case table")
        raise typer.Exit(1)
    if control.passed:
        err.print(
            f"[bold red]the negative control is wrong:[/] the cases still pass with tier "
            f"{escape(control_tier)}'s gate deleted, so they cannot detect a missing gate"
        )
        raise typer.Exit(1)


def print_eval(report: EvalReport, cases_path: Path) -> None:
    where = escape(str(cases_path))
    if report.passed:
        console.print(f"gate eval: [bold green]GREEN[/] {report.cases}/{report.cases} cases passed ({where})")
        return
    passed = report.cases - len(report.failures)
    console.print(f"gate eval: [bold red]RED[/] {passed}/{report.cases} cases passed ({where})")
    for failure in report.failures:
        console.print(f"  {escape(failure.describe())}")


def print_control(control: EvalReport, tier: str) -> None:
    label = f"negative control (tier {escape(tier)} gate deleted)"
    if control.passed:
        console.print(f"{label}: [bold red]GREEN[/] all {control.cases} cases passed; it should have failed")
        return
    console.print(
        f"{label}: [bold green]RED[/] as it should be, with {len(control.failures)} failures of {control.cases} cases"
    )
    for failure in control.failures[:SHOWN_CONTROL_FAILURES]:
        console.print(f"  {escape(failure.describe())}")
    hidden = len(control.failures) - SHOWN_CONTROL_FAILURES
    if hidden > 0:
        console.print(f"  ... and {hidden} more")
