"""`countersign trace`: verify, export, show and prove the close trace."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from countersign.cli.common import LazyNames, ProofRequestError, console, err, fail, run, runtime, write_json
from countersign.cli.progress import spinner

# The export every door shares, imported when a command runs; `countersign.cli.trace.export_trace` still answers (the
# doors' test).
__getattr__ = LazyNames(globals(), {"countersign.services.exports": ("export_trace",)}).attribute

trace_app = typer.Typer(help="The close trace.", no_args_is_help=True)


@trace_app.command("verify")
def trace_verify(
    close: Annotated[str | None, typer.Option("--close", help="Also report this close's events.")] = None,
    bundle: Annotated[Path | None, typer.Option(help="Verify an evidence bundle offline (no database).")] = None,
    key: Annotated[str | None, typer.Option(help="With --bundle: the verifier key you trust (pins it).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (exit codes unchanged).")] = False,
) -> None:
    """Recompute the hash chain and check it against every signed checkpoint; exit 1 naming what broke."""
    from countersign.audit.trace import iter_events, seal_pending
    from countersign.audit.transparency_log import LogInconsistent, verify_log
    from countersign.bootstrap.runtime import connection
    from countersign.services.operating import require_close

    if bundle is not None:
        _verify_bundle_offline(bundle, key, as_json=as_json)
        return
    rt = runtime()

    async def go() -> tuple[Any, int | None]:
        async with connection(rt) as conn:
            await seal_pending(conn)
            try:
                verdict: Any = await verify_log(conn)
            except LogInconsistent as exc:
                verdict = exc
            count = None
            if close is not None:
                await require_close(conn, close)
                count = len([e async for e in iter_events(conn, close_id=close)])
        return verdict, count

    with spinner("verifying the trace: recomputing the hash chain and the signed roots"):
        verdict, close_events = run(go)
    if as_json:
        _verdict_json(verdict, close, close_events)
        return
    if isinstance(verdict, LogInconsistent):
        err.print(f"[bold red]trace broken:[/] {escape(str(verdict))}")
        raise typer.Exit(1)
    result, checkpoint = verdict.chain, verdict.latest
    if not result.ok:
        err.print(f"[bold red]trace broken[/] at seq {result.first_bad_seq}: {escape(result.problem or '')}")
        raise typer.Exit(1)
    console.print(f"trace intact: tree size {result.size}, root {result.root.hex()}")
    if checkpoint is not None:
        console.print(
            f"consistent with the checkpoint signed at tree size {checkpoint.tree_size} ({checkpoint.key_name})"
            f" and {verdict.checkpoints - 1} earlier"
        )
    if close_events is not None:
        console.print(f"close {close}: {close_events} events")


def _verdict_json(verdict: Any, close: str | None, close_events: int | None) -> None:
    """`trace verify --json`: `ok` and what was checked, or where the trace broke; exit 1 when broken, as without."""
    from countersign.audit.transparency_log import LogInconsistent

    if isinstance(verdict, LogInconsistent):
        write_json({"ok": False, "first_bad_seq": None, "problem": str(verdict)})
        raise typer.Exit(1)
    result, checkpoint = verdict.chain, verdict.latest
    if not result.ok:
        write_json({"ok": False, "first_bad_seq": result.first_bad_seq, "problem": result.problem})
        raise typer.Exit(1)
    write_json(
        {
            "ok": True,
            "tree_size": result.size,
            "root": result.root.hex(),
            "checkpoint": None
            if checkpoint is None
            else {
                "tree_size": checkpoint.tree_size,
                "key_name": checkpoint.key_name,
                "checkpoints_checked": verdict.checkpoints,
            },
            "close": None if close is None else {"close_id": close, "events": close_events},
        }
    )


def _verify_bundle_offline(path: Path, key: str | None, *, as_json: bool = False) -> None:
    from countersign.audit.bundle import BundleInvalid, verify_bundle

    try:
        with spinner(f"verifying the bundle {path.name}"):
            report = verify_bundle(path.read_bytes(), pinned_key=key)
    except OSError as exc:
        fail(f"{path.name}: {exc.strerror}")
        return
    except BundleInvalid as exc:
        if as_json:
            write_json({"ok": False, "problem": exc.reason})
            raise typer.Exit(1) from exc
        err.print(f"[bold red]bundle invalid:[/] {escape(exc.reason)}")
        raise typer.Exit(1) from exc
    if as_json:
        write_json(
            {
                "ok": True,
                "close_id": report.close_id,
                "events": report.events,
                "tree_size": report.tree_size,
                "root": report.root.hex(),
                "key_name": report.key_name,
                "origin": report.origin,
                "key_pinned": key is not None,
                "decision_proofs": {
                    "checked": report.decision_proofs,
                    "ed25519": report.ed25519_decisions,
                    "passkey": report.passkey_decisions,
                    "platform_identity_not_checkable_offline": report.platform_identity_decisions,
                },
                "notes": list(report.notes),
            }
        )
        return
    console.print(
        f"bundle verified: {report.events} events of close {report.close_id} included in tree size "
        f"{report.tree_size}, root {report.root.hex()}, signed by {report.key_name} ({report.origin})"
    )
    console.print(
        f"decision proofs checked: {report.decision_proofs} ({report.ed25519_decisions} Ed25519,"
        f" {report.passkey_decisions} passkey); {report.platform_identity_decisions} platform identity"
        " (Slack or Teams: not checkable offline)"
    )
    for note in report.notes:
        console.print(f"note: {escape(note)}")
    if key is None:
        console.print("note: checked against the key inside the bundle; pin the key you trust with --key")


@trace_app.command("reproduce")
def trace_reproduce(
    close: Annotated[str, typer.Argument(help="Close id.")],
    gate: Annotated[str | None, typer.Option("--gate", help="Only the calls of this gate's task and attempt.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (exit codes unchanged).")] = False,
) -> None:
    """Re-run the close's recorded specialist calls (model steps included, through the same recorded responses) and
    show where an output differs from the recorded one, byte for byte; exit 1 when any differs. Read-only."""
    from countersign.bootstrap.runtime import connection, engine_context
    from countersign.services.reproducing import NothingToReproduce, reproduce

    rt = runtime()

    async def go() -> Any:
        async with engine_context(rt) as ctx, connection(rt) as conn:
            return await reproduce(conn, close, ctx, versions_now=rt.versions(), gate_id=gate)

    try:
        with spinner(f"re-running the recorded specialist calls of close {close}"):
            report = run(go)
    except NothingToReproduce as exc:
        fail(str(exc))
        return
    if as_json:
        write_json(
            {
                "close_id": report.close_id,
                "identical": report.identical,
                "version_changes": {k: {"recorded": a, "now": b} for k, (a, b) in report.version_changes.items()},
                "calls": [
                    {
                        "task": c.task,
                        "attempt": c.attempt,
                        "specialist": c.specialist,
                        "input_same": c.input_same,
                        "output_same": c.output_same,
                        "note": c.note,
                        "difference": None if c.difference is None else vars(c.difference),
                    }
                    for c in report.calls
                ],
            }
        )
        raise typer.Exit(0 if report.identical else 1)
    for key, (recorded, now) in report.version_changes.items():
        console.print(f"version set: {key} was {escape(str(recorded))}, is now {escape(str(now))}", highlight=False)
    for c in report.calls:
        head = f"{c.task} (attempt {c.attempt}, {c.specialist}):"
        if c.output_same is None:
            console.print(f"{head} not re-run: {escape(c.note)}", highlight=False)
        elif c.output_same:
            console.print(f"{head} identical", highlight=False)
        else:
            d = c.difference
            assert d is not None
            console.print(
                f"{head} [bold red]differs[/] at byte {d.offset:,} ({d.recorded_size:,} bytes recorded,"
                f" {d.reproduced_size:,} now)\n   recorded:   {escape(d.recorded)!r}"
                f"\n   reproduced: {escape(d.reproduced)!r}",
                highlight=False,
            )
    console.print(
        f"close {report.close_id}: "
        + ("every call reproduced byte for byte" if report.identical else "[bold red]outputs differ[/]")
    )
    if not report.identical:
        raise typer.Exit(1)


@trace_app.command("export")
def trace_export(
    close: Annotated[str, typer.Option("--close", help="Close id.")],
    fmt: Annotated[str, typer.Option("--format", help="json, csv or bundle.")] = "json",
    out: Annotated[Path | None, typer.Option(help="Output file (default: stdout; required for bundle).")] = None,
) -> None:
    """Export one close's trace events, or an evidence bundle an auditor verifies offline."""
    from countersign.audit.export import FORMATS
    from countersign.audit.trace import seal_pending
    from countersign.bootstrap.keys import load_trace_signer
    from countersign.bootstrap.runtime import connection
    from countersign.services.exports import BUNDLE, export_bundle, export_trace
    from countersign.services.reading import LOCAL_OPERATOR, close_to_export

    if fmt not in (*FORMATS, BUNDLE):
        fail(f"--format: must be one of {', '.join((*FORMATS, BUNDLE))}, not {fmt!r}")
    if fmt == BUNDLE and out is None:
        fail("--out: a bundle is a zip file; name where to write it")
    rt = runtime()

    async def go() -> tuple[int, bytes]:
        if fmt == BUNDLE:
            bundle = await export_bundle(
                lambda role: connection(rt, role),
                close_id=close,
                signer=load_trace_signer(rt.settings),
                origin=rt.settings.trace_origin,
                requested_by="countersign-cli",
                platform="cli",
            )
            return bundle.events, bundle.data
        # The export every door shares; it records `trace_exported` (as the owner: the engine role may not).
        async with connection(rt, "owner") as conn:
            await close_to_export(conn, rt.policy, LOCAL_OPERATOR, close)
            await seal_pending(conn)
            exported = await export_trace(conn, close_id=close, fmt=fmt, requested_by="countersign-cli", platform="cli")
        return exported.events, exported.data

    with spinner(f"exporting the trace of close {close} ({fmt})"):
        count, data = run(go)
    if out is None:
        sys.stdout.buffer.write(data)
    else:
        out.write_bytes(data)
        console.print(f"wrote {count} events to {out}")


@trace_app.command("show")
def trace_show(close: Annotated[str, typer.Option("--close", help="Close id.")]) -> None:
    """The close as a readable timeline of who handed what to whom."""
    from countersign.audit.trace import iter_events, seal_pending
    from countersign.bootstrap.runtime import connection
    from countersign.bootstrap.timeline import print_timeline
    from countersign.services.operating import require_close

    rt = runtime()

    async def go() -> list[Any]:
        async with connection(rt) as conn:
            await require_close(conn, close)
            await seal_pending(conn)
            return [e async for e in iter_events(conn, close_id=close)]

    print_timeline(run(go), console)


@trace_app.command("prove")
def trace_prove(
    seq: Annotated[int, typer.Option(help="Sequence number of the event.")],
    size: Annotated[int | None, typer.Option(help="Tree size (default: the whole log).")] = None,
) -> None:
    """An RFC 9162 inclusion proof for one event, as JSON (hashes in hex)."""
    from countersign.audit.trace import seal_pending
    from countersign.audit.transparency_log import inclusion_json, load_tree
    from countersign.bootstrap.runtime import connection

    rt = runtime()

    async def go() -> dict[str, Any]:
        async with connection(rt) as conn:
            await seal_pending(conn)
            try:
                tree = await load_tree(conn, size=size)
            except ValueError as exc:
                raise ProofRequestError(f"--size: {exc}") from exc
        if not 1 <= seq <= tree.size:
            raise ProofRequestError(f"--seq: {seq} is not in a tree of size {tree.size}")
        return inclusion_json(tree, seq - 1)

    write_json(run(go))


@trace_app.command("consistency")
def trace_consistency(
    from_size: Annotated[int, typer.Option("--from", help="The older tree size.")],
    to_size: Annotated[int, typer.Option("--to", help="The newer tree size.")],
) -> None:
    """An RFC 9162 consistency proof between two tree sizes, as JSON (hashes in hex)."""
    from countersign.audit.trace import seal_pending
    from countersign.audit.transparency_log import consistency_json, load_tree
    from countersign.bootstrap.runtime import connection

    rt = runtime()

    async def go() -> dict[str, Any]:
        if not 0 <= from_size <= to_size:
            raise ProofRequestError(f"--from/--to: need 0 <= from ({from_size}) <= to ({to_size})")
        async with connection(rt) as conn:
            await seal_pending(conn)
            try:
                tree = await load_tree(conn, size=to_size)
            except ValueError as exc:
                raise ProofRequestError(f"--to: {exc}") from exc
        return consistency_json(tree, from_size)

    write_json(run(go))
