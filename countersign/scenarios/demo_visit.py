"""`countersign demo --serve`: after the story, a close left open on a running server for a person to visit.

A second demo close is started on fresh synthetic books and advanced until it waits on people. The real app then
listens on `--port` with its Close Board at `COUNTERSIGN_BOARD_URL`, or at `http://localhost:PORT` when that is not
set (the board's origin follows the port: passkeys are bound to it). Each approver gets a one-time enrolment link, as
`countersign principals enroll` makes, so the visitor enrols a passkey in their own browser, signs in and decides the
open gates. While it serves, the close is advanced every few seconds, as a worker would, so a decision moves it on.
Nothing is scripted in this part: every decision on the open close is the visitor's.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import uvicorn
from rich.console import Console
from rich.markup import escape

from countersign.bootstrap.app import create_app
from countersign.bootstrap.runtime import Runtime, connection, engine_context, start_rules
from countersign.callbacks.passkeys import issue_enrolment
from countersign.callbacks.principals import Principal, parse_principals
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status, count_closes_with_entity_prefix
from countersign.services.loading import load_book_set
from countersign.services.starting import start_close_on_book_set
from countersign.states import GateStatus, RunState
from countersign.synthetic import generate_books, load_profile

ADVANCE_EVERY_S = 3.0
MAX_SETTLE_ROUNDS = 10
ENROLMENT_HOURS = 24
APPROVER_ROLES = frozenset({"controller", "cfo"})


@dataclass(frozen=True)
class OpenClose:
    close_id: str
    entity: str
    period: str
    waiting: tuple[str, ...]  # the open gates' tasks


@dataclass(frozen=True)
class Visit:
    """What the visitor is told: where the board is, the open close, and one enrolment link per approver."""

    board_url: str
    listen_url: str
    close: OpenClose
    links: tuple[tuple[Principal, str], ...]
    serving: asyncio.Task[None]  # ends when the server stops (uvicorn stops on SIGINT and SIGTERM itself)

    @property
    def close_url(self) -> str:
        return f"{self.board_url}/board/closes/{self.close.close_id}"


def board_url_for(rt: Runtime, port: int) -> str:
    """COUNTERSIGN_BOARD_URL when it was set; otherwise http://localhost:PORT, the port the server listens on."""
    if "board_url" in rt.settings.model_fields_set:
        return rt.settings.board_url.rstrip("/")
    return f"http://localhost:{port}"


async def open_demo_close(rt: Runtime, seed: int) -> OpenClose:
    """A fresh demo close (its own entity), advanced until it waits on people or stops."""
    async with connection(rt) as conn:
        earlier = await count_closes_with_entity_prefix(conn, f"VISIT-{seed}-")
    entity = f"VISIT-{seed}-{earlier + 1}"
    profile = load_profile(rt.settings.profile_path("default"))
    books_dir = rt.settings.state_dir / "demo" / entity
    generate_books(profile, seed, books_dir, entity=entity, period=profile.period)
    people = parse_principals(rt.settings.principals_path)
    starter = next(p for p in people if "accountant" in p.roles)  # the preparer is not one of its approvers
    async with connection(rt) as conn:
        loaded = await load_book_set(conn, books_dir, loaded_by="countersign-demo")
        close_id = await start_close_on_book_set(
            conn,
            start_rules(rt),
            entity=entity,
            period=profile.period,
            book_set_id=loaded.book_set_id,
            started_by=starter.principal_id,
        )
    async with engine_context(rt) as ctx:
        for _ in range(MAX_SETTLE_ROUNDS):
            async with connection(rt) as conn:
                report = await advance(conn, close_id, ctx)
            if report.status != RunState.RUNNING or not report.steps:
                break
        async with connection(rt) as conn:
            status = await close_status(conn, close_id)
    waiting = tuple(g["task"] for g in status["gates"] if g["status"] == GateStatus.OPEN)
    return OpenClose(close_id, entity, profile.period, waiting)


async def enrolment_links(rt: Runtime, board_url: str) -> tuple[tuple[Principal, str], ...]:
    """A one-time passkey enrolment link for every person who may approve the demo's gates (traced, as the owner)."""
    approvers = [
        p for p in parse_principals(rt.settings.principals_path) if p.is_human and APPROVER_ROLES & set(p.roles)
    ]
    links = []
    async with connection(rt, "owner") as conn:
        for person in approvers:
            async with conn.transaction():
                token = await issue_enrolment(
                    conn, person.principal_id, issued_by="countersign-demo", hours=ENROLMENT_HOURS
                )
            links.append((person, f"{board_url}/board/enrol#token={token}"))
    return tuple(links)


@asynccontextmanager
async def serving_visit(rt: Runtime, *, seed: int, host: str, port: int) -> AsyncIterator[Visit]:
    """The open close, the links and the server listening on host:port, with the close advanced in the background;
    everything stops when the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))  # bound first: a port already in use is an error before anything is started
    bound = int(sock.getsockname()[1])
    board_url = board_url_for(rt, bound)
    # The signed-callback door needs a secret to start; the demo makes one for this run when none is configured.
    secret = rt.settings.callback_secret or secrets.token_hex(32)
    rt = replace(rt, settings=rt.settings.model_copy(update={"board_url": board_url, "callback_secret": secret}))
    close = await open_demo_close(rt, seed)
    links = await enrolment_links(rt, board_url)
    server = uvicorn.Server(uvicorn.Config(create_app(rt), log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    moving = asyncio.create_task(_keep_advancing(rt, close.close_id))
    try:
        while not server.started:
            if serving.done():
                raise RuntimeError("the demo server failed to start")
            await asyncio.sleep(0.05)
        yield Visit(board_url, f"http://{host}:{bound}", close, links, serving)
    finally:
        moving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await moving
        server.should_exit = True
        await serving
        sock.close()


async def _keep_advancing(rt: Runtime, close_id: str) -> None:
    """What a worker would do for this one close: advance it, so an approval on the board moves it on."""
    async with engine_context(rt) as ctx:
        while True:
            await asyncio.sleep(ADVANCE_EVERY_S)
            async with connection(rt) as conn:
                report = await advance(conn, close_id, ctx)
            if report.status == RunState.CLOSED:
                return


def print_visit(visit: Visit, console: Console) -> None:
    close = visit.close
    console.rule("[bold]The Close Board is open[/]")
    console.print(f"server listening on {visit.listen_url}; the Close Board is at {visit.board_url}/board/")
    console.print(
        f"open close {escape(close.entity)} {close.period}: {visit.close_url}"
        + (f" (waiting on people at: {escape(', '.join(close.waiting))})" if close.waiting else "")
    )
    console.print(
        f"enrol a passkey in your browser with one of these one-time links ({ENROLMENT_HOURS} h), then sign in:"
    )
    for person, link in visit.links:
        console.print(f"  {escape(person.display_name)}:", highlight=False)
        print(f"    {link}")  # plain, so it can be copied whole
    console.print(
        "every decision on this close is yours; it is advanced every few seconds, as a worker would. Ctrl-C stops."
    )


async def serve_visit(rt: Runtime, *, seed: int, host: str, port: int, console: Console) -> None:
    """Serve the visit until SIGINT or SIGTERM. uvicorn takes both signals while it serves and raises them again when
    it has stopped; the loop's own handlers, installed first, take that second delivery, so it ends here quietly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        async with serving_visit(rt, seed=seed, host=host, port=port) as visit:
            print_visit(visit, console)
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({stopping, visit.serving}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
    console.print("stopped")
