"""The long-running processes: `serve` (the HTTP API), `specialists serve` and `worker`."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from countersign.cli.common import console, err, fail, run, runtime, settings_or_exit

if TYPE_CHECKING:
    from countersign.bootstrap.metrics import WorkerMetrics
    from countersign.bootstrap.processes import AdvanceReport, DeliveryOutcome, Released

specialists_app = typer.Typer(help="The A2A specialist agents.", no_args_is_help=True)

HEADER_READ_TIMEOUT_S = 10.0
"""countersign/bootstrap/limits.py's HEADER_READ_TIMEOUT_S (a test checks they agree), here so that `countersign
--help` need
not import countersign.bootstrap.limits, which imports the web app."""


def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    graceful_timeout_s: Annotated[int, typer.Option(help="On SIGTERM, seconds in-flight requests get to finish.")] = 20,
    header_read_timeout_s: Annotated[
        float, typer.Option(help="Close a connection whose request head is not complete within this many seconds.")
    ] = HEADER_READ_TIMEOUT_S,
) -> None:
    """Serve the HTTP API: Slack, Teams, signed callbacks, read APIs, health, readiness and /metrics.

    SIGTERM stops accepting connections, lets in-flight requests finish (up to --graceful-timeout-s), then closes
    in-flight card updates, the sealer and the pools. Request heads over 32 KiB or 100 fields get 431; a connection
    silent past --header-read-timeout-s is closed (countersign/bootstrap/limits.py).
    """
    import uvicorn

    from countersign.bootstrap import limits, telemetry
    from countersign.bootstrap.app import MissingSecret, create_app

    rt = runtime(roles=("engine", "callbacks"))
    if "board_url" not in rt.settings.model_fields_set:  # unset: the board is where this server listens
        from dataclasses import replace

        rt = replace(rt, settings=rt.settings.model_copy(update={"board_url": f"http://localhost:{port}"}))
    json_logs = _observe(rt.settings.log_format, telemetry.SERVE)
    try:
        application = create_app(rt)
    except MissingSecret as exc:
        fail(str(exc))
        return
    # What is built by now (the app, the SDKs' modules) lives as long as the process: keep it out of the cyclic
    # collector's full passes, which otherwise stall every in-flight request for tens of milliseconds.
    gc.freeze()
    try:
        uvicorn.run(
            application,
            host=host,
            port=port,
            log_level="info",
            **_bounded_http(limits.SERVE_MAX_CONCURRENCY, header_read_timeout_s),
            timeout_graceful_shutdown=graceful_timeout_s,  # uvicorn waits this long for in-flight requests
            log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
        )
    finally:
        telemetry.shutdown_tracing()


def _bounded_http(max_requests_in_flight: int, header_read_timeout_s: float) -> dict[str, Any]:
    """uvicorn's arguments for a door: our bounded protocol (ADR 0023) in place of its unbounded ones."""
    from countersign.bootstrap.limits import (
        BODY_READ_TIMEOUT_S,
        KEEP_ALIVE_TIMEOUT_S,
        MAX_HEADER_BYTES,
        MAX_HEADER_COUNT,
    )
    from countersign.http_edge.protocol import ConnectionBounds, bounded_protocol

    if header_read_timeout_s <= 0:
        fail(f"--header-read-timeout-s must be positive, not {header_read_timeout_s}")
    bounds = ConnectionBounds(
        max_header_bytes=MAX_HEADER_BYTES,
        max_header_count=MAX_HEADER_COUNT,
        header_read_timeout_s=header_read_timeout_s,
        body_read_timeout_s=BODY_READ_TIMEOUT_S,
        max_requests_in_flight=max_requests_in_flight,
    )
    # uvicorn's own `limit_concurrency` counts idle sockets too; the protocol counts requests in flight instead.
    return {"http": bounded_protocol(bounds), "limit_concurrency": None, "timeout_keep_alive": KEEP_ALIVE_TIMEOUT_S}


def _observe(log_format: str, service_name: str) -> bool:
    """Logs and traces for a long-running process (countersign/bootstrap/telemetry.py); True when logs are JSON."""
    from countersign.bootstrap import telemetry

    if log_format not in telemetry.LOG_FORMATS:
        fail(f"COUNTERSIGN_LOG_FORMAT must be one of {', '.join(telemetry.LOG_FORMATS)}, not {log_format!r}")
    telemetry.configure_logging(log_format)
    telemetry.setup_tracing(service_name)
    return log_format == "json"


@specialists_app.command("serve")
def specialists_serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8100,
    public_url: Annotated[str | None, typer.Option(help="Base URL clients reach (for the agent cards).")] = None,
    header_read_timeout_s: Annotated[
        float, typer.Option(help="Close a connection whose request head is not complete within this many seconds.")
    ] = HEADER_READ_TIMEOUT_S,
    root_agent: Annotated[
        str | None,
        typer.Option(
            help="Also serve this specialist at the origin root (card at /.well-known/agent-card.json, JSON-RPC"
            " at /), for tools that look only there."
        ),
    ] = None,
) -> None:
    """Serve the specialists as A2A HTTP services (every call needs COUNTERSIGN_SPECIALIST_TOKEN).

    Each specialist is at /NAME with its card at /NAME/.well-known/agent-card.json; --root-agent NAME serves one of
    them at the origin root as well (docs/a2a-conformance.md).
    """
    import uvicorn

    from countersign.bootstrap import telemetry
    from countersign.bootstrap.limits import SPECIALISTS_MAX_CONCURRENCY
    from countersign.bootstrap.processes import SPECIALIST_NAMES, specialists_app

    if root_agent is not None and root_agent not in SPECIALIST_NAMES:
        fail(f"--root-agent must be one of {', '.join(SPECIALIST_NAMES)}, not {root_agent!r}")
        return
    settings = settings_or_exit()
    token = settings.specialist_token
    if not token:
        fail("COUNTERSIGN_SPECIALIST_TOKEN is not set: refusing to serve the specialists without a bearer token")
        return
    json_logs = _observe(settings.log_format, telemetry.SPECIALISTS)
    specialists = specialists_app(settings, public_url or f"http://{host}:{port}", token=token, root_agent=root_agent)
    application = telemetry.instrument_asgi(specialists)
    try:
        uvicorn.run(
            application,
            host=host,
            port=port,
            **_bounded_http(SPECIALISTS_MAX_CONCURRENCY, header_read_timeout_s),
            timeout_graceful_shutdown=20,
            log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
        )
    finally:
        telemetry.shutdown_tracing()


def worker(
    once: Annotated[bool, typer.Option(help="Run jobs until none is ready (the outbox too), then exit.")] = False,
    close: Annotated[
        str | None, typer.Option("--close", help="Wake this close first: its advance is enqueued, due now (drills).")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Jobs in flight at once (default COUNTERSIGN_WORKER_CONCURRENCY).")
    ] = None,
    poll_s: Annotated[
        float, typer.Option(help="Fallback poll, seconds: new jobs wake the worker at once (NOTIFY); due ones by this.")
    ] = 5.0,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve this worker's /metrics on this port (job duration, deliveries).")
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="Interface for --metrics-port.")] = "127.0.0.1",
    grace_s: Annotated[float, typer.Option(help="On SIGTERM, seconds the jobs in flight get to finish.")] = 30.0,
    interval_s: Annotated[float | None, typer.Option(hidden=True, help="Old name of --poll-s.")] = None,
    max_passes: Annotated[int, typer.Option(hidden=True, help="Ignored: the worker has no passes any more.")] = 0,
) -> None:
    """Run the engine's jobs (advance a run, wake it at a deadline, sign a checkpoint, deliver); many workers on many
    machines may run against one database.

    SIGTERM (or Ctrl-C) starts no new job; the ones in flight get --grace-s seconds to finish, then are cancelled;
    every outbox claim and dispatch lease this process still holds is released; exit 0.
    """
    from countersign.bootstrap import telemetry
    from countersign.bootstrap.chat import ChatConfigError, check_chat_settings
    from countersign.bootstrap.metrics import WorkerMetrics
    from countersign.bootstrap.processes import WorkerPlan, run_worker_process

    rt = runtime(roles=("engine",))
    try:
        check_chat_settings(rt.settings)
    except ChatConfigError as exc:
        fail(str(exc))
    if concurrency is not None and not 1 <= concurrency <= 256:
        fail(f"--concurrency must be between 1 and 256, not {concurrency}")
    poll_s = poll_s if interval_s is None else interval_s
    if poll_s <= 0:
        fail(f"--poll-s must be positive, not {poll_s}")
    _observe(rt.settings.log_format, telemetry.WORKER)
    import logging

    logging.getLogger("procrastinate").setLevel(logging.WARNING)  # not a line per job: what a job did is printed below
    metrics = WorkerMetrics()
    jobs_at_once = concurrency or rt.settings.worker_concurrency
    plan = WorkerPlan(once=once, only_close=close, grace_s=grace_s, concurrency=jobs_at_once, poll_s=poll_s)
    if metrics_port is not None:
        bound = metrics.serve(metrics_host, metrics_port)
        err.print(f"worker metrics at http://{metrics_host}:{bound}/metrics", highlight=False)

    async def work() -> None:
        await run_worker_process(rt, plan, WorkerLines(metrics))

    try:
        run(work)
    finally:
        metrics.close()
        telemetry.shutdown_tracing()


class WorkerLines:
    """What the worker command prints and counts as the jobs run."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics

    def advanced(self, report: AdvanceReport) -> None:
        self.metrics.closes_advanced.inc()
        for step in report.steps:
            console.print(f"{report.close_id[:8]} {escape(step)}", highlight=False)

    def delivered(self, outcome: DeliveryOutcome) -> None:
        for error in outcome.errors:
            console.print(f"outbox: {escape(error)}", highlight=False)
        self.metrics.outbox.labels("sent").inc(outcome.sent)
        self.metrics.outbox.labels("retried").inc(outcome.retried)
        self.metrics.outbox.labels("failed").inc(outcome.failed)

    def passed(self, seconds: float, *, completed: bool) -> None:
        self.metrics.pass_seconds.observe(seconds)
        self.metrics.passes.labels("completed" if completed else "cancelled").inc()

    def alive(self) -> None:
        """An idle worker is alive: the "no worker pass" alert reads the same gauge a job sets."""
        self.metrics.pass_seconds.last_pass.set(self.metrics.pass_seconds.clock())

    def stopping(self, signal: int | None, released: Released) -> None:
        err.print(
            f"worker stopping on signal {signal}: released {released.outbox_messages} outbox claims"
            f" and {released.dispatches} dispatch leases",
            highlight=False,
        )
