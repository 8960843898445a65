"""Adversarial drills a user can run against their own deployment.

`idempotency`: N identical retries of one dispatch and its posting, spread over P operating-system processes, all at
once against the configured database; then the same retries with a changed payload under the same posting key.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.bootstrap.runtime import Runtime, connection, role_connection
from countersign.drill_hooks.kill_points import KillPoint
from countersign.engine.dispatch import dispatch_once
from countersign.engine.integrity import (
    NotPostgres,
    PostingCounts,
    SealingSample,
    SealingWatch,
    ServerIdentity,
    closed_count,
    closing_checkpoint_problems,
    exactly_once_checks,
    posting_counts,
    sealing_sample,
    server_identity,
)
from countersign.engine.postings import JournalLine, JournalRequest, PostingConflict, post_journal
from countersign.engine.runs import load_close
from countersign.engine.workflows.close.inputs import accruals_input
from countersign.scenarios.scripted_decisions import decide_open_gates
from countersign.scenarios.scripted_people import ScriptedPeople
from countersign.services.loading import load_book_set
from countersign.services.starting import StartRules, start_close_on_book_set
from countersign.specialists.client import open_in_process
from countersign.store.job_stats import DatabaseActivity, Reaction
from countersign.synthetic import generate_books, load_profile

CONNECTIONS_PER_PROCESS = 8
SEAL_WAIT_LIMIT_S = 60.0  # a trace event queued longer than this while workers run means sealing fell behind

__all__ = ["NotPostgres", "run_idempotency_drill", "run_restart_drill", "run_workers_drill"]


@dataclass
class StormCounts:
    created: int = 0
    reused: int = 0
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, other: StormCounts) -> None:
        self.created += other.created
        self.reused += other.reused
        self.conflicts += other.conflicts
        self.errors.extend(other.errors)


@dataclass
class IdempotencyReport:
    server: str
    host: str
    database: str
    retries: int
    processes: int
    seconds: float
    storm: StormCounts
    dispatch_rows: int
    specialist_calls: int
    journals: int
    journal_lines: int
    changed_storm: StormCounts | None = None
    changed_seconds: float = 0.0
    rows_written_by_changed_storm: int = 0

    @property
    def duplicates(self) -> int:
        return max(self.dispatch_rows - 1, 0) + max(self.journals - 1, 0) + max(self.specialist_calls - 1, 0)

    @property
    def passed(self) -> bool:
        changed_ok = self.changed_storm is None or (
            self.changed_storm.conflicts == self.retries and self.rows_written_by_changed_storm == 0
        )
        return self.duplicates == 0 and self.journals == 1 and not self.storm.errors and changed_ok


def database_identity(rt: Runtime) -> ServerIdentity:
    """Server version, host and database behind the owner's URL; raises NotPostgres unless it is PostgreSQL."""

    async def identify() -> ServerIdentity:
        async with connection(rt, "owner") as conn:
            return await server_identity(conn)

    return asyncio.run(identify())


def _journal_request(
    close_id: str, entity: str, period: str, result: dict[str, Any], *, changed: bool
) -> JournalRequest:
    journal = result["journal"]
    lines = [JournalLine(line["account"], Decimal(line["amount"]), line["description"]) for line in journal["lines"]]
    if changed:  # same key, different (still balanced) journal: must be refused
        bump = Decimal("0.01")
        lines = [
            JournalLine(lines[0].account, lines[0].amount + bump, lines[0].description),
            *lines[1:-1],
            JournalLine(lines[-1].account, lines[-1].amount - bump, lines[-1].description),
        ]
    return JournalRequest(
        idempotency_key=f"drill:{close_id}:accruals",
        entity=entity,
        period=period,
        journal_date=date.fromisoformat(journal["date"]),
        memo=journal["memo"],
        lines=lines,
        source_close=close_id,
        source_task="accruals",
    )


async def _storm(
    url: str, close_id: str, entity: str, period: str, payload: dict[str, Any], retries: int, changed: bool
) -> StormCounts:
    counts = StormCounts()
    opened = contextlib.AsyncExitStack()
    connections = [
        await opened.enter_async_context(role_connection(url, "engine"))
        for _ in range(min(retries, CONNECTIONS_PER_PROCESS))
    ]
    free: asyncio.Queue[AsyncConnection[Any]] = asyncio.Queue()
    for conn in connections:
        free.put_nowait(conn)
    start = asyncio.Event()
    async with open_in_process() as client:

        async def one() -> None:
            await start.wait()
            conn = await free.get()
            try:
                outcome = await dispatch_once(
                    conn,
                    client.call,
                    close_id=close_id,
                    task="accruals",
                    attempt=1,
                    specialist="accruals",
                    payload=payload,
                    actor="countersign-drill",
                )
                posted = await post_journal(
                    conn,
                    _journal_request(close_id, entity, period, outcome.result, changed=changed),
                    posted_by="countersign-drill",
                )
                if posted.created:
                    counts.created += 1
                else:
                    counts.reused += 1
            except PostingConflict:
                counts.conflicts += 1
            except Exception as exc:  # counted and reported: a drill must not hide a failure
                counts.errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                free.put_nowait(conn)

        tasks = [asyncio.create_task(one()) for _ in range(retries)]
        start.set()  # release every retry at once
        await asyncio.gather(*tasks)
    await opened.aclose()
    return counts


def _process_main(args: tuple[str, str, str, str, dict[str, Any], int, bool]) -> StormCounts:
    url, close_id, entity, period, payload, retries, changed = args
    return asyncio.run(_storm(url, close_id, entity, period, payload, retries, changed))


def _run_storm(
    url: str,
    close_id: str,
    entity: str,
    period: str,
    payload: dict[str, Any],
    retries: int,
    processes: int,
    changed: bool,
) -> tuple[StormCounts, float]:
    shares = [retries // processes + (1 if i < retries % processes else 0) for i in range(processes)]
    jobs = [(url, close_id, entity, period, payload, share, changed) for share in shares if share]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        results = pool.map(_process_main, jobs)
    total = StormCounts()
    for counts in results:
        total.add(counts)
    return total, time.perf_counter() - started


async def _prepare(rt: Runtime) -> tuple[str, str, str, dict[str, Any]]:
    """A fresh drill close, and the accruals input its storm dispatches."""
    close_id, _ = await _prepare_close(rt, "IDEM")
    async with connection(rt) as conn:
        close = await load_close(conn, close_id)
        payload = await accruals_input(conn, close.book_set_id, close.period, rt.policy)
    return close_id, close.entity, close.period, payload


def _posting_counts(rt: Runtime, close_id: str) -> PostingCounts:
    async def count() -> PostingCounts:
        async with connection(rt) as conn:
            return await posting_counts(conn, close_id)

    return asyncio.run(count())


def run_idempotency_drill(
    rt: Runtime, *, retries: int, processes: int, changed_storm: bool = True
) -> IdempotencyReport:
    if retries < 1 or processes < 1:
        raise ValueError("--retries and --processes must be at least 1")
    server = database_identity(rt)
    close_id, entity, period, payload = asyncio.run(_prepare(rt))
    url = rt.database.url_for("engine")  # the storm processes get the URL: a Runtime does not cross processes
    storm, seconds = _run_storm(url, close_id, entity, period, payload, retries, min(processes, retries), False)
    counts = _posting_counts(rt, close_id)
    report = IdempotencyReport(
        server=server.version,
        host=server.host,
        database=server.database,
        retries=retries,
        processes=processes,
        seconds=seconds,
        storm=storm,
        dispatch_rows=counts.dispatch_rows,
        specialist_calls=counts.specialist_calls,
        journals=counts.journals,
        journal_lines=counts.journal_lines,
    )
    if changed_storm:
        changed, changed_seconds = _run_storm(
            url, close_id, entity, period, payload, retries, min(processes, retries), True
        )
        after = _posting_counts(rt, close_id)
        report.changed_storm = changed
        report.changed_seconds = changed_seconds
        report.rows_written_by_changed_storm = (
            after.journals - report.journals + after.journal_lines - report.journal_lines
        )
    return report


# --- restart drill -------------------------------------------------------------------------------------------


@dataclass
class RestartResult:
    point: str
    close_id: str
    killed: bool
    processes: int
    closed: bool
    problems: list[str]
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        return self.skipped is None and self.killed and self.closed and not self.problems


def exactly_once_problems(rt: Runtime, close_ids: list[str], *, finished: bool = True) -> list[str]:
    """Every check of `countersign.engine.integrity.exactly_once_checks` for each close, each closed close's closing
    checkpoint,
    plus the whole trace verifying; empty when all hold. Closes not `finished` (waiting on people) may have done an
    effect not yet, never twice."""
    from countersign.audit.trace import verify_chain

    async def problems() -> list[str]:
        found = []
        async with connection(rt, "owner") as conn:
            for close_id in close_ids:
                for check in await exactly_once_checks(conn, close_id):
                    if not (check.holds if finished else check.value <= check.expected):
                        found.append(f"{close_id[:8]} {check.label}: {check.value}, expected {check.expected}")
            found += await closing_checkpoint_problems(conn, close_ids)
        async with connection(rt) as conn:
            if not (await verify_chain(conn)).ok:
                found.append("trace does not verify")
        return found

    return asyncio.run(problems())


_SCRIPTED_BY_PROCESS: list[ScriptedPeople] = []


def _scripted_people(people: list[Any]) -> ScriptedPeople:
    """The drill's scripted approvers and their keys: one set per process, registered by `_prepare_close`."""
    if not _SCRIPTED_BY_PROCESS:
        _SCRIPTED_BY_PROCESS.append(ScriptedPeople(people))
    return _SCRIPTED_BY_PROCESS[0]


async def _decide_open_gates(rt: Runtime, close_id: str, books: Any) -> None:
    from countersign.callbacks.principals import parse_principals

    people = parse_principals(rt.settings.principals_path)
    await decide_open_gates(
        rt, close_id, books, people, _scripted_people(people), reason="restart drill", loaded_by="countersign-drill"
    )


async def _prepare_close(rt: Runtime, tag: str) -> tuple[str, Any]:
    from countersign.callbacks.principals import parse_principals, upsert_principals

    profile = load_profile(rt.settings.profile_path("default"))
    entity = f"DRILL-{tag}-{uuid.uuid4().hex[:6].upper()}"
    books = rt.settings.state_dir / "drills" / entity
    generate_books(profile, 11, books, entity=entity, period=profile.period, gl_lines=300)
    people = parse_principals(rt.settings.principals_path)
    async with connection(rt, "owner") as owner:
        await upsert_principals(owner, _scripted_people(people).registered(people))
    async with connection(rt) as conn:
        loaded = await load_book_set(conn, books, loaded_by="countersign-drill")
        close_id = await start_close_on_book_set(
            conn,
            StartRules(rt.policy, rt.workflow, versions={}),  # drill closes carry no versions
            entity=entity,
            period=profile.period,
            book_set_id=loaded.book_set_id,
            started_by="countersign-drill",
        )
    return close_id, books


Progress = Callable[[str, int, int], None]
"""A drill's progress, for a person watching: what it is doing, how many done, of how many."""


def run_restart_drill(
    rt: Runtime, points: tuple[KillPoint, ...], *, max_rounds: int = 30, progress: Progress | None = None
) -> list[RestartResult]:
    """For each kill point: run the close in worker processes, SIGKILL one at the point, let fresh ones finish.
    `progress(phrase, points done, points)` before each point and at the end."""
    import os
    import subprocess
    import sys
    import tempfile

    from countersign.bootstrap.chat import channel_targets
    from countersign.drill_hooks.kill_points import KILL_AT_ENV, MARKER_ENV
    from countersign.engine.runs import close_status

    database_identity(rt)
    say = progress or (lambda _phrase, _done, _total: None)
    results: list[RestartResult] = []
    for point in points:
        say(f"kill point {point}", len(results), len(points))
        if point == KillPoint.CARD_BEFORE_POST and not channel_targets(rt.settings):
            results.append(
                RestartResult(point, "", False, 0, False, [], skipped="no Slack or Teams channel configured")
            )
            continue
        close_id, books = asyncio.run(_prepare_close(rt, point.split(".")[0][:6].upper()))
        marker = os.path.join(tempfile.mkdtemp(prefix="countersign-drill-"), "killed")
        env = {**os.environ, KILL_AT_ENV: str(point), MARKER_ENV: marker}
        killed, processes, closed = False, 0, False
        for _ in range(max_rounds):
            done = subprocess.run(
                [sys.executable, "-m", "countersign.cli.main", "worker", "--once", "--close", close_id],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            processes += 1
            if done.returncode == -9:
                killed = True
                continue
            if done.returncode != 0:
                raise RuntimeError(f"worker failed at {point}: {done.stderr[-2000:]}")

            async def state(close: str = close_id) -> str:
                async with connection(rt) as conn:
                    return str((await close_status(conn, close))["status"])

            if asyncio.run(state()) == "closed":
                closed = True
                break
            asyncio.run(_decide_open_gates(rt, close_id, books))
        problems = exactly_once_problems(rt, [close_id])
        if not killed:
            problems.append(f"kill point {point} was never reached")
        results.append(RestartResult(point, close_id, killed, processes, closed, problems))
    say("kill points drilled", len(results), len(points))
    return results


# --- workers at scale ------------------------------------------------------------------------------------------


@dataclass
class WorkersReport:
    closes: int
    workers: int
    seconds: float
    closed: int
    problems: list[str]
    reaction: Reaction | None = None  # decision that completed a gate -> next gate opened on the run
    sessions_opened: int | None = None  # sessions opened on the database during the run (PostgreSQL 14+)
    peak_connections: int = 0  # most sessions connected to the database at one sample (the drill's own too)
    peak_worker_connections: int = 0  # of those, the most held by worker processes
    longest_seal_wait_s: float = 0.0  # the longest any trace event waited in the queue across the samples
    most_pending: int = 0  # the most trace events queued at one sample
    idle: IdleCost | None = None  # with `decide=False`: what runs waiting on people cost the workers

    @property
    def passed(self) -> bool:
        if self.idle is not None:  # nobody decides: the runs wait on people, and that must cost nothing
            return not self.problems and self.idle.ready_jobs == 0
        return self.closed == self.closes and not self.problems

    @property
    def closes_per_minute(self) -> float:
        return self.closed / self.seconds * 60 if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class IdleCost:
    """A window in which every run waits on a person: what the workers did meanwhile."""

    seconds: float
    waiting_runs: int
    commits: int  # transactions committed on the database in the window (heartbeats, the drill's own reads)
    ready_jobs: int  # the most jobs ready or running at one sample (every 0.25 s) in the window

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.seconds if self.seconds > 0 else 0.0


def run_workers_drill(
    rt: Runtime,
    *,
    closes: int,
    workers: int,
    timeout_s: float = 600.0,
    progress: Progress | None = None,
    decide: bool = True,
    idle_s: float = 10.0,
    settle_s: float = 11.0,
    seal_wait_limit_s: float = SEAL_WAIT_LIMIT_S,
) -> WorkersReport:
    """`workers` worker processes advance `closes` closes at once while scripted people decide every gate.
    `progress(phrase, done, total)`: closes prepared, then closes closed.

    The trace's queue is sampled as the drill goes: an event waiting longer than `seal_wait_limit_s` fails it.
    With `decide=False` nobody decides: once every run waits on a person and no job is ready, the drill watches an
    idle window of `idle_s` seconds (after `settle_s`) and reports what the workers cost in it."""
    import os
    import subprocess
    import sys
    import tempfile

    from countersign.audit.trace import seal_pending
    from countersign.engine.jobs import WORKER_APP
    from countersign.store.job_stats import database_activity, decision_to_next_gate, ready_jobs, registered_workers

    database_identity(rt)
    say = progress or (lambda _phrase, _done, _total: None)
    prepared = []
    for i in range(closes):
        say("preparing closes", i, closes)
        prepared.append(asyncio.run(_prepare_close(rt, f"W{i:03d}")))
    ids = [close_id for close_id, _ in prepared]
    books = dict(prepared)

    async def activity() -> DatabaseActivity:
        async with connection(rt) as conn:
            return await database_activity(conn, WORKER_APP)

    before = asyncio.run(activity())
    # a file, not a pipe: a full pipe would stall a worker; closed in the `finally` below
    logs = [tempfile.TemporaryFile() for _ in range(workers)]  # noqa: SIM115
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "countersign.cli.main", "worker", "--poll-s", "1"],
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        for log in logs
    ]
    started = time.perf_counter()
    peak = peak_workers = 0

    async def closed() -> int:
        async with connection(rt) as conn:
            return await closed_count(conn, ids)

    async def quiet() -> int:
        """Jobs ready or running, or 1 while not every worker has registered yet."""
        async with connection(rt) as conn:
            return await ready_jobs(conn) + (await registered_workers(conn) < workers)

    idle: IdleCost | None = None
    watch = SealingWatch(max_wait_s=seal_wait_limit_s)

    async def look_at_the_queue() -> SealingSample:
        async with connection(rt) as conn:
            return await sealing_sample(conn)

    try:
        while time.perf_counter() - started < timeout_s:
            done = asyncio.run(closed())
            watch.observe(asyncio.run(look_at_the_queue()), time.perf_counter())
            now = asyncio.run(activity())
            peak, peak_workers = max(peak, now.connected), max(peak_workers, now.workers_connected)
            say(f"closes closed by {workers} workers", done, closes)
            if not decide:
                if asyncio.run(quiet()) == 0:
                    # PostgreSQL reports an idle session's counters up to 10 s late: let earlier work settle first
                    time.sleep(settle_s)
                    first = asyncio.run(activity())
                    most, ends = 0, time.perf_counter() + idle_s
                    while time.perf_counter() < ends:
                        most = max(most, asyncio.run(quiet()))
                        time.sleep(0.25)
                    last = asyncio.run(activity())
                    idle = IdleCost(idle_s, closes - done, last.commits - first.commits, most)
                    break
            elif done == closes:
                break
            else:
                for close_id in ids:
                    asyncio.run(_decide_open_gates(rt, close_id, books[close_id]))
            time.sleep(0.5)
    finally:
        for proc in procs:
            proc.terminate()
        crashed = []
        for proc, log in zip(procs, logs, strict=True):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.seek(0)
            stderr = log.read().decode(errors="replace")
            log.close()
            if "Traceback" in stderr:
                crashed.append(stderr[-1500:])
    seconds = time.perf_counter() - started
    problems = [f"a worker crashed: {tail}" for tail in crashed]
    problems += watch.problems()  # before the drill's own seal below, which would hide a stalled sealer
    if not decide and idle is None:
        problems.append(f"the runs never all waited on people within {timeout_s:.0f}s")

    async def seal() -> None:  # a worker stopped between a commit and its seal leaves events queued, not lost
        async with connection(rt) as conn:
            await seal_pending(conn)

    async def reaction() -> Reaction:
        async with connection(rt) as conn:
            return await decision_to_next_gate(conn, ids)

    asyncio.run(seal())
    problems += exactly_once_problems(rt, ids, finished=decide)
    after = asyncio.run(activity())
    return WorkersReport(
        closes,
        workers,
        seconds,
        asyncio.run(closed()),
        problems,
        reaction=asyncio.run(reaction()),
        sessions_opened=after.sessions - before.sessions if after.sessions else None,
        peak_connections=peak,
        peak_worker_connections=peak_workers,
        longest_seal_wait_s=watch.longest_wait_s,
        most_pending=watch.most_pending,
        idle=idle,
    )
