"""Prometheus metrics: what `serve` exposes at `GET /metrics`, and what `worker --metrics-port` exposes.

Counters and histograms live in the process (decision latency in `serve`; pass duration and deliveries in the worker).
Gauges about the close (gates by state, overdue gates, outbox backlog and age, dispatch retries, trace head, the job
queue) are read
from the tables at scrape time, so every `serve` reports the same numbers however many run. Both registries also carry
the build (`countersign_build_info`), the process (`process_*`: CPU, memory, file descriptors) and the platform
(`python_info`). Only counts, durations and fixed label values leave through here: never a name, a reason, an amount
or an id (tests/bootstrap/test_observability.py). The alert rules and the dashboard over these names live in
deploy/prometheus and deploy/grafana; tests/deploy/test_monitoring.py keeps them in step with this module.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import unquote_plus

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
    start_http_server,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from psycopg import AsyncConnection

from countersign import installed_version
from countersign.callbacks.decision_writer import decisions_by_channel
from countersign.store.gauges import engine_counts, gates_by_status, limit_scrape
from countersign.store.job_stats import job_queue_counts
from countersign.store.trace import log_progress

CONTENT_TYPE = CONTENT_TYPE_LATEST
SCRAPE_STATEMENT_TIMEOUT_MS = 2000  # a scrape never holds the database longer than this per statement

GATE_STATES = ("open", "approved", "rejected", "expired", "cancelled")
DOORS = ("signed_callback", "slack", "teams")
DECISION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PASS_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
DEFAULT_OUTBOX_BUDGET_S = 24 * 3600.0
REVISION_VARIABLE = "COUNTERSIGN_REVISION"  # set when the image is built (a git commit); read once, never git itself
REVISION = re.compile(r"^[0-9a-f]{7,40}$")


def build_labels(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`version` from the installed package's metadata, `revision` from COUNTERSIGN_REVISION when it is a git commit
    id ("unknown" otherwise): fixed for the life of a process, so fixed label values."""
    env = os.environ if env is None else env
    version = installed_version()
    revision = (env.get(REVISION_VARIABLE) or "").strip().lower()
    return {"version": version, "revision": revision if REVISION.match(revision) else "unknown"}


def _process_collectors(registry: CollectorRegistry) -> None:
    """The build, the process and the platform, in a registry of our own (the default registry is not served)."""
    info = Gauge(
        "countersign_build_info",
        "The running build: always 1, its version and revision as labels",
        ["version", "revision"],
        registry=registry,
    )
    info.labels(**build_labels()).set(1)
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
    PlatformCollector(registry=registry)  # python_info{implementation, version, ...}


class ServeMetrics:
    """The metrics of one `serve` app, in a registry of its own (many apps may live in one test process)."""

    def __init__(self, *, outbox_budget_s: float = DEFAULT_OUTBOX_BUDGET_S) -> None:
        self.registry = CollectorRegistry()
        self.outbox_budget_s = outbox_budget_s
        r = self.registry
        _process_collectors(r)
        self.decision_seconds = Histogram(
            "countersign_decision_seconds",
            "Time to answer a decision request, by door and outcome (HTTP-level; see README, Observability)",
            ["door", "outcome"],
            buckets=DECISION_BUCKETS_S,
            registry=r,
        )
        self.database_up = Gauge("countersign_database_up", "1 when the scrape could read the tables", registry=r)
        self.gates = Gauge("countersign_gates", "Gates by state", ["state"], registry=r)
        self.decisions = Gauge("countersign_decisions_recorded", "Decisions recorded, by door", ["door"], registry=r)
        self.outbox_backlog = Gauge("countersign_outbox_backlog", "Outbox messages waiting to be delivered", registry=r)
        self.outbox_failed = Gauge("countersign_outbox_failed", "Outbox messages that failed for good", registry=r)
        self.outbox_oldest_age = Gauge(
            "countersign_outbox_oldest_pending_age_seconds",
            "Seconds since the oldest pending outbox message was enqueued (0 when none is pending)",
            registry=r,
        )
        self.outbox_over_budget = Gauge(
            "countersign_outbox_over_budget",
            "Pending outbox messages older than the retry budget (COUNTERSIGN_OUTBOX_BUDGET_HOURS)",
            registry=r,
        )
        self.outbox_budget = Gauge(
            "countersign_outbox_budget_seconds", "How long the outbox retries a message before giving up", registry=r
        )
        self.outbox_budget.set(outbox_budget_s)
        self.gates_overdue = Gauge(
            "countersign_gates_overdue", "Open gates past their due time, waiting on a person", registry=r
        )
        self.dispatch_retrying = Gauge(
            "countersign_dispatch_retrying", "Specialist dispatches failed and waiting for a retry", registry=r
        )
        self.dispatch_failures = Gauge(
            "countersign_dispatch_failures", "Failed specialist calls counted against dispatches so far", registry=r
        )
        self.dispatch_dead = Gauge(
            "countersign_dispatch_dead_letters",
            "Dead-lettered specialist dispatches whose task waits on its escalation gate",
            registry=r,
        )
        self.trace_head = Gauge(
            "countersign_trace_head_seq", "Sequence number of the last sealed trace event", registry=r
        )
        self.checkpoint_age = Gauge(
            "countersign_trace_checkpoint_age_seconds",
            "Seconds since the last signed trace checkpoint (NaN before the first)",
            registry=r,
        )
        self.trace_unsigned = Gauge(
            "countersign_trace_unsigned_events",
            "Sealed trace events after the last signed checkpoint (1 right after a signing: its own event)",
            registry=r,
        )
        self.jobs_ready = Gauge(
            "countersign_jobs_ready", "Jobs a worker could start now (queued and due, not yet taken)", registry=r
        )
        self.jobs_running = Gauge("countersign_jobs_running", "Jobs a worker is running now", registry=r)
        self.jobs_failed = Gauge(
            "countersign_jobs_failed", "Jobs that failed for good and are kept in the queue's table", registry=r
        )
        self.jobs_oldest_ready_age = Gauge(
            "countersign_jobs_oldest_ready_age_seconds",
            "Seconds the oldest ready job has waited for a worker (0 when none is ready)",
            registry=r,
        )
        self._refresh_lock = threading.Lock()

    async def refresh_from_tables(self, conn: AsyncConnection[Any]) -> None:
        """Read the gauges: a few short statements in one read-only transaction with a statement timeout."""
        async with conn.transaction():
            await limit_scrape(conn, SCRAPE_STATEMENT_TIMEOUT_MS)
            counts = await engine_counts(conn, outbox_budget_s=self.outbox_budget_s)
            progress = await log_progress(conn)
            gates = await gates_by_status(conn)
            decisions = await decisions_by_channel(conn)
            jobs = await job_queue_counts(conn)
        with self._refresh_lock:
            self.jobs_ready.set(jobs.ready)
            self.jobs_running.set(jobs.running)
            self.jobs_failed.set(jobs.failed)
            self.jobs_oldest_ready_age.set(jobs.oldest_ready_age_s)
            self.outbox_backlog.set(counts.outbox_backlog)
            self.outbox_failed.set(counts.outbox_failed)
            self.outbox_oldest_age.set(counts.outbox_oldest_pending_age_s)
            self.outbox_over_budget.set(counts.outbox_over_budget)
            self.gates_overdue.set(counts.gates_overdue)
            self.trace_unsigned.set(counts.trace_unsigned_events)
            self.dispatch_retrying.set(counts.dispatch_retrying)
            self.dispatch_failures.set(counts.dispatch_failures)
            self.dispatch_dead.set(counts.dispatch_dead)
            self.trace_head.set(progress.head_seq or 0)
            self.checkpoint_age.set(progress.checkpoint_age_s if progress.checkpoint_age_s is not None else math.nan)
            for state in GATE_STATES:  # fixed label values: a state nobody is in reads 0, not absent
                self.gates.labels(state=state).set(gates.get(state, 0))
            for door in DOORS:
                self.decisions.labels(door=door).set(decisions.get(door, 0))
            self.database_up.set(1)

    def database_down(self) -> None:
        self.database_up.set(0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


# --- decision latency at the doors ------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SIGNED_CALLBACK_PATH = re.compile(r"^/callbacks/gates/[^/]+/decisions$")
PEEK_BYTES = 16 * 1024  # enough of a Slack or Teams body to tell a button click from anything else


def callback_outcome(status: int) -> str:
    """The signed callback answers after the decision is recorded or refused: its status is the outcome."""
    return {
        200: "recorded",
        401: "unauthenticated",
        403: "refused",
        404: "not_found",
        409: "conflict",
        413: "invalid",
        422: "invalid",
    }.get(status, "error" if status >= 500 else "invalid")


def chat_outcome(status: int) -> str:
    """Slack and Teams answer a click with 200 whatever the decision (the card or an ephemeral says it)."""
    if status == 200:
        return "answered"
    if status == 401:
        return "unauthenticated"
    if status == 403:
        return "refused"
    return "error" if status >= 500 else "invalid"


def chat_door(path: str, body: bytes) -> str | None:
    """Which chat door a request is a decision click at, from the start of its body; None for anything else."""
    if path == "/slack/events":
        if not body.startswith(b"payload="):
            return None
        text = unquote_plus(body[len(b"payload=") :].decode("utf-8", "replace"))
        return "slack" if re.search(r'"type"\s*:\s*"block_actions"', text) else None
    if path == "/api/messages":
        text = body.decode("utf-8", "replace")
        return "teams" if '"adaptiveCard/action"' in text and re.search(r'"type"\s*:\s*"invoke"', text) else None
    return None


class DecisionTimer:
    """Pure ASGI middleware: times requests at the three decision doors into `countersign_decision_seconds`.

    It only tees the request body as the app reads it (no extra buffering, no second read) and looks at the first
    `PEEK_BYTES` to tell a click from a command. Every other request passes through untouched.
    """

    def __init__(self, app: ASGIApp, metrics: ServeMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        signed = SIGNED_CALLBACK_PATH.match(path) is not None
        if not signed and path not in ("/slack/events", "/api/messages"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen = bytearray()
        status = 500

        async def teed_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(seen) < PEEK_BYTES:
                seen.extend(message.get("body", b"")[: PEEK_BYTES - len(seen)])
            return message

        async def watched_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, teed_receive if not signed else receive, watched_send)
        finally:
            elapsed = time.perf_counter() - started
            if signed:
                self.metrics.decision_seconds.labels("signed_callback", callback_outcome(status)).observe(elapsed)
            else:
                door = chat_door(path, bytes(seen))
                if door is not None:
                    self.metrics.decision_seconds.labels(door, chat_outcome(status)).observe(elapsed)


# --- the worker ---------------------------------------------------------------------------------------------------


class PassClock:
    """The pass duration histogram, and the time the last pass ended beside it: observing one sets the other, so the
    "no worker pass" alert needs nothing more from the code that times passes."""

    def __init__(self, registry: CollectorRegistry, clock: Callable[[], float] = time.time) -> None:
        self.histogram = Histogram(
            "countersign_worker_pass_seconds", "Duration of one worker pass", buckets=PASS_BUCKETS_S, registry=registry
        )
        self.last_pass = Gauge(
            "countersign_worker_last_pass_timestamp_seconds",
            "Unix time the last worker pass ended (the time the process started, until its first pass ends)",
            registry=registry,
        )
        self.clock = clock
        self.last_pass.set(clock())

    def observe(self, seconds: float) -> None:
        self.histogram.observe(seconds)
        self.last_pass.set(self.clock())


class WorkerMetrics:
    """What one worker process knows: how long its passes take, when the last one ended, what its deliveries did."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        _process_collectors(r)
        self.pass_seconds = PassClock(r, clock)
        self.passes = Counter("countersign_worker_passes", "Worker passes, by outcome", ["outcome"], registry=r)
        self.closes_advanced = Counter(
            "countersign_worker_closes_advanced", "Closes advanced by this worker", registry=r
        )
        self.outbox = Counter(
            "countersign_worker_outbox_messages",
            "Outbox messages handled by this worker, by result",
            ["result"],
            registry=r,
        )
        self._server: Any = None

    def serve(self, host: str, port: int) -> int:
        """Serve /metrics on a background thread; returns the bound port (0 picks a free one)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return int(server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
