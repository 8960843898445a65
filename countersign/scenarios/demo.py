"""`countersign demo`: one whole close on the real stack, decided by scripted people over the signed callback.

Nothing here takes a shortcut a person could not: gates are decided by HTTP requests to the running server,
signed like any client's (the door's HMAC) and by each scripted person's own Ed25519 key, generated for the run and
registered with their principal; the halt is resolved by loading the corrected bank feed and approving a re-run.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import replace
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from countersign.audit.trace import iter_events, verify_chain
from countersign.bootstrap.runtime import Runtime, connection, engine_context, start_rules
from countersign.bootstrap.timeline import print_timeline
from countersign.callbacks.principals import Principal, parse_principals, upsert_principals
from countersign.callbacks.signature import sign
from countersign.engine.books import load_bank_feed
from countersign.engine.orchestrator import advance
from countersign.engine.runs import TaskRow, close_status, count_closes_with_entity_prefix, load_close, task_rows
from countersign.policy.model import PLATFORM_IDENTITY
from countersign.scenarios.demo_server import demo_server
from countersign.scenarios.passkey_people import PasskeyPeople
from countersign.scenarios.scripted_decisions import eligible_voters
from countersign.scenarios.scripted_people import ScriptedPeople
from countersign.services.loading import load_book_set
from countersign.services.starting import start_close_on_book_set
from countersign.specialists.narration import MODEL_OFF_REASONS
from countersign.states import GateStatus, RunState
from countersign.synthetic import generate_books, load_profile

MAX_ROUNDS = 20


async def _demo_entity(rt: Runtime, seed: int) -> str:
    async with connection(rt) as conn:
        earlier = await count_closes_with_entity_prefix(conn, f"DEMO-{seed}-")
    return f"DEMO-{seed}-{earlier + 1}"


def _starter(people: list[Principal]) -> Principal:
    """The person who starts the close (and so prepares its work) is not one of its approvers."""
    return next(p for p in people if "accountant" in p.roles)


class SignedClient:
    """Posts decisions to the server exactly as an external client would: a gate that needs a person's own key is
    signed with the person's passkey on the Close Board, any other over the signed callback."""

    def __init__(self, base_url: str, secret: str, people: ScriptedPeople, board: PasskeyPeople) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=30)
        self.secret = secret
        self.people = people
        self.board = board

    async def enrol_approvers(self, rt: Runtime, people: list[Principal], console: Console) -> None:
        """Everyone who may decide a gate enrols a passkey from an owner's one-time link, then signs in."""
        approvers = [p for p in people if p.is_human and {"controller", "cfo"} & set(p.roles)]
        for person in approvers:
            await self.board.enrol(rt, person.principal_id)
        console.print(
            f"passkeys enrolled from one-time links and signed in: {', '.join(p.display_name for p in approvers)}"
        )

    async def decide(self, gate: dict[str, Any], principal: str, decision: str, reason: str) -> httpx.Response:
        """A gate whose tier accepts only a person's own key (risk.yaml `proofs`) is signed on the board with the
        person's passkey; any other over the signed callback, signed over the gate as the status read showed it."""
        gate_id = gate["gate_id"]
        if PLATFORM_IDENTITY not in gate["accepted_proofs"] and principal in self.board.people:
            return await self.board.decide(principal, gate_id, decision, reason)
        body = self.people.body(gate_id, principal, decision, reason, summary_digest=gate["summary_digest"])
        return await self.post(gate_id, json.dumps(body).encode())

    async def post(self, gate_id: str, body: bytes) -> httpx.Response:
        stamp = str(int(time.time()))
        return await self.http.post(
            f"/callbacks/gates/{gate_id}/decisions",
            content=body,
            headers={
                "content-type": "application/json",
                "x-countersign-timestamp": stamp,
                "x-countersign-signature": sign(self.secret, stamp, body),
            },
        )

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.board.aclose()


async def run_demo(rt: Runtime, *, seed: int, console: Console, progress_console: Console | None = None) -> bool:
    """The demo close end to end, told on `console`; the spinner over synthesis and loading goes to
    `progress_console` (the CLI passes stderr, so stdout keeps only the story), or `console` when none is given."""
    secret = rt.settings.callback_secret or secrets.token_hex(32)
    rt = replace(rt, settings=rt.settings.model_copy(update=dict(callback_secret=secret)))
    entity = await _demo_entity(rt, seed)
    profile = load_profile(rt.settings.profile_path("default"))
    period = profile.period
    books_dir = rt.settings.state_dir / "demo" / entity

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=progress_console or console,
        transient=True,
        disable=not (progress_console or console).is_terminal,
        redirect_stdout=False,
    ) as progress:
        step = progress.add_task(f"synthesizing books for {entity} (seed {seed})")
        generate_books(profile, seed, books_dir, entity=entity, period=period)
        progress.update(step, description="loading books into PostgreSQL")
        people = parse_principals(rt.settings.principals_path)
        scripted = ScriptedPeople(people)  # each scripted approver gets their own key for this run
        async with connection(rt, "owner") as conn:
            await upsert_principals(conn, scripted.registered(people))
        async with connection(rt) as conn:
            loaded = await load_book_set(conn, books_dir, loaded_by="countersign-demo")
            close_id = await start_close_on_book_set(
                conn,
                start_rules(rt),
                entity=entity,
                period=period,
                book_set_id=loaded.book_set_id,
                started_by=_starter(people).principal_id,
            )
    console.rule(f"[bold]Close {entity} {period}[/]  ({close_id})")
    console.print(f"books: {loaded.gl_lines:,} GL lines, profile default, seed {seed}")

    async with demo_server(rt) as served:
        client = SignedClient(served.base_url, secret, scripted, PasskeyPeople(served.board_url, served.base_url))
        console.print(f"server listening on {served.base_url}: signed callbacks, the Close Board at {served.board_url}")
        try:
            await client.enrol_approvers(rt, people, console)
            closed = await _drive(rt, close_id, books_dir, people, client, console)
        finally:
            await client.aclose()

    async with connection(rt) as conn:
        verified = await verify_chain(conn)
        events = [e async for e in iter_events(conn, close_id=close_id)]
        status = await close_status(conn, close_id)
    print_timeline(events, console)
    decided = [d for g in status["gates"] for d in g["decisions"]]
    console.print(
        f"gates: {len(status['gates'])}, decisions by humans: {len(decided)} "
        f"({', '.join(sorted({d['principal'] for d in decided}))})"
    )
    console.print(
        f"trace: {'intact' if verified.ok else 'BROKEN at seq ' + str(verified.first_bad_seq)}, "
        f"{verified.size} events, head {verified.head_hash.hex()[:16]}…"
    )
    console.print(f"close status: [bold]{status['status']}[/]")
    return closed and verified.ok


MODEL_PROSE = (("explanation", "explanation_source"), ("narrative", "narrative_source"))


def _print_model_prose(tasks: dict[str, TaskRow], shown: set[tuple[str, int, str]], console: Console) -> None:
    """Each new model-written explanation or narrative, once, with where it came from (model or fallback)."""
    for row in tasks.values():
        for text_key, source_key in MODEL_PROSE:
            result = row.result or {}
            if source_key not in result or (row.task, row.attempt, text_key) in shown:
                continue
            shown.add((row.task, row.attempt, text_key))
            flags = ", ".join(result.get(f"{text_key}_flags") or []) or "no flags"
            console.print(f"   [cyan]{row.task} {text_key} ({result[source_key]}; {flags}):[/]", highlight=False)
            console.print(f"      {escape(str(result[text_key]))}", highlight=False)


async def _drive(
    rt: Runtime,
    close_id: str,
    books_dir: Any,
    people: list[Principal],
    client: SignedClient,
    console: Console,
) -> bool:
    machine_refusal_shown = False
    prose_shown: set[tuple[str, int, str]] = set()
    async with engine_context(rt) as ctx:
        for round_no in range(1, MAX_ROUNDS + 1):
            async with connection(rt) as conn:
                report = await advance(conn, close_id, ctx)
                status = await close_status(conn, close_id)
                tasks = await task_rows(conn, close_id)
            console.print(f"[bold]advance #{round_no}[/] → {report.status}")
            for line in report.steps:
                console.print(f"   {escape(line)}", highlight=False)
            _print_model_prose(tasks, prose_shown, console)
            if report.status == RunState.CLOSED:
                return True
            if report.status == RunState.BLOCKED:
                console.print(f"[red]close blocked: {escape(str(status.get('status_reason')))}[/]")
                return False
            open_gates = [g for g in status["gates"] if g["status"] == GateStatus.OPEN]
            if not open_gates:
                console.print("[red]nothing to decide and nothing ran: stopping[/]")
                return False
            for gate in open_gates:
                if not machine_refusal_shown:
                    refused = await client.decide(gate, "Orchestrator", "approve", "self-approval attempt")
                    console.print(
                        f"   [yellow]orchestrator tries to approve gate {gate['gate_id'][:8]}:[/] "
                        f"HTTP {refused.status_code} {refused.json().get('error')}"
                    )
                    machine_refusal_shown = True
                if gate["kind"] == "escalation" and gate["task"] == "bank_reconciliation":
                    investigator = eligible_voters(people, gate)[0]
                    async with connection(rt) as conn:
                        version = await load_bank_feed(
                            conn,
                            await _book_set(conn, close_id),
                            books_dir / "corrected" / "bank_lines.csv",
                            loaded_by=investigator.principal_id,
                            close_id=close_id,
                        )
                    console.print(
                        f"   {investigator.display_name} investigates the halt and loads the corrected bank feed"
                        f" (version {version})"
                    )
                reason = _decision_reason(gate, tasks)
                for person in eligible_voters(people, gate)[: gate["quorum"] - gate["approvals"]]:
                    response = await client.decide(gate, person.principal_id, "approve", reason)
                    if response.status_code != 200:
                        console.print(f"[red]decision refused: {response.status_code} {escape(response.text)}[/]")
                        return False
                    body = response.json()
                    console.print(
                        f"   {person.display_name} approves {gate['task']} ({gate['kind']}, tier {gate['tier']})"
                        f" → {body['status']} {body['approvals']}/{body['quorum']}"
                    )
    return False


def _decision_reason(gate: dict[str, Any], tasks: dict[str, TaskRow]) -> str:
    """What the scripted approver writes: an escalation's reason says what approving it does."""
    if gate["kind"] != "escalation":
        return "reviewed"
    if gate["task"] == "bank_reconciliation":
        return "re-run with corrected bank feed"
    row = tasks.get(gate["task"])
    if row is not None and row.escalation in MODEL_OFF_REASONS:
        return f"{row.escalation}: accept the deterministic text, flagged, and review it at the next gate"
    return "re-run approved"


async def _book_set(conn: Any, close_id: str) -> int:
    return (await load_close(conn, close_id)).book_set_id
