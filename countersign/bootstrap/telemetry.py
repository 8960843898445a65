"""Traces over OTLP and the log format of a process. Called from the composition root only (cli.py, app.py).

Tracing is on only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; every other
setting is the standard `OTEL_*` variable the SDK reads itself (headers, timeout, sampler, `OTEL_SERVICE_NAME` over our
default name). Unset, nothing is installed: the `opentelemetry.trace` calls in `countersign/engine/` and
`countersign/bot/` go to the API's
no-op tracer. Set, spans cover HTTP requests (FastAPI), database statements (psycopg, not in the worker), specialist
calls (httpx, the A2A client) and chat API calls (httpx for Teams, aiohttp for slack_sdk), batched and exported over
OTLP/HTTP.

Attribute names follow the stable OpenTelemetry semantic conventions (`http.request.method`,
`http.response.status_code`, `url.full`, `db.query.text`, `db.system.name`, `server.address`): the instrumentations
read `OTEL_SEMCONV_STABILITY_OPT_IN`, which this module sets to `http,database` unless the environment already does.

A worker pass is one trace of a few meaningful spans (`worker.pass`, one `close.advance` per close, specialist calls,
deliveries and their HTTP calls), not a span per SQL statement: the worker does not trace statements (an idle close
ran 27 a pass), and the A2A SDK's internal spans (event queues, task managers: about 250 in a pass that starts a close)
are recorded in no process; what they would have wrapped hangs under the nearest span that is kept.

Spans carry SQL text with placeholders, never parameter values, and URLs, never bodies.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

SERVE = "countersign-serve"
WORKER = "countersign-worker"
SPECIALISTS = "countersign-specialists"

# Probes and scrapes are not traced: they would drown the requests people care about.
EXCLUDED_URLS = "/healthz,/readyz,/metrics"
LOG_FORMATS = ("text", "json")

SEMCONV_OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
STABLE_SEMCONV = "http,database"  # the stable HTTP and database attribute names, without the old ones beside them
# Instrumentation scopes whose spans are not recorded: a library's internals, not steps of ours.
QUIET_SCOPES = frozenset({"a2a-python-sdk"})


def tracing_requested(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return False
    if (env.get("OTEL_TRACES_EXPORTER") or "").strip().lower() == "none":
        return False
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


@dataclass
class Tracing:
    """The installed tracer provider and the instrumentations wired to it; `shutdown` flushes and undoes them."""

    provider: Any  # opentelemetry.sdk.trace.TracerProvider
    instrumentors: list[Any] = field(default_factory=list)
    apps: list[Any] = field(default_factory=list)

    def instrument_app(self, app: Any) -> None:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, tracer_provider=self.provider, excluded_urls=EXCLUDED_URLS)
        self.apps.append(app)

    def force_flush(self, timeout_s: float = 10.0) -> bool:
        return bool(self.provider.force_flush(int(timeout_s * 1000)))

    def shutdown(self) -> None:
        global _active
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        for app in self.apps:
            FastAPIInstrumentor.uninstrument_app(app)
        for instrumentor in self.instrumentors:
            instrumentor.uninstrument()
        self.provider.shutdown()
        if _active is self:
            _active = None


_active: Tracing | None = None


def use_stable_semantic_conventions() -> None:
    """Have the instrumentations write the stable HTTP and database attribute names, unless
    OTEL_SEMCONV_STABILITY_OPT_IN says otherwise. They read the variable once per process, at their first
    `instrument()`; reading it again here makes the choice hold even when something instrumented earlier."""
    from opentelemetry.instrumentation._semconv import _OpenTelemetrySemanticConventionStability as Stability

    os.environ.setdefault(SEMCONV_OPT_IN, STABLE_SEMCONV)
    with Stability._lock:
        Stability._initialized = False
    Stability._initialize()  # type: ignore[no-untyped-call]


def _provider(resource: Any) -> TracerProvider:
    """A tracer provider whose tracers for QUIET_SCOPES record nothing and leave the current span as it is."""
    from opentelemetry.sdk.trace import TracerProvider

    class QuietScopesProvider(TracerProvider):
        def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> trace.Tracer:
            if instrumenting_module_name in QUIET_SCOPES:
                return trace.NoOpTracer()
            return super().get_tracer(instrumenting_module_name, *args, **kwargs)

    return QuietScopesProvider(resource=resource)


def setup_tracing(
    service_name: str,
    *,
    set_global: bool = True,
    exporter: SpanExporter | None = None,
    statement_spans: bool | None = None,
) -> Tracing | None:
    """Install tracing for this process when an OTLP endpoint is configured; None (and nothing installed) otherwise.

    `set_global=False` keeps the provider out of `opentelemetry.trace`'s global (tests: it can be set once per process);
    the instrumentations still report to it. `exporter` replaces OTLP and installs tracing whatever the environment
    says (tests: an in-memory exporter, each span handed over as it ends). `statement_spans` (a span per SQL statement)
    defaults to on everywhere but the worker.
    """
    global _active
    if exporter is None and not tracing_requested():
        return None
    if _active is not None:
        return _active
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    use_stable_semantic_conventions()
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name}
    provider = _provider(Resource.create(attributes))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    if set_global:
        trace.set_tracer_provider(provider)
    tracing = Tracing(provider)
    if statement_spans is None:
        statement_spans = service_name != WORKER
    instrumentors: list[Any] = [HTTPXClientInstrumentor(), AioHttpClientInstrumentor()]
    if statement_spans:
        instrumentors.append(PsycopgInstrumentor())
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)
        tracing.instrumentors.append(instrumentor)
    _active = tracing
    return tracing


def instrument_app(app: Any) -> None:
    """Trace the FastAPI app's requests when tracing is on; nothing otherwise."""
    if _active is not None:
        _active.instrument_app(app)


def instrument_asgi(app: Any) -> Any:
    """A plain ASGI app (the specialists' Starlette app) wrapped to trace its requests when tracing is on."""
    if _active is None:
        return app
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    return OpenTelemetryMiddleware(app, excluded_urls=EXCLUDED_URLS, tracer_provider=_active.provider)


def shutdown_tracing() -> None:
    if _active is not None:
        _active.shutdown()


# --- logs ------------------------------------------------------------------------------------------------------


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the current trace and span ids when there are."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            line["trace_id"] = format(context.trace_id, "032x")
            line["span_id"] = format(context.span_id, "016x")
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(log_format: str, *, level: int = logging.INFO) -> None:
    """`json`: every log record (ours, uvicorn's, the SDKs') as one JSON line on stderr. `text`: leave logging as is."""
    if log_format != "json":
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # let uvicorn's records reach the JSON handler
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
