"""`countersign close` and `dispatch`: start, advance and inspect closes."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from countersign.cli.common import console, fail, resolve_close_id, run, runtime, write_json
from countersign.cli.progress import spinner

close_app = typer.Typer(help="Start, advance and inspect closes.", no_args_is_help=True)


dispatch_app = typer.Typer(help="Specialist dispatches.", no_args_is_help=True)


@close_app.command("start")
def close_start(
    entity: Annotated[str, typer.Option(help="Entity code.")],
    period: Annotated[str, typer.Option(help="Period, YYYY-MM.")],
    books: Annotated[Path | None, typer.Option(help="Books directory (from `countersign synth`).")] = None,
    synthetic: Annotated[
        bool, typer.Option("--synthetic", help="No books loaded: generate synthetic ones seeded from the entity.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Start a close on the given books or the ones loaded before; refuses an entity with none unless --synthetic."""
    from countersign.bootstrap.runtime import connection, start_rules
    from countersign.services.starting import start_close_on_books

    rt = runtime()

    async def go() -> str:
        async with connection(rt) as conn:
            return await start_close_on_books(
                conn,
                start_rules(rt),
                entity=entity,
                period=period,
                books_dir=books,
                started_by="countersign-cli",
                synthetic=synthetic,
            )

    with spinner(f"starting the close of {entity} {period}: loading the books"):
        close_id = run(go)
    if as_json:
        write_json({"close_id": close_id, "entity": entity, "period": period})
        return
    console.print(f"started close [bold]{close_id}[/] for {entity} {period}")


@close_app.command("advance")
def close_advance(
    close: Annotated[str | None, typer.Option("--close", help="Close id (default: latest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Run every step that is ready; stop at gates and halts."""
    from countersign.bootstrap.runtime import connection, engine_context
    from countersign.services.operating import advance_close, paged_progress

    rt = runtime()

    async def go() -> Any:
        close_id = await resolve_close_id(rt, close)
        async with engine_context(rt) as ctx:  # a connection per step: none is held while a specialist works
            return await advance_close(lambda: connection(rt), close_id, ctx)

    with spinner(f"advancing close {close or '(latest)'}: every step that is ready") as say, paged_progress(say):
        report = run(go)  # a paged bank reconciliation says which page of which account it is on
    if as_json:
        write_json({"close_id": report.close_id, "status": report.status, "busy": report.busy, "steps": report.steps})
        return
    for step in report.steps:
        console.print(f"  {escape(step)}", highlight=False)
    console.print(f"close {report.close_id}: [bold]{report.status}[/]")


@close_app.command("status")
def close_status_command(
    close: Annotated[str | None, typer.Option("--close", help="Close id (default: latest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Tasks, gates and who they wait on."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.reading import LOCAL_OPERATOR, read_close_status

    rt = runtime()

    async def go() -> dict[str, Any]:
        close_id = await resolve_close_id(rt, close)
        async with connection(rt) as conn:  # the read every door shares, as the local operator
            return await read_close_status(conn, rt.policy, LOCAL_OPERATOR, close_id)

    status = run(go)
    if as_json:
        write_json(status)
        return
    print_status(status)


@close_app.command("list")
def close_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Every close, newest first, with its status and the gates it waits on (payment runs: `payments status`)."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.board_reads import read_overview
    from countersign.services.reading import LOCAL_OPERATOR

    rt = runtime()

    async def go() -> Any:
        async with connection(rt) as conn:
            return await read_overview(conn, rt.policy, LOCAL_OPERATOR)

    closes = run(go).closes
    if as_json:
        write_json([_close_line_json(line) for line in closes])
        return
    print_close_list(closes)


def _close_line_json(line: Any) -> dict[str, Any]:
    return {
        "close_id": line.close_id,
        "entity": line.entity,
        "period": line.period,
        "currency": line.currency,
        "status": line.status,
        "status_reason": line.status_reason,
        "updated_at": line.updated_at.astimezone(UTC).isoformat(),
        "waiting_on": [
            {"gate_id": w.gate_id, "task": w.task, "approver_role": w.approver_role, "approvals_missing": w.missing}
            for w in line.waiting
        ],
    }


def print_close_list(closes: Any) -> None:
    """The closes as a person reads them: statuses in words, the roles each open gate waits on."""
    from countersign.policy.wording import in_words

    if not closes:
        console.print("no close has been started; run `countersign close start`")
        return
    table = Table("close", "entity", "period", "status", "updated", "waiting on", title="closes")
    for line in closes:
        waiting = ", ".join(f"{w.title}: {w.missing} more from {w.approver_role}" for w in line.waiting)
        table.add_row(
            line.close_id,
            escape(line.entity),
            line.period,
            in_words(line.status),
            line.updated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            escape(waiting) or "nobody",
        )
    console.print(table)


def print_status(status: dict[str, Any]) -> None:
    """The status as a person reads it: statuses and kinds in words (the JSON keeps the codes)."""
    from countersign.policy.wording import in_words
    from countersign.states import GateStatus

    console.print(
        f"[bold]{status['entity']} {status['period']}[/]  close {status['close_id']}  status "
        f"[bold]{in_words(status['status'])}[/]"
        + (f" — {status['status_reason']}" if status.get("status_reason") else "")
    )
    tasks = Table("task", "status", "attempt", "note", title="tasks")
    for t in status["tasks"]:
        tasks.add_row(t["task"], in_words(t["status"]), str(t["attempt"]), (t["reason"] or "")[:80])
    console.print(tasks)
    gates = Table("gate", "task", "kind", "tier", "status", "approvals", "waiting on / decided by", title="gates")
    for g in status["gates"]:
        who = ", ".join(f"{d['principal']} ({in_words(d['decision'])})" for d in g["decisions"])
        if g["status"] == GateStatus.OPEN:
            who = (who + "; " if who else "") + f"needs {g['quorum'] - g['approvals']} more: role {g['approver_role']}"
        gates.add_row(
            g["gate_id"][:8],
            g["task"],
            in_words(g["kind"]),
            in_words(g["tier"]),
            in_words(g["status"]),
            f"{g['approvals']}/{g['quorum']}",
            who,
        )
    console.print(gates)


@close_app.command("load-bank-feed")
def close_load_bank_feed(
    file: Annotated[
        Path, typer.Argument(help="Corrected bank_lines.csv, or a statement: camt.053 XML, MT940, OFX or CSV.")
    ],
    close: Annotated[str | None, typer.Option("--close", help="Close id (default: latest).")] = None,
    by: Annotated[str, typer.Option(help="Who loads it (recorded in the trace).")] = "countersign-cli",
    mapping: Annotated[
        Path | None, typer.Option(help="Mapping file: the bank accounts (and a CSV statement's columns).")
    ] = None,
    camt_xsd: Annotated[
        Path | None, typer.Option(help="camt.053 XSD file or folder (default: COUNTERSIGN_CAMT053_XSD).")
    ] = None,
) -> None:
    """Load a corrected bank feed for a close's books; the next bank reconciliation reads it."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.operating import load_bank_feed_for_close

    rt = runtime()
    feed = _feed_in_books_format(file, mapping, camt_xsd or rt.settings.camt053_xsd, rt.settings.state_dir)

    async def go() -> int:
        close_id = await resolve_close_id(rt, close)
        async with connection(rt) as conn:
            return await load_bank_feed_for_close(conn, close_id, feed, loaded_by=by)

    with spinner(f"loading the bank feed {file.name}"):
        version = run(go)
    console.print(f"bank feed version {version} loaded")


def _feed_in_books_format(file: Path, mapping: Path | None, camt_xsd: Path | None, state_dir: Path) -> Path:
    """`file` when it is a bank_lines.csv already; otherwise its statements written as a feed in the books format."""
    from countersign.importers.books_dir import sha256_of
    from countersign.importers.detect import detect_statement_format
    from countersign.importers.errors import ImportFileError
    from countersign.importers.mapping import default_mapping, load_mapping
    from countersign.importers.statement import StatementFormat
    from countersign.services.books_import import read_statements, write_bank_feed
    from countersign.services.operating import BANK_LINES_FIRST_COLUMN

    try:
        kind = detect_statement_format(file)
        if kind is StatementFormat.CSV and _is_books_bank_lines(file, BANK_LINES_FIRST_COLUMN):
            return file
        read_mapping = load_mapping(mapping) if mapping is not None else default_mapping()
        statements, sources = read_statements([file], read_mapping, camt_schema=camt_xsd)
        folder = state_dir / "feeds" / f"{file.stem}-{sha256_of(file)[:12]}"
        return write_bank_feed(statements, read_mapping, folder, sources)
    except ImportFileError as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from exc


def _is_books_bank_lines(file: Path, first_column: str) -> bool:
    with file.open("rb") as handle:
        return handle.readline().removeprefix(b"\xef\xbb\xbf").startswith(first_column.encode() + b",")


@dispatch_app.command("replay")
def dispatch_replay(
    dispatch_id: Annotated[int, typer.Argument(help="A dead-lettered dispatch id (close status).")],
) -> None:
    """Give a dead-lettered dispatch fresh attempts; the next advance retries its task."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.operating import DispatchNotReplayable, replay_dispatch

    rt = runtime()

    async def go() -> tuple[str, str]:
        async with connection(rt) as conn:
            return await replay_dispatch(conn, dispatch_id, actor="countersign-cli")

    try:
        close_id, task = run(go)
    except DispatchNotReplayable as exc:
        fail(str(exc))
        return
    console.print(f"dispatch {dispatch_id} replayed: {task} of close {close_id} will run on the next advance")
