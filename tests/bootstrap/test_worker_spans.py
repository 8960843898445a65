"""A worker run as a trace: a few meaningful spans with the stable OpenTelemetry attribute names, not a span per
SQL statement.

Before: one pass that started the default close gave 418 spans (152 psycopg statements, ~250 A2A SDK internals such
as `EventQueueSource.enqueue_event`), and each pass over an idle close 28 (27 statements); the issue saw 580 for a
pass over 11 closes. Now the first pass is bounded by what it did (one span per close, two per specialist call, two
per chat message) and an idle close costs one span.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import Attributes

from countersign.bootstrap import telemetry
from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.database import Database
from countersign.bootstrap.runtime import Runtime, engine_context
from countersign.engine.jobs import DeliveryOutcome, pool_for_jobs
from countersign.engine.leases import Connect
from countersign.engine.orchestrator import AdvanceReport
from countersign.engine.shutdown import Released
from countersign.engine.worker import WorkerPlan, run_worker
from tests.support import count, start_default_close

# Names the old (pre-stable) conventions used; none may appear once the instrumentations opted in.
OLD_ATTRIBUTES = {
    "http.method",
    "http.status_code",
    "http.url",
    "http.target",
    "http.host",
    "http.scheme",
    "net.peer.name",
    "net.peer.port",
    "db.statement",
    "db.system",
    "db.name",
    "db.user",
}


class _Switchboard:
    """The process-wide tracer provider of this test process, forwarding to whichever provider a test installed.

    The API's global provider can be set once per process, and module-level tracers (countersign/engine/worker.py,
    countersign/bot/,
    countersign/specialists/) bind to it for good; this stands in for it so each test can bring a fresh provider.
    """

    current: trace.TracerProvider = trace.NoOpTracerProvider()


class _ForwardingTracer(trace.Tracer):
    def __init__(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs

    def _tracer(self) -> trace.Tracer:
        return _Switchboard.current.get_tracer(self.name, *self.args, **self.kwargs)

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._tracer().start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        return self._tracer().start_as_current_span(*args, **kwargs)


class _ForwardingProvider(trace.TracerProvider):
    def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _ForwardingTracer(instrumenting_module_name, args, kwargs)


@pytest.fixture
def worker_tracing(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The worker's tracing as `countersign worker` installs it, exporting to memory."""
    trace.set_tracer_provider(_ForwardingProvider())  # the first call in the process wins; later ones are ignored
    assert isinstance(trace.get_tracer_provider(), _ForwardingProvider), "something else set the global provider"
    monkeypatch.delenv(telemetry.SEMCONV_OPT_IN, raising=False)
    exporter = InMemorySpanExporter()
    tracing = telemetry.setup_tracing(telemetry.WORKER, set_global=False, exporter=exporter)
    assert tracing is not None
    _Switchboard.current = tracing.provider
    try:
        yield exporter
    finally:
        _Switchboard.current = trace.NoOpTracerProvider()
        tracing.shutdown()


class _Watch:
    def __init__(self) -> None:
        self.reports: list[AdvanceReport] = []
        self.outcomes: list[DeliveryOutcome] = []

    def advanced(self, report: AdvanceReport) -> None:
        self.reports.append(report)

    def delivered(self, outcome: DeliveryOutcome) -> None:
        self.outcomes.append(outcome)

    def passed(self, seconds: float, *, completed: bool) -> None:
        pass

    def alive(self) -> None:
        pass

    def stopping(self, signal: int | None, released: Released) -> None:
        pass


def _connect(url: str) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            yield conn

    return connect


async def _one_pass(runtime: Runtime, senders: dict[str, object]) -> _Watch:
    from countersign.delivery.worker import DeliveryReport, deliver_due

    async def deliver(connect: Connect) -> DeliveryReport:
        return await deliver_due(connect, senders)  # type: ignore[arg-type]

    watch = _Watch()
    token = otel_context.attach(otel_context.Context())  # a pass starts its own trace, whatever the test runner holds
    try:
        async with pool_for_jobs(runtime.database.engine_url, size=4) as pool:
            await run_worker(pool, lambda: engine_context(runtime), deliver, WorkerPlan(once=True), watch)
    finally:
        otel_context.detach(token)
    return watch


def _names(spans: Sequence[ReadableSpan]) -> collections.Counter[str]:
    return collections.Counter(span.name for span in spans)


def _keys(spans: Sequence[ReadableSpan]) -> set[str]:
    keys: set[str] = set()
    for span in spans:
        attributes: Attributes = span.attributes or {}
        keys |= set(attributes)
    return keys


async def test_a_worker_pass_is_a_few_meaningful_spans_with_stable_attribute_names(
    conn: Any, runtime: Runtime, default_books: Path, fake_slack: Any, worker_tracing: InMemorySpanExporter
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    chat = runtime.settings.model_copy(
        update={"slack_bot_token": "xoxb-test", "slack_api_url": fake_slack.url, "slack_channel": "C0CLOSE"}
    )
    chat_runtime = Runtime(chat, runtime.database, runtime.policy, runtime.workflows)

    watch = await _one_pass(chat_runtime, build_senders(chat))
    spans = worker_tracing.get_finished_spans()
    names = _names(spans)
    dispatched = await count(conn, "SELECT count(*) FROM dispatch WHERE close_id = %s", close_id)
    posted = len(fake_slack.calls_to("chat.postMessage"))
    assert [r.close_id for r in watch.reports] == [close_id] and dispatched >= 3 and posted >= 1

    # One worker run, one span per advance job under it, every other span inside that one trace.
    assert names["worker.run"] == 1 and names["close.advance"] == 1, names
    (pass_span,) = [s for s in spans if s.name == "worker.run"]
    (advance_span,) = [s for s in spans if s.name == "close.advance"]
    assert {s.context.trace_id for s in spans} == {pass_span.context.trace_id}
    assert advance_span.parent is not None and advance_span.parent.span_id == pass_span.context.span_id
    assert advance_span.attributes is not None
    assert advance_span.attributes["countersign.close.id"] == close_id
    assert advance_span.attributes["countersign.close.status"] == watch.reports[0].status
    assert advance_span.attributes["countersign.close.steps"] == len(watch.reports[0].steps) >= 3
    assert pass_span.attributes is not None and pass_span.attributes["countersign.worker.closes"] == 1

    # No statement spans and no A2A SDK internals; each specialist call and each chat message is at most a span of
    # ours and an HTTP client span (a remote specialist call over A2A is one POST; in process, as here, none).
    scopes = {s.instrumentation_scope.name for s in spans if s.instrumentation_scope is not None}
    assert "opentelemetry.instrumentation.psycopg" not in scopes and "a2a-python-sdk" not in scopes, scopes
    assert names["specialist.call"] == dispatched, names
    assert names["outbox.deliver"] == posted, names
    bound = 1 + 1 + 2 * dispatched + 2 * posted
    assert len(spans) <= bound, (len(spans), bound, names)

    # Stable semantic conventions on the HTTP client spans, and none of the old names anywhere.
    keys = _keys(spans)
    assert not keys & OLD_ATTRIBUTES, sorted(keys & OLD_ATTRIBUTES)
    http = [s for s in spans if s.kind == trace.SpanKind.CLIENT and "http.request.method" in (s.attributes or {})]
    assert len(http) >= posted, names
    for span in http:
        attributes = span.attributes or {}
        assert {"http.request.method", "url.full", "server.address"} <= set(attributes), dict(attributes)

    # A second worker over the same close, which waits on people now: it has no job, so no span but the worker's.
    worker_tracing.clear()
    await _one_pass(chat_runtime, build_senders(chat))
    idle = worker_tracing.get_finished_spans()
    assert _names(idle) == {"worker.run": 1}, _names(idle)


async def test_statement_spans_stay_on_where_asked_and_use_the_stable_names(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control for the worker's quiet pass: the same setup with statement spans on records each statement,
    under `db.query.text` and `db.system.name`."""
    monkeypatch.delenv(telemetry.SEMCONV_OPT_IN, raising=False)
    exporter = InMemorySpanExporter()
    tracing = telemetry.setup_tracing(telemetry.WORKER, set_global=False, exporter=exporter, statement_spans=True)
    assert tracing is not None
    try:
        async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as other:
            for _ in range(3):
                await other.execute("SELECT 1")
    finally:
        tracing.shutdown()
    statements = [s for s in exporter.get_finished_spans() if "db.query.text" in (s.attributes or {})]
    assert len(statements) == 3, [s.name for s in exporter.get_finished_spans()]
    for span in statements:
        attributes = span.attributes or {}
        assert attributes["db.system.name"] == "postgresql" and attributes["db.query.text"] == "SELECT 1"
        assert not set(attributes) & OLD_ATTRIBUTES, dict(attributes)
