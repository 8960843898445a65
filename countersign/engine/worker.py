"""The worker: a process that runs jobs (countersign/engine/jobs.py, ADR 0040) until told to stop.

Many workers on many machines may run against one database: procrastinate hands each ready job to one of them, an
advance's lock keeps one run's advances in order, and a worker sleeps until PostgreSQL notifies it of a new job (a
slow poll is only the fallback, and how scheduled jobs such as gate deadlines are seen). Delivery to Slack and Teams
lives in `countersign/bot/`, which the engine may not import, so the caller passes it in as `deliver`. The process
keeps one pool;
no connection is held across a specialist, Slack or Teams call.

A stop signal (SIGTERM, Ctrl-C) starts no new job; the jobs in flight get `grace_s` seconds to finish, then are
cancelled; every outbox claim and dispatch lease this process still holds is released. What the process prints or
counts comes in as a `WorkerWatch`.

`run_worker_pass` is the one-off form kept for tools and tests: advance every close not closed once, sign, deliver.

Traced (when the process installed a tracer provider, countersign/bootstrap/telemetry.py), a worker is one `worker.run`
span
with one `close.advance` span per advance job under it (the close's id, the state it reached, how many steps it
took); specialist calls and deliveries hang under those. SQL statements are not traced here
(tests/bootstrap/test_worker_spans.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry import trace
from psycopg_pool import AsyncConnectionPool

from countersign.audit.transparency_log import sign_log_checkpoint
from countersign.engine.jobs import (
    CHECKPOINT_MIN_NEW_EVENTS,
    Deliver,
    DeliveryOutcome,
    JobCounts,
    JobPlan,
    JobWatch,
    run_jobs,
)
from countersign.engine.leases import Connect
from countersign.engine.orchestrator import AdvanceReport, EngineContext, advance
from countersign.engine.outbox import enqueue_card_updates
from countersign.engine.runs import runnable_close_ids
from countersign.engine.shutdown import Released, StopSignal, release_claims
from countersign.store.jobs import enqueue_job

WORKER_ACTOR = "countersign-worker"
tracer = trace.get_tracer("countersign.worker")  # a no-op unless the process installed a tracer provider
__all__ = [
    "CHECKPOINT_MIN_NEW_EVENTS",
    "Deliver",
    "DeliveryOutcome",
    "PassReport",
    "WorkerPlan",
    "WorkerWatch",
    "run_worker",
    "run_worker_pass",
]


@dataclass
class PassReport:
    advanced: list[AdvanceReport] = field(default_factory=list)
    delivery: DeliveryOutcome | None = None  # None when the pass stopped before delivering
    stopped: bool = False


def _never() -> bool:
    return False


async def run_worker_pass(
    connect: Connect,
    ctx: EngineContext,
    deliver: Deliver,
    *,
    only_close: str | None = None,
    should_stop: Callable[[], bool] = _never,
    on_advanced: Callable[[AdvanceReport], None] | None = None,
    actor: str = WORKER_ACTOR,
) -> PassReport:
    """Advance each runnable close once, sign a checkpoint of what was sealed, then announce and deliver.

    `should_stop` is asked before each close and before delivery: a stopping worker starts nothing new.
    `on_advanced` hears of each close as soon as it was advanced (progress lines, metrics).
    """
    report = PassReport()
    async with connect() as conn:
        ids = await runnable_close_ids(conn, only_close)
    for close_id in ids:
        if should_stop():
            report.stopped = True
            return report
        with tracer.start_as_current_span("close.advance", attributes={"countersign.close.id": close_id}) as span:
            advanced = await advance(connect, close_id, ctx)
            span.set_attributes(
                {
                    "countersign.close.status": str(advanced.status),
                    "countersign.close.steps": len(advanced.steps),
                    "countersign.close.busy": advanced.busy,
                }
            )
        report.advanced.append(advanced)
        if on_advanced is not None:
            on_advanced(advanced)
    if ctx.signer is not None:
        async with connect() as conn:
            await sign_log_checkpoint(
                conn, ctx.signer, ctx.origin, actor=actor, min_new_events=CHECKPOINT_MIN_NEW_EVENTS
            )
    if should_stop():
        report.stopped = True
        return report
    async with connect() as conn, conn.transaction():
        await enqueue_card_updates(conn)
    report.delivery = await deliver(connect)
    return report


OpenEngine = Callable[[], AbstractAsyncContextManager[EngineContext]]  # the engine context, for the process's life


@dataclass(frozen=True)
class WorkerPlan:
    once: bool = False  # run jobs until none is ready, then return
    only_close: str | None = None  # wake this run first (its advance is enqueued, due now)
    grace_s: float = 30.0  # what the jobs in flight get after a stop signal
    concurrency: int = 1  # jobs in flight at once in this process
    poll_s: float = 5.0  # the job library's fallback poll; NOTIFY wakes a worker at once


class WorkerWatch(JobWatch, Protocol):
    """What a worker tells its process about (the CLI prints lines and counts metrics)."""

    def stopping(self, signal: int | None, released: Released) -> None: ...


async def run_worker(
    pool: AsyncConnectionPool[Any], open_engine: OpenEngine, deliver: Deliver, plan: WorkerPlan, watch: WorkerWatch
) -> JobCounts:
    """Run jobs until a stop signal (or, with `plan.once`, until none is ready); what ran, by kind.

    A stop signal starts no new job; the jobs in flight get `plan.grace_s` seconds, then are cancelled; every outbox
    claim and dispatch lease this process still holds is released.
    """
    stop = StopSignal()
    stop.install()
    try:
        with tracer.start_as_current_span("worker.run") as span:
            async with open_engine() as ctx:
                if plan.only_close is not None:
                    async with pool.connection() as conn:
                        await enqueue_job(conn, "advance", plan.only_close)
                job_plan = JobPlan(
                    once=plan.once, concurrency=plan.concurrency, poll_s=plan.poll_s, grace_s=plan.grace_s
                )
                counts = await run_jobs(pool, ctx, deliver, job_plan, watch, stop=stop.event)
            span.set_attributes({"countersign.worker.closes": counts.advance})
        return counts
    finally:
        if stop.is_set:
            async with pool.connection() as conn:
                released = await release_claims(conn)
            watch.stopping(stop.received, released)
        stop.uninstall()
