"""Benchmark: a 1,000,000-GL-line entity from `close start` to its first gates, through PostgreSQL.

Run: .venv/bin/python bench/bench_close_1m.py [--lines 1000000] [--duplicates N] [--force-pages] [--smoke]
Generates the large profile's books (seed 42) in a child process, starts an embedded PostgreSQL, then in this
process: `close start` (the books loaded with COPY, the close and its tasks) and the first `close advance` with the
specialists served in-process over A2A (an ASGI transport, as `countersign close advance` runs them by default),
until the close stops at its first gates. Prints the wall time of each, the peak RSS of this process (engine and
specialists; PostgreSQL's own processes are not counted, nor the generator's), the largest A2A request and response
body, and a same-run baseline: the loaded GL lines read back with COPY TO STDOUT. Checks the bank reconciliation
against the books' ground truth (matched lines per account) and that no message exceeded the page bound.
`--duplicates N` copies N bank lines (ambiguous groups the database leaves to the specialist, so pages are sent).
Targets (issue 25): wall time < 120 s on 2 cores, peak RSS < 1 GB. `--smoke` runs about 2,000 GL lines and 50
duplicates with the same checks and no verdict, the bank reconciliation forced onto its paged path (make test runs
it). Bounded: aborts itself after ABORT_AFTER_SECONDS.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import dataclasses
import json
import os
import platform
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import exit_code, growth_exponent, stop_embedded  # noqa: E402

from countersign.bootstrap import migrate  # noqa: E402
from countersign.bootstrap.database import Database, start_embedded  # noqa: E402
from countersign.bootstrap.runtime import Runtime, connection, load_rules_all, start_rules  # noqa: E402
from countersign.bootstrap.settings import PROJECT_ROOT, Settings  # noqa: E402
from countersign.callbacks.principals import Principal, parse_principals, upsert_principals  # noqa: E402
from countersign.engine.context import EngineContext  # noqa: E402
from countersign.engine.orchestrator import advance  # noqa: E402
from countersign.engine.runs import close_status  # noqa: E402
from countersign.engine.workflows import shipped_handlers  # noqa: E402
from countersign.engine.workflows.close.bank_pages import PAGE_BYTES  # noqa: E402
from countersign.engine.workflows.close.reconciliation import BankReconciliation  # noqa: E402
from countersign.scenarios.scripted_decisions import decide_open_gates  # noqa: E402
from countersign.scenarios.scripted_people import ScriptedPeople  # noqa: E402
from countersign.services.starting import start_close_on_books  # noqa: E402
from countersign.specialists.client import IN_PROCESS_BASE_URL, SpecialistClient  # noqa: E402
from countersign.specialists.server import SPECIALIST_MAX_BODY_BYTES, build_specialists_app  # noqa: E402
from countersign.states import GateStatus, RunState  # noqa: E402

SEED = 42
FULL_LINES = 1_000_000
SMOKE_LINES = 2_000
SMOKE_DUPLICATES = 50
DUPLICATED_ACCOUNT = "1010"
TARGET_WALL_S = 120.0
TARGET_RSS_MB = 1024.0
ENVELOPE_BYTES = 64 * 1024
"""What the A2A JSON-RPC envelope and the closing message's listed lines may add to a page's lines."""
ABORT_AFTER_SECONDS = 900
MAX_ROUNDS = 20
STARTED_BY = "bench"
INVESTIGATOR = "bench"
"""Who loads the corrected bank feed a halted reconciliation's escalation asks for (not an approver of the close)."""
PROFILE = REPO_ROOT / "config" / "profiles" / "large.yaml"


class BenchAborted(Exception):
    pass


def _abort(signum: int, frame: object) -> None:
    raise BenchAborted(f"aborted after {ABORT_AFTER_SECONDS} s")


def peak_rss_mb() -> float:
    """This process's peak resident set so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def describe_machine() -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"python {platform.python_version()} on {platform.machine()}, cpus={cpus}"


def add_duplicates(books: Path, account: str, count: int) -> int:
    """Append a copy (new id, same date, amount and reference) of the first `count` bank lines of `account`: each makes
    a group of two bank lines and one GL line, which the database cannot pair and the specialist matches on a page
    (the original, first by id, takes the GL line; the copy stays unmatched). Returns how many were added."""
    path = books / "bank_lines.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle)
        header = next(rows)
        at_id, at_account = header.index("bank_line_id"), header.index("account")
        copies = []
        for row in rows:
            if len(copies) == count:
                break
            if row[at_account] == account:
                copies.append([f"{value}-D" if index == at_id else value for index, value in enumerate(row)])
    with path.open("a", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(copies)
    return len(copies)


def generate(books: Path, lines: int) -> float:
    """The books, written by a child process (its memory is not this process's); returns its wall time."""
    started = time.perf_counter()
    code = (
        "import sys; from pathlib import Path; from countersign.synthetic import generate_books, load_profile; "
        "generate_books(load_profile(Path(sys.argv[1])), int(sys.argv[2]), Path(sys.argv[3]),"
        " gl_lines=int(sys.argv[4]))"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(PROFILE), str(SEED), str(books), str(lines)],
        check=True,
        cwd=REPO_ROOT,
    )
    return time.perf_counter() - started


@dataclasses.dataclass
class Sizes:
    """The largest A2A request and response bodies, as the HTTP client sent and received them."""

    largest_request: int = 0
    largest_response: int = 0
    requests: int = 0

    async def on_request(self, request: httpx.Request) -> None:
        self.requests += 1
        self.largest_request = max(self.largest_request, len(request.content))

    async def on_response(self, response: httpx.Response) -> None:
        await response.aread()
        self.largest_response = max(self.largest_response, len(response.content))


@asynccontextmanager
async def measured_engine(rt: Runtime, sizes: Sizes, *, force_pages: bool) -> AsyncIterator[EngineContext]:
    """The engine context `close advance` uses by default (specialists in process over A2A), with the HTTP client's
    bodies measured. No model narrator: a halt is explained by its deterministic text. `force_pages`: the bank
    reconciliation takes its paged path even when the books would fit one message (the smoke run's books do)."""
    handlers = dict(shipped_handlers(rt.load_retriever))
    if force_pages:
        handlers["close.bank_reconciliation"] = BankReconciliation(force_pages=True)
    token = secrets.token_urlsafe(32)
    app = build_specialists_app(IN_PROCESS_BASE_URL, None, token=token)
    hooks: dict[str, list[Callable[..., Any]]] = {"request": [sizes.on_request], "response": [sizes.on_response]}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=IN_PROCESS_BASE_URL, event_hooks=hooks
    ) as http:
        client = SpecialistClient(http, IN_PROCESS_BASE_URL, token=token)
        try:
            yield EngineContext(rt.policy, rt.workflows, call=client.call, handlers=handlers)
        finally:
            await client.aclose()


@dataclasses.dataclass
class Round:
    """One round after the first gates: scripted people decide every open gate, then the close advances."""

    decisions: int
    feeds_loaded: int
    decide_s: float
    advance_s: float
    status: str
    open_gates: int


@dataclasses.dataclass
class Run:
    start_s: float
    start_rss_mb: float
    advance_s: float
    advance_rss_mb: float
    status: str
    steps: list[str]
    bank: dict[str, Any]
    open_gates: int
    rounds: list[Round]
    final_status: str
    final_rss_mb: float
    undecided_gates: int
    dead_letters: int
    gl_lines: int
    read_back_s: float
    read_back_bytes: int

    @property
    def to_first_gates_s(self) -> float:
        return self.start_s + self.advance_s

    @property
    def to_closed_s(self) -> float:
        return self.to_first_gates_s + sum(r.decide_s + r.advance_s for r in self.rounds)

    @property
    def decisions(self) -> int:
        return sum(r.decisions for r in self.rounds)


async def _gates_and_bank(rt: Runtime, close_id: str) -> tuple[int, int, dict[str, Any]]:
    """The close's open gates, its gates not approved (open, voided, rejected), and its bank reconciliation's result."""
    async with connection(rt) as conn, conn.cursor() as cur:
        await cur.execute(
            "SELECT result FROM close_task WHERE close_id = %s AND task = 'bank_reconciliation'", (close_id,)
        )
        row = await cur.fetchone()
        gates = (await close_status(conn, close_id))["gates"]
    open_gates = sum(gate["status"] == GateStatus.OPEN for gate in gates)
    undecided = sum(gate["status"] != GateStatus.APPROVED for gate in gates)
    return open_gates, undecided, dict(row[0]) if row and row[0] else {}


async def run_close(
    rt: Runtime,
    books: Path,
    entity: str,
    period: str,
    sizes: Sizes,
    *,
    force_pages: bool,
    people: list[Principal],
    scripted: ScriptedPeople,
) -> Run:
    started = time.perf_counter()
    async with connection(rt) as conn:
        close_id = await start_close_on_books(
            conn, start_rules(rt), entity=entity, period=period, books_dir=books, started_by=STARTED_BY
        )
    start_s = time.perf_counter() - started
    start_rss = peak_rss_mb()
    rounds: list[Round] = []
    async with measured_engine(rt, sizes, force_pages=force_pages) as ctx:
        started = time.perf_counter()
        report = await advance(lambda: connection(rt), close_id, ctx)
        advance_s = time.perf_counter() - started
        advance_rss = peak_rss_mb()
        first_status, first_steps = report.status, report.steps
        open_gates, _, bank = await _gates_and_bank(rt, close_id)
        gates_now = open_gates
        while report.status != RunState.CLOSED and gates_now and len(rounds) < MAX_ROUNDS:
            started = time.perf_counter()
            decided = await decide_open_gates(
                rt, close_id, books, people, scripted, reason="reviewed by the benchmark's scripted approver",
                loaded_by=INVESTIGATOR,
            )  # fmt: skip
            decide_s = time.perf_counter() - started
            started = time.perf_counter()
            report = await advance(lambda: connection(rt), close_id, ctx)
            round_advance_s = time.perf_counter() - started
            gates_now, _, _ = await _gates_and_bank(rt, close_id)
            rounds.append(
                Round(decided.decisions, decided.feeds_loaded, decide_s, round_advance_s, report.status, gates_now)
            )
            if not decided.decisions:
                break  # open gates nobody eligible could decide: the check names the close's state
    final_rss = peak_rss_mb()
    _, undecided, _ = await _gates_and_bank(rt, close_id)
    async with connection(rt) as conn, conn.cursor() as cur:
        await cur.execute("SELECT count(*) FROM dispatch WHERE close_id = %s AND status = 'dead'", (close_id,))
        dead = int((await cur.fetchone() or (0,))[0])
        await cur.execute("SELECT book_set_id FROM close_run WHERE close_id = %s", (close_id,))
        book_set_id = (await cur.fetchone() or (0,))[0]
    read_back_s, read_back_bytes, gl_lines = read_back(rt, book_set_id)
    return Run(
        start_s,
        start_rss,
        advance_s,
        advance_rss,
        first_status,
        first_steps,
        bank,
        open_gates,
        rounds,
        report.status,
        final_rss,
        undecided,
        dead,
        gl_lines,
        read_back_s,
        read_back_bytes,
    )


def read_back(rt: Runtime, book_set_id: int) -> tuple[float, int, int]:
    """The baseline: every loaded GL line of the book set streamed back out with COPY TO STDOUT."""
    started = time.perf_counter()
    size = lines = 0
    with psycopg.connect(rt.database.owner_url) as conn, conn.cursor() as cur:
        query = f"COPY (SELECT * FROM book_gl_line WHERE book_set_id = {int(book_set_id)}) TO STDOUT"
        with cur.copy(query) as copy:
            for block in copy:
                size += len(block)
                lines += bytes(block).count(b"\n")
    return time.perf_counter() - started, size, lines


def check(run: Run, truth: dict[str, Any], sizes: Sizes, duplicates: int) -> list[str]:
    problems = []
    expected_accounts = truth["expected"]["bank_reconciliation"]
    expected_accounts[DUPLICATED_ACCOUNT]["bank_lines"] += duplicates
    if run.dead_letters:
        problems.append(f"{run.dead_letters} dispatches dead-lettered")
    if run.open_gates == 0:
        problems.append(f"the close stopped with no open gate ({run.status}): {run.steps[-3:]}")
    if run.final_status != RunState.CLOSED:
        problems.append(f"the close ended {run.final_status} after {len(run.rounds)} rounds of decisions, not closed")
    if run.undecided_gates:
        problems.append(f"{run.undecided_gates} gates of the close are not approved")
    accounts = {entry["account"]: entry for entry in run.bank.get("accounts", [])}
    for account, expected in expected_accounts.items():
        got = accounts.get(account, {})
        for key in ("bank_lines", "gl_lines", "matched"):
            if got.get(key) != expected[key]:
                problems.append(f"account {account}: {key} {got.get(key)!r}, ground truth {expected[key]}")
    if duplicates and not accounts.get(DUPLICATED_ACCOUNT, {}).get("pages"):
        problems.append(f"{duplicates} duplicated bank lines, but no page was sent")
    bound = PAGE_BYTES + ENVELOPE_BYTES
    if max(sizes.largest_request, sizes.largest_response) > bound:
        problems.append(f"an A2A body of {max(sizes.largest_request, sizes.largest_response):,} bytes > {bound:,}")
    return problems


@dataclasses.dataclass
class Measured:
    lines: int
    run: Run | None
    problems: list[str]


def measure(lines: int, duplicates: int, *, force_pages: bool, smoke: bool) -> Measured:
    """One whole run at `lines` GL lines on its own books and its own embedded PostgreSQL, printed as it goes."""
    database: Database | None = None
    problems: list[str] = []
    run: Run | None = None
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        root = Path(tmp)
        try:
            books = root / "books"
            generate_s = generate(books, lines)
            duplicates = add_duplicates(books, DUPLICATED_ACCOUNT, duplicates)
            add_duplicates(books / "corrected", DUPLICATED_ACCOUNT, duplicates)
            truth = json.loads((books / "ground_truth.json").read_text(encoding="utf-8"))
            entity_facts = json.loads((books / "entity.json").read_text(encoding="utf-8"))
            print(f"books: {lines:,} GL lines generated in {generate_s:.1f} s (child process, not timed below)")
            print(f"bank lines of account {DUPLICATED_ACCOUNT} duplicated (ambiguous groups for pages): {duplicates:,}")
            database = start_embedded(root / "pgdata", cleanup_mode="delete")
            migrate.upgrade(database)
            settings = Settings(
                database_url=None,
                state_dir=root / "state",
                config_dir=PROJECT_ROOT / "config",
                callback_secret=secrets.token_urlsafe(16),
            )
            policy, workflows = load_rules_all(settings)
            rt = Runtime(settings, database, policy, workflows)
            people = parse_principals(settings.principals_path)
            scripted = ScriptedPeople(people)
            asyncio.run(_register(rt, scripted.registered(people)))
            sizes = Sizes()
            rss_before = peak_rss_mb()
            run = asyncio.run(
                run_close(
                    rt,
                    books,
                    entity_facts["entity"],
                    entity_facts["period"],
                    sizes,
                    force_pages=force_pages,
                    people=people,
                    scripted=scripted,
                )
            )
            problems += check(run, truth, sizes, duplicates)
            report(run, sizes, rss_before, smoke=smoke, problems=problems)
        except (BenchAborted, subprocess.CalledProcessError, KeyboardInterrupt) as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            stop_embedded(database)
    return Measured(lines, run, problems)


async def _register(rt: Runtime, people: list[Principal]) -> None:
    async with connection(rt, "owner") as owner:
        await upsert_principals(owner, people)


def report(run: Run, sizes: Sizes, rss_before: float, *, smoke: bool, problems: list[str]) -> None:
    print(f"peak RSS before the close: {rss_before:.0f} MB")
    print(
        f"close start (books loaded with COPY, close and tasks): {run.start_s:.2f} s,"
        f" peak RSS {run.start_rss_mb:.0f} MB"
    )
    print(
        f"first advance to the first gates: {run.advance_s:.2f} s, peak RSS {run.advance_rss_mb:.0f} MB;"
        f" close {run.status}, {run.open_gates} open gates"
    )
    for step in run.steps:
        print(f"  {step[:160]}")
    for entry in run.bank.get("accounts", []):
        print(
            f"  bank account {entry['account']}: {entry['bank_lines']:,} bank / {entry['gl_lines']:,} GL lines,"
            f" {entry['matched']:,} matched ({entry.get('matched_in_database', '-')} in the database,"
            f" {entry.get('pages', '-')} pages)"
        )
    for number, one in enumerate(run.rounds, start=1):
        feed = " (the corrected bank feed loaded first)" if one.feeds_loaded else ""
        print(
            f"round {number}: {one.decisions} signed decisions{feed} in {one.decide_s:.2f} s,"
            f" advance {one.advance_s:.2f} s; close {one.status}, {one.open_gates} open gates"
        )
    print(
        f"A2A: {sizes.requests} requests; largest request {sizes.largest_request:,} bytes, largest response"
        f" {sizes.largest_response:,} bytes (page bound {PAGE_BYTES:,}; limit {SPECIALIST_MAX_BODY_BYTES:,})"
    )
    print(
        f"baseline: {run.gl_lines:,} GL lines read back with COPY TO STDOUT in {run.read_back_s:.2f} s"
        f" ({run.read_back_bytes / 1e6:.0f} MB)"
    )
    print(f"ratio (close start + first advance) / read-back: {run.to_first_gates_s / run.read_back_s:.1f}x")
    print(f"ratio (close start to closed) / read-back: {run.to_closed_s / run.read_back_s:.1f}x")
    peak = max(run.start_rss_mb, run.advance_rss_mb, run.final_rss_mb)
    meets = run.to_closed_s < TARGET_WALL_S and peak < TARGET_RSS_MB and run.final_status == RunState.CLOSED
    verdict = "smoke run, not timed" if smoke else "PASS" if meets else "FAIL"
    print(f"close start to first gates: {run.to_first_gates_s:.1f} s")
    print(
        f"close start to {run.final_status}: {run.to_closed_s:.1f} s, {run.decisions} signed decisions in"
        f" {len(run.rounds)} rounds (target < {TARGET_WALL_S:.0f} s to closed), peak RSS {peak:.0f} MB"
        f" (target < {TARGET_RSS_MB:.0f} MB): {verdict}"
    )
    if verdict == "FAIL":
        problems.append("targets missed")


def print_growth(small: Measured, large: Measured) -> None:
    """Each measure's cost growth exponent between the two sizes (1.0 is linear in GL lines)."""
    if small.run is None or large.run is None:
        return
    n1, n2 = small.lines, large.lines
    for label, t1, t2 in (
        ("close start", small.run.start_s, large.run.start_s),
        ("first advance", small.run.advance_s, large.run.advance_s),
        ("close start to closed", small.run.to_closed_s, large.run.to_closed_s),
        ("baseline: COPY read-back", small.run.read_back_s, large.run.read_back_s),
    ):
        exponent = growth_exponent(n1, t1, n2, t2)
        print(f"cost growth, {label}, {n1:,} -> {n2:,} GL lines: {t1:.2f} s -> {t2:.2f} s, exponent {exponent:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=None, help=f"GL lines (default {FULL_LINES:,})")
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_LINES:,} lines, no verdict (make test)")
    parser.add_argument(
        "--force-pages", action="store_true", help="the paged bank reconciliation even for books that fit one message"
    )
    parser.add_argument(
        "--duplicates",
        type=int,
        default=None,
        help=f"bank lines of {DUPLICATED_ACCOUNT} copied, so the specialist gets pages (default 0; smoke 50)",
    )
    parser.add_argument(
        "--growth-lines",
        type=int,
        default=None,
        help="also run the whole close first at this many GL lines and print each measure's cost growth exponent",
    )
    args = parser.parse_args(argv)
    args.force_pages = args.force_pages or args.smoke
    duplicates = args.duplicates if args.duplicates is not None else SMOKE_DUPLICATES if args.smoke else 0
    lines = args.lines or (SMOKE_LINES if args.smoke else FULL_LINES)
    signal.signal(signal.SIGALRM, _abort)
    signal.alarm(ABORT_AFTER_SECONDS)
    print(describe_machine())
    problems: list[str] = []
    try:
        small = None
        if args.growth_lines:
            print(f"== {args.growth_lines:,} GL lines (the smaller size, for cost growth)")
            scaled = duplicates * args.growth_lines // lines
            small = measure(args.growth_lines, scaled, force_pages=args.force_pages, smoke=args.smoke)
            problems += [f"at {args.growth_lines:,} lines: {problem}" for problem in small.problems]
            print(f"== {lines:,} GL lines")
        large = measure(lines, duplicates, force_pages=args.force_pages, smoke=args.smoke)
        problems += large.problems
        if small is not None:
            print_growth(small, large)
    finally:
        signal.alarm(0)
    return exit_code(problems)


if __name__ == "__main__":
    sys.exit(main())
