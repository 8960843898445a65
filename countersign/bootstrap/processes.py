"""The long-running processes wired from a Runtime: the worker (jobs and deliveries) and the specialists' A2A app.

`countersign worker` and `countersign specialists serve` (countersign/cli/serving.py) parse their options, print and
count; what runs is put together here, where the composition root may reach the engine, the delivery worker and the
specialists.
"""

from __future__ import annotations

import httpx
from starlette.types import ASGIApp

from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import Runtime, build_narrator, engine_context, worker_pool
from countersign.bootstrap.settings import Settings
from countersign.delivery.worker import DeliveryReport, deliver_due
from countersign.engine.context import AdvanceReport
from countersign.engine.jobs import DeliveryOutcome
from countersign.engine.leases import Connect
from countersign.engine.shutdown import Released
from countersign.engine.worker import WorkerPlan, WorkerWatch, run_worker
from countersign.specialists.server import SPECIALIST_NAMES, build_specialists_app

__all__ = [
    "SPECIALIST_NAMES",
    "AdvanceReport",
    "DeliveryOutcome",
    "Released",
    "WorkerPlan",
    "WorkerWatch",
    "run_worker_process",
    "specialists_app",
]


async def run_worker_process(rt: Runtime, plan: WorkerPlan, watch: WorkerWatch) -> None:
    """Run the engine's jobs and the outbox's deliveries on one pool sized by `plan`, until a stop signal (or, with
    `plan.once`, until none is ready); `watch` hears what ran."""
    senders = build_senders(rt.settings)

    async def deliver(connect: Connect) -> DeliveryReport:
        return await deliver_due(connect, senders, budget_hours=rt.settings.outbox_budget_hours)  # type: ignore[arg-type]

    async with worker_pool(rt, plan.concurrency) as pool:  # one pool for the process, sized by the settings
        await run_worker(pool, lambda: engine_context(rt), deliver, plan, watch)


def specialists_app(settings: Settings, public_url: str, *, token: str, root_agent: str | None) -> ASGIApp:
    """The specialists as one A2A app behind the bearer `token`, narrating with the configured model (none for
    replay); `root_agent` also serves one of them at the origin root."""
    # The model API's client lives as long as the process; replay needs none.
    narrator = build_narrator(settings, None if settings.model_provider == "replay" else httpx.AsyncClient())
    return build_specialists_app(public_url, token=token, narrator=narrator, root_agent=root_agent)
