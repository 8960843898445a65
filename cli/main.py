"""`countersign` command line. Parses, calls one service, prints; errors become one clear line and exit 2."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import psycopg
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from audit.bundle import BundleInvalid, build_bundle, verify_bundle
from audit.export import FORMATS
from audit.merkle import MerkleTree
from audit.trace import iter_events, seal_pending, verify_chain
from audit.transparency_log import (
    LogInconsistent,
    check_extends,
    consistency_json,
    inclusion_json,
    latest_checkpoint,
    load_tree,
    sign_log_checkpoint,
    tree_root,
)
from callbacks.callers import UnknownPrincipal, issue_token, record_trace_exported, revoke_tokens
from callbacks.principals import PrincipalFileError, parse_principals, upsert_principals
from cli.evals import eval_app
from countersign import migrate
from countersign.chat import ChatConfigError, build_senders, check_chat_settings
from countersign.database import EmbeddedUnavailable, MissingRoleURL, NoOwnerCredentials
from countersign.keys import load_trace_signer, verifier_key_text
from countersign.limits import (
    BODY_READ_TIMEOUT_S,
    HEADER_READ_TIMEOUT_S,
    KEEP_ALIVE_TIMEOUT_S,
    MAX_HEADER_BYTES,
    MAX_HEADER_COUNT,
    SERVE_MAX_CONCURRENCY,
    SPECIALISTS_MAX_CONCURRENCY,
)
from countersign.migrate import ObjectCreationAllowed, PolicyNotEnforced, SchemaNotAtHead
from countersign.runtime import (
    MissingSpecialistToken,
    PasswordFileUnreadable,
    Runtime,
    boot,
    connection,
    engine_context,
    start_close_with_books,
)
from countersign.settings import Settings, SettingsError, describe, load_settings
from countersign.unreachable import DatabaseUnreachable
from engine.books import BooksError, load_bank_feed
from engine.orchestrator import advance
from engine.runs import (
    CloseAlreadyExists,
    CloseNotFound,
    InvalidCloseKey,
    PeriodClosed,
    close_status,
    latest_close_id,
    load_close,
)
from engine.starting import NoBooksLoaded
from policy import PolicyError
from services.exports import export_trace
from synthetic import (
    ProfileError,
    generate_books,
    generate_construction,
    load_clause_profile,
    load_construction_profile,
    load_profile,
    profile_kind,
    write_clause_corpus,
)

app = typer.Typer(help="Countersign: a month-end close with governed agents and human gates.", no_args_is_help=True)
close_app = typer.Typer(help="Start, advance and inspect closes.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
trace_app = typer.Typer(help="The close trace.", no_args_is_help=True)
principals_app = typer.Typer(help="People and machines that act on closes.", no_args_is_help=True)
specialists_app = typer.Typer(help="The A2A specialist agents.", no_args_is_help=True)
app.add_typer(close_app, name="close")
app.add_typer(eval_app, name="eval")
app.add_typer(db_app, name="db")
app.add_typer(trace_app, name="trace")
app.add_typer(principals_app, name="principals")
app.add_typer(specialists_app, name="specialists")
dispatch_app = typer.Typer(help="Specialist dispatches.", no_args_is_help=True)
app.add_typer(dispatch_app, name="dispatch")
drill_app = typer.Typer(help="Adversarial drills against the configured database.", no_args_is_help=True)
app.add_typer(drill_app, name="drill")
config_app = typer.Typer(help="The configuration read from the environment.", no_args_is_help=True)
app.add_typer(config_app, name="config")
payments_app = typer.Typer(help="Payment runs: one per submitted construction certificate.", no_args_is_help=True)
app.add_typer(payments_app, name="payments")

console = Console()
err = Console(stderr=True)
T = TypeVar("T")


class ProofRequestError(ValueError):
    pass


USER_ERRORS: tuple[type[BaseException], ...] = (
    ProofRequestError,
    InvalidCloseKey,
    BooksError,
    CloseAlreadyExists,
    CloseNotFound,
    PeriodClosed,
    PolicyError,
    PrincipalFileError,
    ProfileError,
    MissingSpecialistToken,
    UnknownPrincipal,
    DatabaseUnreachable,
    NoBooksLoaded,
    NoOwnerCredentials,
    MissingRoleURL,
)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def run(coro_factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return asyncio.run(coro_factory())
    except USER_ERRORS as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from exc


def settings_or_exit() -> Settings:
    """Every setting, validated; a wrong or missing one is a line naming its variable, then exit 2."""
    try:
        return load_settings()
    except SettingsError as exc:
        for line in exc.lines:
            err.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.callback()
def validate_settings(ctx: typer.Context) -> None:
    """Countersign: a month-end close with governed agents and human gates."""
    if ctx.invoked_subcommand != "config" and not ctx.resilient_parsing:
        settings_or_exit()  # at start, for every command: a wrong variable stops it before anything runs


def runtime(*, upgrade: bool = False, roles: tuple[str, ...] = ()) -> Runtime:
    """Settings, rules and the database. Only `db upgrade` (`upgrade`) and the embedded default migrate; every other
    command refuses, in one line, a schema that is not at this release's head. `roles`: connections it will open."""
    from sqlalchemy.exc import OperationalError

    settings = settings_or_exit()
    try:
        return boot(settings, upgrade=upgrade, roles=roles)
    except STARTUP_ERRORS as exc:
        fail(str(exc))
        raise AssertionError("unreachable") from exc
    except (OperationalError, psycopg.OperationalError) as exc:  # migrating, or reading the schema revision
        role, url = _schema_check_role(settings, upgrade)
        fail(str(DatabaseUnreachable(role, url, exc)))
        raise AssertionError("unreachable") from exc


STARTUP_ERRORS: tuple[type[BaseException], ...] = (
    PolicyError,
    EmbeddedUnavailable,
    SchemaNotAtHead,
    PolicyNotEnforced,
    ObjectCreationAllowed,
    NoOwnerCredentials,
    MissingRoleURL,
    PasswordFileUnreadable,
)


def _schema_check_role(settings: Settings, upgrade: bool) -> tuple[str, str]:
    """The role (and URL) start-up connected as: the owner when it has the URL or migrates, else a service role."""
    if settings.database_url or upgrade:
        return "owner", settings.database_url or "postgresql:///embedded"
    if settings.engine_database_url:
        return "engine", settings.engine_database_url
    return "callbacks", settings.callbacks_database_url or "postgresql:///embedded"


async def resolve_close_id(rt: Runtime, close_id: str | None) -> str:
    if close_id:
        return close_id
    async with connection(rt) as conn:
        latest = await latest_close_id(conn)
    if latest is None:
        raise CloseNotFound("(latest): no close has been started; run `countersign close start`")
    return latest


# --- synth / db ----------------------------------------------------------------------------------------------


@app.command()
def synth(
    out: Annotated[Path, typer.Option(help="Directory to write the books into.")],
    profile: Annotated[str, typer.Option(help="Profile name in config/profiles/.")] = "default",
    seed: Annotated[int, typer.Option(help="Integer seed; same seed, same bytes.")] = 42,
    scale: Annotated[int | None, typer.Option(help="Number of GL lines (overrides the profile).")] = None,
    entity: Annotated[str | None, typer.Option(help="Entity code (overrides the profile).")] = None,
    period: Annotated[str | None, typer.Option(help="Period YYYY-MM (overrides the profile).")] = None,
) -> None:
    """Write deterministic synthetic data from a profile: books for one entity and period (the default), the clause
    corpus (`--profile clauses`) or construction contracts and certificates (`--profile construction`)."""
    settings = settings_or_exit()
    path = settings.profile_path(profile)
    try:
        kind = profile_kind(path)
        if kind == "clauses":
            written = write_clause_corpus(load_clause_profile(path), seed, out)
            console.print(f"wrote the clause corpus ({profile}, seed {seed}) to {written}")
            return
        if kind == "construction":
            corpus = json.loads((settings.clauses_dir / "corpus.json").read_bytes())
            made = generate_construction(load_construction_profile(path), seed, out, clause_corpus=corpus)
            console.print(
                f"wrote {made.contracts} contracts, {made.certificates:,} certificates ({made.faults} seeded faults, "
                f"{made.duplicates} duplicate re-submissions) to {out}"
            )
            return
        loaded = load_profile(path)
    except ProfileError as exc:
        fail(str(exc))
        return
    with Progress(
        TextColumn("synthesizing GL lines"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        bar = progress.add_task("gl", total=scale or loaded.gl_lines)

        def tick(done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total)

        try:
            manifest = generate_books(loaded, seed, out, entity=entity, period=period, gl_lines=scale, progress=tick)
        except ProfileError as exc:
            fail(str(exc))
            return
    console.print(
        f"wrote books for [bold]{manifest.entity}[/] {manifest.period} ({manifest.gl_line_count:,} GL lines) to {out}"
    )


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration as the owner (DATABASE_URL), then set the service roles' passwords given by
    COUNTERSIGN_ENGINE_DB_PASSWORD / COUNTERSIGN_CALLBACKS_DB_PASSWORD (or their _FILE variants)."""
    rt = runtime(upgrade=True)
    changed = migrate.set_role_passwords(rt.database, rt.database.role_passwords)
    console.print(f"schema at revision {migrate.current_revision(rt.database.owner_url)}")
    for role in changed:
        console.print(f"password set for role {role}")


@config_app.command("check")
def config_check() -> None:
    """Print every variable, its effective value (secrets redacted) and its source; exit 2 when one is wrong."""
    table = Table("variable", "value", "from", title="configuration")
    for name, value, source in describe():
        table.add_row(name, escape(value), source)
    console.print(table)
    try:
        load_settings()
    except SettingsError as exc:
        for line in exc.lines:
            err.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    console.print("configuration valid")


# --- close ---------------------------------------------------------------------------------------------------


@close_app.command("start")
def close_start(
    entity: Annotated[str, typer.Option(help="Entity code.")],
    period: Annotated[str, typer.Option(help="Period, YYYY-MM.")],
    books: Annotated[Path | None, typer.Option(help="Books directory (from `countersign synth`).")] = None,
    synthetic: Annotated[
        bool, typer.Option("--synthetic", help="No books loaded: generate synthetic ones seeded from the entity.")
    ] = False,
) -> None:
    """Start a close on the given books or the ones loaded before; refuses an entity with none unless --synthetic."""
    rt = runtime()

    async def go() -> str:
        async with connection(rt) as conn:
            return await start_close_with_books(
                rt,
                conn,
                entity=entity,
                period=period,
                books_dir=books,
                started_by="countersign-cli",
                synthetic=synthetic,
            )

    close_id = run(go)
    console.print(f"started close [bold]{close_id}[/] for {entity} {period}")


@close_app.command("advance")
def close_advance(
    close: Annotated[str | None, typer.Option("--close", help="Close id (default: latest).")] = None,
) -> None:
    """Run every step that is ready; stop at gates and halts."""
    rt = runtime()

    async def go() -> Any:
        close_id = await resolve_close_id(rt, close)
        async with engine_context(rt) as ctx:  # a connection per step: none is held while a specialist works
            return await advance(lambda: connection(rt), close_id, ctx)

    report = run(go)
    for step in report.steps:
        console.print(f"  {escape(step)}", highlight=False)
    console.print(f"close {report.close_id}: [bold]{report.status}[/]")


@close_app.command("status")
def close_status_command(
    close: Annotated[str | None, typer.Option("--close", help="Close id (default: latest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Tasks, gates and who they wait on."""
    rt = runtime()

    async def go() -> dict[str, Any]:
        close_id = await resolve_close_id(rt, close)
        async with connection(rt) as conn:
            return await close_status(conn, close_id)

    status = run(go)
    if as_json:
        sys.stdout.write(json.dumps(status, indent=2) + "\n")
        return
    print_status(status)


def print_status(status: dict[str, Any]) -> None:
    console.print(
        f"[bold]{status['entity']} {status['period']}[/]  close {status['close_id']}  status "
        f"[bold]{status['status']}[/]" + (f" — {status['status_reason']}" if status.get("status_reason") else "")
    )
    tasks = Table("task", "status", "attempt", "note", title="tasks")
    for t in status["tasks"]:
        tasks.add_row(t["task"], t["status"], str(t["attempt"]), (t["reason"] or "")[:80])
    console.print(tasks)
    gates = Table("gate", "task", "kind", "tier", "status", "approvals", "waiting on / decided by", title="gates")
    for g in status["gates"]:
        who = ", ".join(f"{d['principal']} ({d['decision']})" for d in g["decisions"])
        if g["status"] == "open":
            who = (who + "; " if who else "") + f"needs {g['quorum'] - g['approvals']} more: role {g['approver_role']}"
        gates.add_row(
            g["gate_id"][:8],
            g["task"],
            g["kind"],
            g["tier"],
            g["status"],
            f"{g['approvals']}/{g['quorum']}",
            who,
        )
    console.print(gates)


@payments_app.command("status")
def payments_status_command(
    period: Annotated[str | None, typer.Option("--period", help="Month YYYY-MM (default: every month).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """One line per certificate: amount to certify, stage, gate tier and status, escalation, certified."""
    from cards.model import CardDataError
    from cards.payments import payments_card
    from engine.workflows.certificates.runs import payment_run_status

    if period is not None and not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", period):
        fail(f"--period must be a month YYYY-MM, got {period!r}")
    rt = runtime()

    async def go() -> list[dict[str, Any]]:
        async with connection(rt) as conn:
            return await payment_run_status(conn, period=period)

    rows = run(go)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    try:
        card = payments_card(rows, period)
    except CardDataError as exc:
        fail(str(exc))
        return
    table = Table("certificate", "contract", "amount to certify", "stage", "gate", "escalation", "certified")
    for line in card.runs:
        amount = "—" if line.amount_to_certify is None else f"{line.currency or ''} {line.amount_to_certify:,.2f}"
        gate = "—" if line.gate_status is None else f"{line.gate_tier}: {line.gate_status}"
        table.add_row(
            escape(line.certificate_id),
            escape(line.contract_id),
            amount.strip(),
            escape(line.stage),
            escape(gate),
            (line.escalation or "").replace("_", " "),
            "yes" if line.certified else "no",
        )
    console.print(f"[bold]payment runs {period or '(every month)'}[/]: {len(card.runs)}, {card.certified} certified")
    console.print(table)


@close_app.command("load-bank-feed")
def close_load_bank_feed(
    file: Annotated[Path, typer.Argument(help="Corrected bank_lines.csv.")],
    close: Annotated[str | None, typer.Option("--close", help="Close id (default: latest).")] = None,
    by: Annotated[str, typer.Option(help="Who loads it (recorded in the trace).")] = "countersign-cli",
) -> None:
    """Load a corrected bank feed for a close's books; the next bank reconciliation reads it."""
    rt = runtime()

    async def go() -> int:
        close_id = await resolve_close_id(rt, close)
        async with connection(rt) as conn:
            record = await load_close(conn, close_id)
            return await load_bank_feed(conn, record.book_set_id, file, loaded_by=by, close_id=close_id)

    version = run(go)
    console.print(f"bank feed version {version} loaded")


# --- principals / trace --------------------------------------------------------------------------------------


@principals_app.command("import")
def principals_import(
    file: Annotated[Path, typer.Argument(help="YAML file with a `principals` list, or a CSV file.")],
) -> None:
    """Load or refresh principals (humans and machines), their roles and public keys (`public_key`, base64)."""
    rt = runtime()

    async def go() -> int:
        async with connection(rt, "owner") as conn:
            return await upsert_principals(conn, parse_principals(file))

    console.print(f"imported {run(go)} principals")


KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")


@principals_app.command("keygen")
def principals_keygen(
    name: Annotated[str, typer.Argument(help="The principal the key belongs to (becomes NAME.key and NAME.pub).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the key files.")] = Path("."),
) -> None:
    """Write a person's Ed25519 key pair: NAME.key (private, PKCS8 PEM, mode 0600) and NAME.pub (base64)."""
    from policy.person_proof import generate_key_pair, public_key_text

    if not KEY_NAME.fullmatch(name):
        fail(f"NAME {name!r} must be 1-128 letters, digits, '.', '_', '@' or '-', starting with a letter or digit")
        return
    private_path, public_path = out / f"{name}.key", out / f"{name}.pub"
    for path in (private_path, public_path):
        if path.exists():
            fail(f"{path} already exists; refusing to overwrite a key")
            return
    private_pem, public_raw = generate_key_pair()
    public_text = public_key_text(public_raw)
    try:
        out.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(private_pem)
        public_path.write_text(public_text + "\n")
    except OSError as exc:
        fail(f"cannot write the key files in {out}: {exc.strerror or exc}")
        return
    console.print(f"private key: {escape(str(private_path))} (keep it with {escape(name)}; never share it)")
    console.print(f"public key:  {public_text}")
    console.print(
        "Register it: add `public_key: "
        + public_text
        + f"` to {escape(name)}'s entry in your principals YAML (or the public_key column of the CSV),"
        " then run `countersign principals import FILE`. Signed-callback decisions by this person must then carry"
        " a signature by this key."
    )


@principals_app.command("token")
def principals_token(
    name: Annotated[str, typer.Argument(help="The principal the token reads as.")],
    revoke: Annotated[bool, typer.Option("--revoke", help="Revoke every live token of NAME instead.")] = False,
) -> None:
    """Print a new API token for `GET /closes/{id}` (shown once; only its SHA-256 is stored), or revoke them."""
    rt = runtime()

    async def go() -> str | int:
        async with connection(rt, "owner") as conn:
            return await (revoke_tokens(conn, name) if revoke else issue_token(conn, name))

    result = run(go)
    if revoke:
        console.print(f"revoked {result} token(s) of {name}")
    else:
        sys.stdout.write(f"{result}\n")


@trace_app.command("verify")
def trace_verify(
    close: Annotated[str | None, typer.Option("--close", help="Also report this close's events.")] = None,
    bundle: Annotated[Path | None, typer.Option(help="Verify an evidence bundle offline (no database).")] = None,
    key: Annotated[str | None, typer.Option(help="With --bundle: the verifier key you trust (pins it).")] = None,
) -> None:
    """Recompute the hash chain and check it against the last signed checkpoint; exit 1 naming what broke."""
    if bundle is not None:
        _verify_bundle_offline(bundle, key)
        return
    rt = runtime()

    async def go() -> tuple[Any, Any, Any, int | None]:
        async with connection(rt) as conn:
            await seal_pending(conn)
            result = await verify_chain(conn, collect_leaves=True)
            tree = MerkleTree(result.leaf_hashes) if result.leaf_hashes is not None else None
            checkpoint_error = None
            latest = await latest_checkpoint(conn)
            if tree is not None:
                try:
                    check_extends(tree, latest)
                except LogInconsistent as exc:
                    checkpoint_error = exc
            count = None
            if close is not None:
                await load_close(conn, close)
                count = len([e async for e in iter_events(conn, close_id=close)])
        return result, tree, checkpoint_error or latest, count

    result, tree, checkpoint, close_events = run(go)
    if not result.ok:
        err.print(f"[bold red]trace broken[/] at seq {result.first_bad_seq}: {escape(result.problem or '')}")
        raise typer.Exit(1)
    if isinstance(checkpoint, LogInconsistent):
        err.print(f"[bold red]trace broken:[/] {escape(str(checkpoint))}")
        raise typer.Exit(1)
    console.print(f"trace intact: tree size {tree.size}, root {tree_root(tree).hex()}")
    if checkpoint is not None:
        console.print(
            f"consistent with the checkpoint signed at tree size {checkpoint.tree_size} ({checkpoint.key_name})"
        )
    if close_events is not None:
        console.print(f"close {close}: {close_events} events")


def _verify_bundle_offline(path: Path, key: str | None) -> None:
    try:
        report = verify_bundle(path.read_bytes(), pinned_key=key)
    except OSError as exc:
        fail(f"{path.name}: {exc.strerror}")
        return
    except BundleInvalid as exc:
        err.print(f"[bold red]bundle invalid:[/] {escape(exc.reason)}")
        raise typer.Exit(1) from exc
    console.print(
        f"bundle verified: {report.events} events of close {report.close_id} included in tree size "
        f"{report.tree_size}, root {report.root.hex()}, signed by {report.key_name} ({report.origin})"
    )
    if key is None:
        console.print("note: checked against the key inside the bundle; pin the key you trust with --key")


@trace_app.command("export")
def trace_export(
    close: Annotated[str, typer.Option("--close", help="Close id.")],
    fmt: Annotated[str, typer.Option("--format", help="json, csv or bundle.")] = "json",
    out: Annotated[Path | None, typer.Option(help="Output file (default: stdout; required for bundle).")] = None,
) -> None:
    """Export one close's trace events, or an evidence bundle an auditor verifies offline."""
    if fmt not in (*FORMATS, "bundle"):
        fail(f"--format: must be one of {', '.join((*FORMATS, 'bundle'))}, not {fmt!r}")
    if fmt == "bundle" and out is None:
        fail("--out: a bundle is a zip file; name where to write it")
    rt = runtime()

    async def go() -> tuple[int, bytes]:
        if fmt != "bundle":
            # The export every door shares; it records `trace_exported` (as the owner: the engine role may not).
            async with connection(rt, "owner") as conn:
                await load_close(conn, close)
                await seal_pending(conn)
                exported = await export_trace(
                    conn, close_id=close, fmt=fmt, requested_by="countersign-cli", platform="cli"
                )
            return exported.events, exported.data
        async with connection(rt) as conn:
            await load_close(conn, close)
            await seal_pending(conn)
            signer = load_trace_signer(rt.settings)
            await sign_log_checkpoint(conn, signer, rt.settings.trace_origin, actor="countersign-cli")
            latest = await latest_checkpoint(conn)
            assert latest is not None
            tree = await load_tree(conn, size=latest.tree_size)
            events = [e async for e in iter_events(conn, close_id=close, upto_seq=latest.tree_size)]
            data = build_bundle(
                close_id=close,
                events=events,
                tree=tree,
                checkpoint_note=latest.note,
                verifier_key=verifier_key_text(signer),
            )
            return len(events), data

    count, data = run(go)

    async def record_bundle_export() -> None:
        # The export is itself a trace event (the engine role may not write it: the owner does, for the CLI).
        async with connection(rt, "owner") as conn:
            await record_trace_exported(
                conn, principal_id="countersign-cli", close_id=close, fmt=fmt, data=data, platform="cli"
            )

    if fmt == "bundle":
        run(record_bundle_export)
    if out is None:
        sys.stdout.buffer.write(data)
    else:
        out.write_bytes(data)
        console.print(f"wrote {count} events to {out}")


@trace_app.command("show")
def trace_show(close: Annotated[str, typer.Option("--close", help="Close id.")]) -> None:
    """The close as a readable timeline of who handed what to whom."""
    from countersign.timeline import print_timeline

    rt = runtime()

    async def go() -> list[Any]:
        async with connection(rt) as conn:
            await load_close(conn, close)
            await seal_pending(conn)
            return [e async for e in iter_events(conn, close_id=close)]

    print_timeline(run(go), console)


@trace_app.command("prove")
def trace_prove(
    seq: Annotated[int, typer.Option(help="Sequence number of the event.")],
    size: Annotated[int | None, typer.Option(help="Tree size (default: the whole log).")] = None,
) -> None:
    """An RFC 9162 inclusion proof for one event, as JSON (hashes in hex)."""
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

    sys.stdout.write(json.dumps(run(go), indent=2) + "\n")


@trace_app.command("consistency")
def trace_consistency(
    from_size: Annotated[int, typer.Option("--from", help="The older tree size.")],
    to_size: Annotated[int, typer.Option("--to", help="The newer tree size.")],
) -> None:
    """An RFC 9162 consistency proof between two tree sizes, as JSON (hashes in hex)."""
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

    sys.stdout.write(json.dumps(run(go), indent=2) + "\n")


# --- processes -----------------------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    graceful_timeout_s: Annotated[int, typer.Option(help="On SIGTERM, seconds in-flight requests get to finish.")] = 20,
    header_read_timeout_s: Annotated[
        float, typer.Option(help="Close a connection whose request head is not complete within this many seconds.")
    ] = HEADER_READ_TIMEOUT_S,
) -> None:
    """Serve the HTTP API: Slack, Teams, signed callbacks, read APIs, health, readiness and /metrics.

    SIGTERM stops accepting connections, lets in-flight requests finish (up to --graceful-timeout-s), then closes
    in-flight card updates, the sealer and the pools. Request heads over 32 KiB or 100 fields get 431; a connection
    silent past --header-read-timeout-s is closed (countersign/limits.py).
    """
    import uvicorn

    from countersign import telemetry
    from countersign.app import MissingSecret, create_app

    rt = runtime(roles=("engine", "callbacks"))
    json_logs = _observe(rt.settings.log_format, telemetry.SERVE)
    try:
        application = create_app(rt)
    except MissingSecret as exc:
        fail(str(exc))
        return
    # What is built by now (the app, the SDKs' modules) lives as long as the process: keep it out of the cyclic
    # collector's full passes, which otherwise stall every in-flight request for tens of milliseconds.
    gc.freeze()
    try:
        uvicorn.run(
            application,
            host=host,
            port=port,
            log_level="info",
            **_bounded_http(SERVE_MAX_CONCURRENCY, header_read_timeout_s),
            timeout_graceful_shutdown=graceful_timeout_s,  # uvicorn waits this long for in-flight requests
            log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
        )
    finally:
        telemetry.shutdown_tracing()


def _bounded_http(max_requests_in_flight: int, header_read_timeout_s: float) -> dict[str, Any]:
    """uvicorn's arguments for a door: our bounded protocol (ADR 0023) in place of its unbounded ones."""
    from http_edge.protocol import ConnectionBounds, bounded_protocol

    if header_read_timeout_s <= 0:
        fail(f"--header-read-timeout-s must be positive, not {header_read_timeout_s}")
    bounds = ConnectionBounds(
        max_header_bytes=MAX_HEADER_BYTES,
        max_header_count=MAX_HEADER_COUNT,
        header_read_timeout_s=header_read_timeout_s,
        body_read_timeout_s=BODY_READ_TIMEOUT_S,
        max_requests_in_flight=max_requests_in_flight,
    )
    # uvicorn's own `limit_concurrency` counts idle sockets too; the protocol counts requests in flight instead.
    return {"http": bounded_protocol(bounds), "limit_concurrency": None, "timeout_keep_alive": KEEP_ALIVE_TIMEOUT_S}


def _observe(log_format: str, service_name: str) -> bool:
    """Logs and traces for a long-running process (countersign/telemetry.py); True when logs are JSON."""
    from countersign import telemetry

    if log_format not in telemetry.LOG_FORMATS:
        fail(f"COUNTERSIGN_LOG_FORMAT must be one of {', '.join(telemetry.LOG_FORMATS)}, not {log_format!r}")
    telemetry.configure_logging(log_format)
    telemetry.setup_tracing(service_name)
    return log_format == "json"


@specialists_app.command("serve")
def specialists_serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8100,
    public_url: Annotated[str | None, typer.Option(help="Base URL clients reach (for the agent cards).")] = None,
    header_read_timeout_s: Annotated[
        float, typer.Option(help="Close a connection whose request head is not complete within this many seconds.")
    ] = HEADER_READ_TIMEOUT_S,
) -> None:
    """Serve the specialists as A2A HTTP services (every call needs COUNTERSIGN_SPECIALIST_TOKEN)."""
    import uvicorn

    from countersign import telemetry
    from specialists.server import build_specialists_app

    settings = settings_or_exit()
    token = settings.specialist_token
    if not token:
        fail("COUNTERSIGN_SPECIALIST_TOKEN is not set: refusing to serve the specialists without a bearer token")
        return
    json_logs = _observe(settings.log_format, telemetry.SPECIALISTS)
    import httpx

    from countersign.runtime import build_narrator

    # The model API's client lives as long as the process; replay needs none.
    narrator = build_narrator(settings, None if settings.model_provider == "replay" else httpx.AsyncClient())
    specialists = build_specialists_app(public_url or f"http://{host}:{port}", token=token, narrator=narrator)
    application = telemetry.instrument_asgi(specialists)
    try:
        uvicorn.run(
            application,
            host=host,
            port=port,
            **_bounded_http(SPECIALISTS_MAX_CONCURRENCY, header_read_timeout_s),
            timeout_graceful_shutdown=20,
            log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
        )
    finally:
        telemetry.shutdown_tracing()


@app.command()
def worker(
    once: Annotated[bool, typer.Option(help="Advance every runnable close once, then exit.")] = False,
    interval_s: Annotated[float, typer.Option(help="Seconds between passes.")] = 5.0,
    max_passes: Annotated[int, typer.Option(help="Stop after this many passes (0: no limit).")] = 0,
    close: Annotated[str | None, typer.Option("--close", help="Only this close (drills use it).")] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve this worker's /metrics on this port (pass duration, deliveries).")
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="Interface for --metrics-port.")] = "127.0.0.1",
    grace_s: Annotated[float, typer.Option(help="On SIGTERM, seconds the pass in flight gets to finish.")] = 30.0,
) -> None:
    """Advance every runnable close; many workers may run against one database.

    SIGTERM (or Ctrl-C) starts no new close or delivery; the one in flight gets --grace-s seconds to finish, then is
    cancelled; every outbox claim and dispatch lease this process still holds is released; exit 0.
    """
    from opentelemetry import trace

    from bot.delivery import DeliveryReport, deliver_due
    from countersign import telemetry
    from countersign.metrics import WorkerMetrics
    from countersign.shutdown import StopSignal, finish_or_cancel, release_claims
    from engine.leases import Connect
    from engine.orchestrator import AdvanceReport
    from engine.worker import run_worker_pass

    rt = runtime(roles=("engine",))
    try:
        check_chat_settings(rt.settings)
    except ChatConfigError as exc:
        fail(str(exc))
    _observe(rt.settings.log_format, telemetry.WORKER)
    senders = build_senders(rt.settings)
    metrics = WorkerMetrics()
    tracer = trace.get_tracer("countersign.worker")

    def connect() -> Any:  # a connection per short step: none is held across a specialist, Slack or Teams call
        return connection(rt)

    def advanced(report: AdvanceReport) -> None:
        metrics.closes_advanced.inc()
        for step in report.steps:
            console.print(f"{report.close_id[:8]} {escape(step)}", highlight=False)

    async def deliver(connect: Connect) -> DeliveryReport:
        return await deliver_due(connect, senders)  # type: ignore[arg-type]

    async def one_pass(stop: StopSignal) -> int:
        async with engine_context(rt) as ctx:
            report = await run_worker_pass(
                connect, ctx, deliver, only_close=close, should_stop=lambda: stop.is_set, on_advanced=advanced
            )
        if report.delivery is not None:
            for error in report.delivery.errors:
                console.print(f"outbox: {escape(error)}", highlight=False)
            metrics.outbox.labels("sent").inc(report.delivery.sent)
            metrics.outbox.labels("retried").inc(report.delivery.retried)
            metrics.outbox.labels("failed").inc(report.delivery.failed)
        return len(report.advanced)

    async def loop() -> None:
        stop = StopSignal()
        stop.install()
        passes = 0
        try:
            while not stop.is_set:
                started = time.perf_counter()
                with tracer.start_as_current_span("worker.pass"):
                    done = await finish_or_cancel(one_pass(stop), stop, grace_s=grace_s)
                metrics.pass_seconds.observe(time.perf_counter() - started)
                metrics.passes.labels("cancelled" if done is None else "completed").inc()
                passes += 1
                if once or (max_passes and passes >= max_passes):
                    return
                await stop.sleep(interval_s)
        finally:
            if stop.is_set:
                async with connect() as conn:
                    released = await release_claims(conn)
                err.print(
                    f"worker stopping on signal {stop.received}: released {released.outbox_messages} outbox claims"
                    f" and {released.dispatches} dispatch leases",
                    highlight=False,
                )
            stop.uninstall()

    if metrics_port is not None:
        bound = metrics.serve(metrics_host, metrics_port)
        err.print(f"worker metrics at http://{metrics_host}:{bound}/metrics", highlight=False)
    try:
        run(loop)
    finally:
        metrics.close()
        telemetry.shutdown_tracing()


@app.command()
def demo(
    seed: Annotated[int, typer.Option(help="Seed for the synthetic books.")] = 42,
    workflow: Annotated[
        str, typer.Option(help="close: a month-end close; certificates: a month of payment certificates.")
    ] = "close",
) -> None:
    """Run a workflow end to end on synthetic data: human gates over the signed callback, trace verified, timeline."""
    if workflow not in ("close", "certificates"):
        fail(f"--workflow must be close or certificates, got {workflow!r}")
    rt = runtime()
    if workflow == "certificates":
        from scenarios.demo_certificates import DemoRefused, run_certificates_demo

        try:
            ok = run(lambda: run_certificates_demo(rt, seed=seed, console=console))
        except DemoRefused as exc:
            fail(str(exc), code=1)
        raise typer.Exit(0 if ok else 1)
    from scenarios.demo import run_demo

    ok = run(lambda: run_demo(rt, seed=seed, console=console))
    raise typer.Exit(0 if ok else 1)


@dispatch_app.command("replay")
def dispatch_replay(
    dispatch_id: Annotated[int, typer.Argument(help="A dead-lettered dispatch id (close status).")],
) -> None:
    """Give a dead-lettered dispatch fresh attempts; the next advance retries its task."""
    from engine.dispatch import NotDeadLettered, NotReplayable, replay_dead_letter

    rt = runtime()

    async def go() -> tuple[str, str]:
        async with connection(rt) as conn:
            replayed = await replay_dead_letter(conn, dispatch_id, actor="countersign-cli")
            await seal_pending(conn)
            return replayed

    try:
        close_id, task = run(go)
    except (NotDeadLettered, NotReplayable) as exc:
        fail(str(exc))
        return
    console.print(f"dispatch {dispatch_id} replayed: {task} of close {close_id} will run on the next advance")


@drill_app.command("idempotency")
def drill_idempotency(
    retries: Annotated[int, typer.Option(help="Identical concurrent retries of one dispatch and its posting.")] = 36,
    processes: Annotated[int, typer.Option(help="Operating-system processes to spread them over.")] = 4,
    changed_storm: Annotated[bool, typer.Option(help="Then retry with a changed payload under the same key.")] = True,
) -> None:
    """Force a retry storm; print the database it ran against and the duplicates (there must be none)."""
    from scenarios.drills import NotPostgres, run_idempotency_drill

    rt = runtime()
    try:
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
    from drill_hooks.kill_points import POINTS
    from scenarios.drills import NotPostgres, run_restart_drill

    chosen = tuple(point or POINTS)
    unknown = [p for p in chosen if p not in POINTS]
    if unknown:
        fail(f"--point: unknown kill point(s) {unknown}; known: {', '.join(POINTS)}")
    rt = runtime()
    try:
        results = run_restart_drill(rt, chosen)
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
    from scenarios.drills import NotPostgres, run_workers_drill

    rt = runtime()
    try:
        report = run_workers_drill(rt, closes=closes, workers=workers)
    except NotPostgres as exc:
        fail(str(exc))
        return
    console.print(
        f"{report.closed} of {report.closes} closes closed by {report.workers} workers in {report.seconds:.1f}s; "
        f"problems: {len(report.problems)}"
    )
    for problem in report.problems[:10]:
        err.print(f"problem: {escape(problem)}")
    if not report.passed:
        raise typer.Exit(1)
    console.print("[bold green]workers drill passed[/]")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
