"""The worker: passes until told to stop, each advancing every runnable close, signing a log checkpoint, announcing
gate changes and delivering the outbox.

Many workers may run passes against one database at once: `advance` takes a per-close lock, the outbox is claimed
with leases. Delivery to Slack and Teams lives in `bot/`, which the engine may not import, so the caller passes it
in as `deliver`. No connection is held across a specialist, Slack or Teams call: each step takes one from `connect`.

A stop signal (SIGTERM, Ctrl-C) starts no new close or delivery; the pass in flight gets `grace_s` seconds to finish,
then is cancelled; every outbox claim and dispatch lease this process still holds is released. What the process
prints or counts comes in as a `WorkerWatch`.

Traced (when the process installed a tracer provider, countersign/telemetry.py), a pass is one `worker.pass` span with
one `close.advance` span per close under it (the close's id, the state it reached, how many steps it took); specialist
calls and deliveries hang under those. SQL statements are not traced here (tests/countersign/test_worker_spans.py).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

from opentelemetry import trace

from audit.transparency_log import sign_log_checkpoint
from engine.leases import Connect
from engine.orchestrator import AdvanceReport, EngineContext, advance
from engine.outbox import enqueue_card_updates
from engine.runs import runnable_close_ids
from engine.shutdown import Released, StopSignal, finish_or_cancel, release_claims

WORKER_ACTOR = "countersign-worker"
tracer = trace.get_tracer("countersign.worker")  # a no-op unless the process installed a tracer provider
CHECKPOINT_MIN_NEW_EVENTS = 2  # signing appends its own event: never sign a checkpoint of only the last one


class DeliveryOutcome(Protocol):
    """What a deliverer reports back (bot.delivery.DeliveryReport has this shape)."""

    sent: int
    retried: int
    failed: int
    errors: list[str]


Deliver = Callable[[Connect], Awaitable[DeliveryOutcome]]


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


OpenEngine = Callable[[], AbstractAsyncContextManager[EngineContext]]  # the engine context, for one pass


@dataclass(frozen=True)
class WorkerPlan:
    once: bool = False  # one pass, then return
    interval_s: float = 5.0  # between passes
    max_passes: int = 0  # 0: no limit
    only_close: str | None = None
    grace_s: float = 30.0  # what the pass in flight gets after a stop signal


class WorkerWatch(Protocol):
    """What a worker tells its process about (the CLI prints lines and counts metrics)."""

    def advanced(self, report: AdvanceReport) -> None: ...

    def delivered(self, outcome: DeliveryOutcome) -> None: ...

    def passed(self, seconds: float, *, completed: bool) -> None: ...

    def stopping(self, signal: int | None, released: Released) -> None: ...


async def run_worker(
    connect: Connect, open_engine: OpenEngine, deliver: Deliver, plan: WorkerPlan, watch: WorkerWatch
) -> int:
    """Run passes until a stop signal, `plan.once` or `plan.max_passes`; returns the number of passes run."""
    stop = StopSignal()
    stop.install()
    passes = 0
    try:
        while not stop.is_set:
            started = time.perf_counter()
            with tracer.start_as_current_span("worker.pass") as span:
                done = await finish_or_cancel(
                    _one_pass(connect, open_engine, deliver, plan, watch, stop), stop, grace_s=plan.grace_s
                )
                span.set_attributes(
                    {"countersign.worker.completed": done is not None, "countersign.worker.closes": done or 0}
                )
            watch.passed(time.perf_counter() - started, completed=done is not None)
            passes += 1
            if plan.once or (plan.max_passes and passes >= plan.max_passes):
                return passes
            await stop.sleep(plan.interval_s)
    finally:
        if stop.is_set:
            async with connect() as conn:
                released = await release_claims(conn)
            watch.stopping(stop.received, released)
        stop.uninstall()
    return passes


async def _one_pass(
    connect: Connect, open_engine: OpenEngine, deliver: Deliver, plan: WorkerPlan, watch: WorkerWatch, stop: StopSignal
) -> int:
    async with open_engine() as ctx:
        report = await run_worker_pass(
            connect,
            ctx,
            deliver,
            only_close=plan.only_close,
            should_stop=lambda: stop.is_set,
            on_advanced=watch.advanced,
        )
    if report.delivery is not None:
        watch.delivered(report.delivery)
    return len(report.advanced)
