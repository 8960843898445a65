"""`countersign drill`: adversarial drills against the configured database."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from countersign.cli.common import console, err, fail, runtime
from countersign.cli.progress import counter, spinner

drill_app = typer.Typer(help="Adversarial drills against the configured database.", no_args_is_help=True)


@drill_app.command("idempotency")
def drill_idempotency(
    retries: Annotated[int, typer.Option(help="Identical concurrent retries of one dispatch and its posting.")] = 36,
    processes: Annotated[int, typer.Option(help="Operating-system processes to spread them over.")] = 4,
    changed_storm: Annotated[bool, typer.Option(help="Then retry with a changed payload under the same key.")] = True,
) -> None:
    """Force a retry storm; print the database it ran against and the duplicates (there must be none)."""
    from countersign.scenarios.drills import NotPostgres, run_idempotency_drill

    rt = runtime()
    try:
        with spinner(f"retry storm: {retries} retries over {processes} processes"):
            report = run_idempotency_drill(rt, retries=retries, processes=processes, changed_storm=changed_storm)
    except NotPostgres as exc:
        fail(str(exc))
        return
    console.print(f"database: {report.server} at {report.host}, database {report.database}")
    table = Table("storm", "retries", "processes", "seconds", "created", "returned original", "refused", "errors")
    table.add_row(
        "identical",
        str(report.retries),
        str(report.processes),
        f"{report.seconds:.2f}",
        str(report.storm.created),
        str(report.storm.reused),
        str(report.storm.conflicts),
        str(len(report.storm.errors)),
    )
    if report.changed_storm is not None:
        c = report.changed_storm
        table.add_row(
            "changed payload",
            str(report.retries),
            str(report.processes),
            f"{report.changed_seconds:.2f}",
            str(c.created),
            str(c.reused),
            str(c.conflicts),
            str(len(c.errors)),
        )
    console.print(table)
    console.print(
        f"dispatch rows: {report.dispatch_rows}, specialist calls: {report.specialist_calls}, "
        f"postings: {report.journals} ({report.journal_lines} lines), duplicates: {report.duplicates}"
    )
    if report.changed_storm is not None:
        console.print(
            f"changed payload: {report.changed_storm.conflicts} of {report.retries} refused as conflicts, "
            f"rows written: {report.rows_written_by_changed_storm}"
        )
    for error in (report.storm.errors + (report.changed_storm.errors if report.changed_storm else []))[:5]:
        err.print(f"error: {escape(error)}")
    if not report.passed:
        err.print("[bold red]drill failed[/]")
        raise typer.Exit(1)
    console.print("[bold green]drill passed[/] on PostgreSQL: zero duplicates")


@drill_app.command("restart")
def drill_restart(
    point: Annotated[list[str] | None, typer.Option(help="Kill point(s) to drill (default: all).")] = None,
) -> None:
    """SIGKILL a worker at each kill point mid-close; fresh processes must finish it with every effect once."""
    from countersign.drill_hooks.kill_points import POINTS, KillPoint
    from countersign.scenarios.drills import NotPostgres, run_restart_drill

    named = tuple(point or POINTS)
    unknown = [p for p in named if p not in POINTS]
    if unknown:
        fail(f"--point: unknown kill point(s) {unknown}; known: {', '.join(POINTS)}")
    chosen = tuple(KillPoint(p) for p in named)
    rt = runtime()
    try:
        with counter("kill points", len(chosen)) as tick:
            results = run_restart_drill(rt, chosen, progress=lambda phrase, done, total: tick(done, total, phrase))
    except NotPostgres as exc:
        fail(str(exc))
        return
    table = Table("kill point", "killed", "processes", "closed", "result")
    for r in results:
        table.add_row(
            r.point,
            "yes" if r.killed else "no",
            str(r.processes),
            "yes" if r.closed else "no",
            f"skipped: {r.skipped}" if r.skipped else "pass" if r.passed else "; ".join(r.problems),
        )
    console.print(table)
    if not all(r.passed for r in results if r.skipped is None):
        raise typer.Exit(1)
    console.print("[bold green]restart drill passed[/]: every effect exactly once, trace verifies")


@drill_app.command("workers")
def drill_workers(
    closes: Annotated[int, typer.Option(help="Closes to run at once.")] = 50,
    workers: Annotated[int, typer.Option(help="Worker processes.")] = 4,
) -> None:
    """Run many closes with several workers at once: effects exactly once, no deadlock, no close stuck."""
    from countersign.scenarios.drills import NotPostgres, run_workers_drill

    rt = runtime()
    try:
        with counter("preparing closes", closes) as tick:
            report = run_workers_drill(
                rt, closes=closes, workers=workers, progress=lambda phrase, done, total: tick(done, total, phrase)
            )
    except NotPostgres as exc:
        fail(str(exc))
        return
    console.print(
        f"{report.closed} of {report.closes} closes closed by {report.workers} workers in {report.seconds:.1f}s"
        f" ({report.closes_per_minute:.1f} a minute); problems: {len(report.problems)}"
    )
    if report.reaction is not None and report.reaction.samples:
        console.print(
            f"decision to the next gate: p50 {report.reaction.p50_s:.2f}s, p99 {report.reaction.p99_s:.2f}s"
            f" over {report.reaction.samples} gates"
        )
    sessions = "unknown" if report.sessions_opened is None else str(report.sessions_opened)
    console.print(
        f"database sessions opened: {sessions}; most connected at once: {report.peak_connections}"
        f" ({report.peak_worker_connections} by the workers)"
    )
    console.print(
        f"trace queue: at most {report.most_pending} events waiting, the longest wait {report.longest_seal_wait_s:.1f}s"
    )
    for problem in report.problems[:10]:
        err.print(f"problem: {escape(problem)}")
    if not report.passed:
        raise typer.Exit(1)
    console.print("[bold green]workers drill passed[/]")
