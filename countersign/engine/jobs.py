"""Work as jobs on procrastinate (ADR 0040): what a job does, and how this process runs them.

A job only says what to look at: `advance` (one run), `wake` (a deadline came: enqueue the run's advance),
`sign_checkpoint` and `deliver`. The advance re-reads everything from our tables under our checks, so the job tables
hold no decision. Jobs are enqueued by the database itself, in the transaction of the change that makes a run due
(migration 0024's triggers call `countersign_enqueue_job`); code enqueues only the follow-ups below.

Per run, an advance job's lock and queueing lock are `run:<close id>`: one advance at a time, at most one waiting.
Finished runs, runs waiting on a person and blocked runs have no job; a run left `running` (a specialist retry due
later, more rounds than one advance takes) gets its next advance scheduled at the time it can move.

A worker process registers with procrastinate and holds a session advisory lock keyed by its worker id for as long
as it runs. A `doing` job whose worker holds no such lock (the process was killed) is put back by
`countersign_recover_stalled_jobs`, which every worker runs at start and every `recover_every_s`.

The statements (enqueueing, recovery, the liveness lock, the wake-up) are `countersign.store.jobs`; when a run can move
next is `countersign.store.dispatch.next_move_in_s`, when the outbox is due `countersign.store.outbox`'s
`next_pending_due_at`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import procrastinate
from opentelemetry import trace
from procrastinate import manager
from procrastinate import worker as job_worker
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from countersign.audit.transparency_log import sign_log_checkpoint
from countersign.drill_hooks.kill_points import KillPoint, kill_point
from countersign.engine.leases import Connect
from countersign.engine.orchestrator import AdvanceReport, EngineContext, advance
from countersign.engine.outbox import enqueue_card_updates
from countersign.states import RunState
from countersign.store.dispatch import next_move_in_s
from countersign.store.jobs import (
    enqueue_job,
    enqueue_running_runs,
    hold_liveness_lock,
    recover_stalled_jobs,
    release_liveness_lock,
    wake_job_listeners,
)
from countersign.store.outbox import next_pending_due_at

log = logging.getLogger("countersign.jobs")
tracer = trace.get_tracer("countersign.worker")  # a no-op unless the process installed a tracer provider

QUEUE = "countersign"
WORKER_APP = "countersign-worker"  # application_name of a worker's connections (pg_stat_activity)
JOBS_SEARCH_PATH = "public, procrastinate"  # the library names its functions bare; ours come first
CHECKPOINT_MIN_NEW_EVENTS = 2  # signing appends its own event: never sign a checkpoint of only the last one
BUSY_RETRY_S = 2.0  # the run's lock was held outside the job engine (a `close advance`): try again after this
RUNNING_RECHECK_S = 2.0  # a run still `running` with no known time to move again is looked at after this
FAILED_RETRY_S = 30.0  # an advance that raised is tried again after this (the failure stays on the job row)
JOB_KINDS = ("advance", "wake", "sign_checkpoint", "deliver")


class DeliveryOutcome(Protocol):
    """What a deliverer reports back (countersign.delivery.worker.DeliveryReport has this shape)."""

    sent: int
    retried: int
    failed: int
    errors: list[str]


Deliver = Callable[[Connect], Awaitable[DeliveryOutcome]]


class JobWatch(Protocol):
    """What the job runner tells its process about (the CLI prints lines and counts metrics)."""

    def advanced(self, report: AdvanceReport) -> None: ...

    def delivered(self, outcome: DeliveryOutcome) -> None: ...

    def passed(self, seconds: float, *, completed: bool) -> None: ...

    def alive(self) -> None:
        """The worker finished a housekeeping round (every `recover_every_s`): it lives even when no job comes."""


def next_advance_in_s(seconds_to_move: float | None) -> float:
    """When to look at a run left `running` again: just after its earliest specialist retry or lease end
    (`countersign.store.dispatch.next_move_in_s`), else after a short recheck. Pure."""
    return RUNNING_RECHECK_S if seconds_to_move is None else max(0.0, seconds_to_move) + 0.05


# --- the jobs -----------------------------------------------------------------------------------------------------


@dataclass
class JobCounts:
    """What this process ran, by kind (tests and the drill read it)."""

    advance: int = 0
    wake: int = 0
    sign_checkpoint: int = 0
    deliver: int = 0


def _total(counts: JobCounts) -> int:
    return counts.advance + counts.wake + counts.sign_checkpoint + counts.deliver


class _Jobs:
    """The four job kinds, bound to this process's pool, engine context and deliverer."""

    def __init__(self, connect: Connect, ctx: EngineContext, deliver: Deliver, watch: JobWatch) -> None:
        self.connect = connect
        self.ctx = ctx
        self.deliver_outbox = deliver
        self.watch = watch
        self.counts = JobCounts()

    async def advance(self, close_id: str) -> None:
        started = time.perf_counter()
        self.counts.advance += 1
        with tracer.start_as_current_span("close.advance", attributes={"countersign.close.id": close_id}) as span:
            try:
                report = await advance(self.connect, close_id, self.ctx)
            except Exception:
                async with self.connect() as conn:
                    await enqueue_job(conn, "advance", close_id, in_s=FAILED_RETRY_S)
                self.watch.passed(time.perf_counter() - started, completed=False)
                raise
            span.set_attributes(
                {
                    "countersign.close.status": str(report.status),
                    "countersign.close.steps": len(report.steps),
                    "countersign.close.busy": report.busy,
                }
            )
        kill_point(KillPoint.JOB_AFTER_ADVANCE)  # the run's tables moved, the job is not yet finished
        self.watch.advanced(report)
        async with self.connect() as conn:
            if report.busy:
                await enqueue_job(conn, "advance", close_id, in_s=BUSY_RETRY_S)
            elif report.status == RunState.RUNNING:
                moves_in_s = await next_move_in_s(conn, close_id)
                await enqueue_job(conn, "advance", close_id, in_s=next_advance_in_s(moves_in_s))
            if report.steps and not report.busy:
                if self.ctx.signer is not None:
                    await enqueue_job(conn, "sign_checkpoint")
                await enqueue_job(conn, "deliver")
        self.watch.passed(time.perf_counter() - started, completed=True)

    async def wake(self, close_id: str) -> None:
        self.counts.wake += 1
        async with self.connect() as conn:
            await enqueue_job(conn, "advance", close_id)

    async def sign_checkpoint(self) -> None:
        self.counts.sign_checkpoint += 1
        if self.ctx.signer is None:
            return
        async with self.connect() as conn:
            await sign_log_checkpoint(
                conn, self.ctx.signer, self.ctx.origin, actor=self.ctx.actor, min_new_events=CHECKPOINT_MIN_NEW_EVENTS
            )

    async def deliver(self) -> None:
        self.counts.deliver += 1
        async with self.connect() as conn, conn.transaction():
            await enqueue_card_updates(conn)
        self.watch.delivered(await self.deliver_outbox(self.connect))
        async with self.connect() as conn:  # a message retried later wakes delivery at its time
            next_at = await next_pending_due_at(conn)
            if next_at is not None:
                await enqueue_job(conn, "deliver", at=next_at)


class _LiveJobManager(manager.JobManager):
    """procrastinate's job manager, plus the liveness lock a worker holds from registering until it unregisters."""

    def __init__(self, connector: procrastinate.PsycopgConnector, pool: AsyncConnectionPool[Any]) -> None:
        super().__init__(connector)
        self.pool = pool
        self._liveness: AsyncConnection[Any] | None = None

    async def register_worker(self) -> int:
        worker_id = await super().register_worker()
        conn = await self.pool.getconn()
        await hold_liveness_lock(conn, worker_id)
        self._liveness = conn
        return worker_id

    async def unregister_worker(self, worker_id: int) -> None:
        conn, self._liveness = self._liveness, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await release_liveness_lock(conn, worker_id)
            await self.pool.putconn(conn)
        await super().unregister_worker(worker_id)


def job_app(pool: AsyncConnectionPool[Any], jobs: _Jobs) -> procrastinate.App:
    """The procrastinate app of one process: its connector on the process's pool, and the four tasks."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector())
    app.job_manager = _LiveJobManager(app.connector, pool)  # type: ignore[arg-type]
    app.task(name="advance", queue=QUEUE)(jobs.advance)
    app.task(name="wake", queue=QUEUE)(jobs.wake)
    app.task(name="sign_checkpoint", queue=QUEUE)(jobs.sign_checkpoint)
    app.task(name="deliver", queue=QUEUE)(jobs.deliver)
    return app


def pool_for_jobs(url: str, *, size: int) -> AsyncConnectionPool[Any]:
    """One pool per worker process (not yet open): autocommit connections that see the job functions."""
    return AsyncConnectionPool(
        url,
        min_size=1,
        max_size=size,
        open=False,
        # autocommit is set by `configure`, not in `kwargs`: the library opens its LISTEN connection from the pool's
        # kwargs and passes autocommit itself
        kwargs={"options": f"-c search_path={JOBS_SEARCH_PATH.replace(' ', '')}", "application_name": WORKER_APP},
        configure=_autocommit,
    )


async def _autocommit(conn: AsyncConnection[Any]) -> None:
    await conn.set_autocommit(True)


def pool_size_for(concurrency: int) -> int:
    """Connections a worker needs: one per job in flight, one held for liveness, one for enqueueing, one spare (the
    LISTEN connection is the library's own, outside the pool)."""
    return concurrency + 3


@dataclass(frozen=True)
class JobPlan:
    once: bool = False  # run jobs until none is ready, then return
    concurrency: int = 1  # jobs in flight at once in this process
    poll_s: float = 5.0  # the library's fallback poll (NOTIFY wakes it at once; scheduled jobs are seen by this)
    grace_s: float = 30.0  # what the jobs in flight get after a stop signal
    recover_every_s: float = 5.0  # how often this worker puts back the jobs of dead workers


async def run_jobs(
    pool: AsyncConnectionPool[Any],
    ctx: EngineContext,
    deliver: Deliver,
    plan: JobPlan,
    watch: JobWatch,
    *,
    stop: asyncio.Event | None = None,
) -> JobCounts:
    """Run jobs on an open pool until `stop` is set (or, with `plan.once`, until none is ready)."""
    jobs = _Jobs(pool.connection, ctx, deliver, watch)
    app = job_app(pool, jobs)
    async with pool.connection() as conn:
        await recover_stalled_jobs(conn)
        await enqueue_running_runs(conn)
        await enqueue_job(conn, "deliver")  # what a stopped worker left in the outbox goes out now
    await app.open_async(pool)
    current: list[job_worker.Worker] = []

    def new_worker() -> job_worker.Worker:
        worker = job_worker.Worker(
            app,
            queues=None,
            concurrency=plan.concurrency,
            wait=not plan.once,
            fetch_job_polling_interval=plan.poll_s,
            shutdown_graceful_timeout=plan.grace_s,
            listen_notify=not plan.once,
            install_signal_handlers=False,
            delete_jobs="successful",
        )
        current[:] = [worker]
        return worker

    async def stop_on_signal() -> None:
        assert stop is not None
        await stop.wait()
        for worker in current:
            worker.stop()  # type: ignore[no-untyped-call]

    async def recover_now_and_then() -> None:
        while True:
            await asyncio.sleep(plan.recover_every_s)
            try:
                async with pool.connection() as conn:
                    recovered = await recover_stalled_jobs(conn)
                    watch.alive()
                    if recovered:
                        await wake_job_listeners(conn)
            except Exception:
                log.warning("recovering stalled jobs failed", exc_info=True)

    side = [asyncio.create_task(recover_now_and_then())]
    if stop is not None:
        side.append(asyncio.create_task(stop_on_signal()))
    try:
        while True:
            ran = _total(jobs.counts)
            await new_worker().run()  # type: ignore[no-untyped-call]
            # `once`: the library stops at its first empty fetch, even while a job in flight is about to enqueue its
            # follow-up (a delivery, the next advance): run again until a round ran nothing.
            if not plan.once or _total(jobs.counts) == ran or (stop is not None and stop.is_set()):
                break
    finally:
        for task in side:
            task.cancel()
        for task in side:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await app.close_async()
    return jobs.counts


OpenEngine = Callable[[], AbstractAsyncContextManager[EngineContext]]
