"""One worker pass: advance every runnable close, sign a log checkpoint, announce gate changes, deliver the outbox.

Many workers may run passes against one database at once: `advance` takes a per-close lock, the outbox is claimed
with leases. Delivery to Slack and Teams lives in `bot/`, which the engine may not import, so the caller passes it
in as `deliver`. No connection is held across a specialist, Slack or Teams call: each step takes one from `connect`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from audit.transparency_log import sign_log_checkpoint
from engine.leases import Connect
from engine.orchestrator import AdvanceReport, EngineContext, advance
from engine.outbox import enqueue_card_updates
from engine.runs import runnable_close_ids

WORKER_ACTOR = "countersign-worker"
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
        advanced = await advance(connect, close_id, ctx)
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
