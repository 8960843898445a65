"""Observability: /metrics after a close, overdue gates and the outbox's age, the build and the process, OTLP spans for
one decision under the stable semantic conventions, /readyz against the schema head, JSON logs."""

from __future__ import annotations

import io
import json
import logging
import platform
import re
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import psycopg
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from prometheus_client.parser import text_string_to_metric_families

from countersign.bootstrap import migrate, telemetry
from countersign.bootstrap.app import create_app
from countersign.bootstrap.database import Database, with_database_name, with_user
from countersign.bootstrap.metrics import ServeMetrics, build_labels
from countersign.bootstrap.runtime import Runtime, engine_context
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.support import APPROVERS, count, post_decision, rewrite_gate_as_owner, start_default_close

# Every label value /metrics may carry: fixed vocabularies, never data from a close. The build's and the platform's
# labels are fixed for the life of the process.
ALLOWED_LABEL_VALUES = {
    "door": {"signed_callback", "slack", "teams"},
    "outcome": {"recorded", "unauthenticated", "refused", "not_found", "conflict", "invalid", "error", "answered"},
    "state": {"open", "approved", "rejected", "expired", "cancelled"},
    "version": {build_labels()["version"], platform.python_version()},
    "revision": {build_labels()["revision"]},
    "implementation": {platform.python_implementation()},
    "major": {platform.python_version_tuple()[0]},
    "minor": {platform.python_version_tuple()[1]},
    "patchlevel": {platform.python_version_tuple()[2]},
}


async def _run_close_to_closed(conn: Any, runtime: Runtime, engine_ctx: Any, api: Any, books: Any) -> str:
    """The default close, its bank feed corrected, every gate decided over the signed callback, until `closed`."""
    from countersign.engine.books import load_bank_feed

    close_id = await start_default_close(conn, runtime, books)
    await advance(conn, close_id, engine_ctx)
    async with conn.cursor() as cur:
        await cur.execute("SELECT book_set_id FROM close_run WHERE close_id = %s", (close_id,))
        row = await cur.fetchone()
    await load_bank_feed(
        conn, row[0], books / "corrected" / "bank_lines.csv", loaded_by="alice.chen", close_id=close_id
    )
    for _ in range(10):
        status = await close_status(conn, close_id)
        if status["status"] == "closed":
            break
        for gate in status["gates"]:
            if gate["status"] != "open":
                continue
            excluded = {gate["prepared_by"], *gate["requested_by"]}
            eligible = [p for p in APPROVERS[gate["approver_role"]] if p not in excluded]
            for principal in eligible[: gate["quorum"] - gate["approvals"]]:
                assert (await post_decision(api, gate["gate_id"], principal)).status_code == 200
        await advance(conn, close_id, engine_ctx)
    assert (await close_status(conn, close_id))["status"] == "closed"
    return close_id


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def test_metrics_after_a_close_count_decisions_and_gates_and_reveal_no_data(
    conn: Any, runtime: Runtime, engine_ctx: Any, api: Any, default_books: Any
) -> None:
    close_id = await _run_close_to_closed(conn, runtime, engine_ctx, api, default_books)
    # One refused decision too: the outcome label tells them apart.
    status = await close_status(conn, close_id)
    refused = await post_decision(api, status["gates"][0]["gate_id"], "mallory.unknown")
    assert refused.status_code in (403, 404)

    response = await api.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    samples = _samples(text)

    decided = await count(conn, "SELECT count(*) FROM gate_decision")
    assert decided >= 5
    recorded = samples[("countersign_decision_seconds_count", (("door", "signed_callback"), ("outcome", "recorded")))]
    assert recorded == decided
    assert samples[("countersign_decisions_recorded", (("door", "signed_callback"),))] == decided
    gates = {state: samples[("countersign_gates", (("state", state),))] for state in ALLOWED_LABEL_VALUES["state"]}
    assert gates["approved"] == len(status["gates"]) >= 5
    assert gates["open"] == gates["rejected"] == 0
    assert samples[("countersign_trace_head_seq", ())] == await count(conn, "SELECT max(seq) FROM trace_event")
    signed = await count(conn, "SELECT max(tree_size) FROM trace_checkpoint")  # the close ends with a checkpoint
    assert (
        samples[("countersign_trace_unsigned_events", ())] == samples[("countersign_trace_head_seq", ())] - signed >= 1
    )
    assert samples[("countersign_outbox_backlog", ())] == 0
    assert samples[("countersign_dispatch_dead_letters", ())] == 0
    assert samples[("countersign_database_up", ())] == 1
    assert samples[("countersign_gates_overdue", ())] == 0
    assert samples[("countersign_outbox_oldest_pending_age_seconds", ())] == 0
    assert samples[("countersign_outbox_over_budget", ())] == 0
    build = tuple(sorted(build_labels().items()))
    assert samples[("countersign_build_info", build)] == 1
    assert samples[("process_cpu_seconds_total", ())] > 0  # the process collector (Linux /proc)
    assert samples[("process_resident_memory_bytes", ())] > 0
    assert any(name == "python_info" for name, _ in samples)

    # Only counts and durations: every label value comes from a fixed vocabulary, and nothing from the close shows.
    for (_, labels), _value in samples.items():
        for key, value in labels:
            if key == "le":
                continue
            assert value in ALLOWED_LABEL_VALUES[key], (key, value)
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT principal_id, reason, gate_id::text FROM gate_decision"
            " UNION ALL SELECT entity, period, close_id::text FROM close_run"
            " UNION ALL SELECT abs(amount)::text, account, journal_id::text FROM journal_line"
        )
        secrets = {str(v) for row in await cur.fetchall() for v in row if v is not None and len(str(v)) > 3}
    secrets |= {close_id, "alice.chen", "bob.osei", "carol.main", "mallory"}
    # Sample values are counts and durations; digits in them may match an amount by chance, so look elsewhere.
    words = "\n".join(line if line.startswith("#") else line.rsplit(" ", 1)[0] for line in text.splitlines())
    leaked = sorted(s for s in secrets if s in words)
    assert not leaked, leaked


async def test_metrics_count_overdue_gates_and_how_old_the_outbox_is_against_its_budget(
    conn: Any, runtime: Runtime, default_books: Any
) -> None:
    """Cards wait in the outbox (nothing delivers here); the database clock is moved by rewriting timestamps."""
    chat = runtime.settings.model_copy(
        update={"slack_bot_token": "xoxb-test", "slack_signing_secret": "s3cret", "slack_channel": "C0CLOSE"}
    )
    chat_runtime = Runtime(chat, runtime.database, runtime.policy, runtime.workflows)
    close_id = await start_default_close(conn, chat_runtime, default_books)
    async with engine_context(chat_runtime) as ctx:
        await advance(conn, close_id, ctx)
    gates = [g for g in (await close_status(conn, close_id))["gates"] if g["status"] == "open"]
    pending = await count(conn, "SELECT count(*) FROM outbox_message WHERE status = 'pending'")
    assert len(gates) >= 2 and pending >= 2

    metrics = ServeMetrics(outbox_budget_s=3600.0)
    await metrics.refresh_from_tables(conn)
    fresh = _samples(metrics.exposition().decode())
    assert fresh[("countersign_gates_overdue", ())] == 0  # every gate is within its due time
    assert 0 <= fresh[("countersign_outbox_oldest_pending_age_seconds", ())] < 60
    assert fresh[("countersign_outbox_over_budget", ())] == 0
    assert fresh[("countersign_outbox_budget_seconds", ())] == 3600

    # One gate past its due time. One message enqueued two hours ago; one three hours ago but redriven ten minutes
    # ago, so its budget starts again (migration 0021's budget_from).
    await rewrite_gate_as_owner(conn, gates[0]["gate_id"], "due_at = now() - interval '1 minute', expires_at = NULL")
    async with conn.cursor() as cur:
        await cur.execute("SELECT message_id FROM outbox_message WHERE status = 'pending' ORDER BY message_id LIMIT 2")
        first, second = (row[0] for row in await cur.fetchall())
    await conn.execute(
        "UPDATE outbox_message SET created_at = now() - interval '2 hours', budget_from = now() - interval '2 hours'"
        " WHERE message_id = %s",
        (first,),
    )
    await conn.execute(
        "UPDATE outbox_message SET created_at = now() - interval '3 hours', budget_from = now() - interval '10 minutes'"
        " WHERE message_id = %s",
        (second,),
    )
    await metrics.refresh_from_tables(conn)
    aged = _samples(metrics.exposition().decode())
    assert aged[("countersign_gates_overdue", ())] == 1
    assert 10800 <= aged[("countersign_outbox_oldest_pending_age_seconds", ())] < 10860
    assert aged[("countersign_outbox_over_budget", ())] == 1  # two hours is over the hour; ten minutes is not
    assert aged[("countersign_outbox_backlog", ())] == pending

    # A sent message is not pending, however old.
    await conn.execute("UPDATE outbox_message SET status = 'sent', sent_at = now() WHERE message_id = %s", (first,))
    await metrics.refresh_from_tables(conn)
    sent = _samples(metrics.exposition().decode())
    assert sent[("countersign_outbox_over_budget", ())] == 0
    assert sent[("countersign_outbox_backlog", ())] == pending - 1


def test_build_info_takes_the_revision_only_when_it_is_a_commit_id() -> None:
    assert build_labels({"COUNTERSIGN_REVISION": "5873C8A"})["revision"] == "5873c8a"
    assert build_labels({"COUNTERSIGN_REVISION": "main; rm -rf /"})["revision"] == "unknown"
    assert build_labels({})["revision"] == "unknown"
    assert build_labels({})["version"] == build_labels()["version"] != ""


# --- OTLP -----------------------------------------------------------------------------------------------------


class CollectorStub:
    """A tiny OTLP/HTTP collector: accepts POST /v1/traces (protobuf) and keeps the spans with their resource."""

    def __init__(self) -> None:
        self.spans: list[tuple[dict[str, Any], Any]] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with stub.lock:
                    for resource_spans in request.resource_spans:
                        resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                        for scope_spans in resource_spans.scope_spans:
                            stub.spans.extend((resource, span) for span in scope_spans.spans)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[CollectorStub]:
    stub = CollectorStub()
    yield stub
    stub.stop()


def _attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attribute in span.attributes:
        value = attribute.value
        out[attribute.key] = getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None
    return out


async def test_otlp_exporter_sends_a_server_span_and_database_spans_for_one_decision(
    conn: Any,
    runtime: Runtime,
    engine_ctx: Any,
    default_books: Any,
    collector: CollectorStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    gate = next(g for g in (await close_status(conn, close_id))["gates"] if g["task"] == "accruals")

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv(telemetry.SEMCONV_OPT_IN, raising=False)  # telemetry sets it: the stable names by default
    tracing = telemetry.setup_tracing(telemetry.SERVE, set_global=False)
    assert tracing is not None
    try:
        app = create_app(runtime)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://countersign.test") as api:
                assert (await post_decision(api, gate["gate_id"], "alice.chen")).status_code == 200
        assert tracing.force_flush()
    finally:
        tracing.shutdown()

    spans = list(collector.spans)
    assert {resource.get("service.name") for resource, _ in spans} == {"countersign-serve"}
    server = [s for _, s in spans if s.kind == s.SPAN_KIND_SERVER and "/callbacks/gates/{gate_id}/decisions" in s.name]
    assert len(server) == 1, [s.name for _, s in spans]
    request = _attributes(server[0])
    assert request["http.request.method"] == "POST" and request["http.response.status_code"] == 200
    assert request["http.route"] == "/callbacks/gates/{gate_id}/decisions"
    database = [
        s for _, s in spans if s.trace_id == server[0].trace_id and _attributes(s).get("db.system.name") == "postgresql"
    ]
    assert database, "no psycopg span under the decision's trace"
    statements = " ".join(str(_attributes(s)["db.query.text"]) for s in database)
    assert "alice.chen" not in statements  # parameters are not captured, only SQL text with placeholders
    # The stable semantic conventions only: none of the names they replace.
    old = {"http.method", "http.status_code", "http.url", "http.target", "db.statement", "db.system", "net.peer.name"}
    leftover = sorted({key for _, s in spans for key in _attributes(s)} & old)
    assert not leftover, leftover


def test_tracing_stays_off_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert telemetry.setup_tracing(telemetry.SERVE, set_global=False) is None
    assert telemetry.tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert not telemetry.tracing_requested(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}
    )


# --- /readyz --------------------------------------------------------------------------------------------------


async def _readyz(runtime: Runtime) -> httpx.Response:
    app = create_app(runtime)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://countersign.test") as client:
            return await client.get("/readyz")


async def test_readyz_is_ready_at_the_schema_head(api: Any) -> None:
    response = await api.get("/readyz")
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "ready", "schema": migrate.head_revision()}


@pytest.fixture
def database_at_0005(pg_server_url: str) -> Iterator[Database]:
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin_url = with_database_name(pg_server_url, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    database = Database(with_database_name(pg_server_url, name))
    from alembic import command

    command.upgrade(migrate.alembic_config(database), "0005")
    yield database
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_readyz_is_503_while_the_schema_is_behind(runtime: Runtime, database_at_0005: Database) -> None:
    behind = Runtime(runtime.settings, database_at_0005, runtime.policy, runtime.workflows)
    response = await _readyz(behind)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready"
    assert migrate.head_revision() in body["reason"] and "needs" in body["reason"]
    assert "countersign db upgrade" in body["reason"]


async def test_readyz_is_503_when_a_service_role_cannot_connect(
    runtime: Runtime, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("countersign.bootstrap.app.READY_TIMEOUT_S", 1.0)
    database.engine_url_override = with_user(database.url, "countersign_nobody")
    response = await _readyz(runtime)
    assert response.status_code == 503
    assert "engine role" in response.json()["reason"]


# --- JSON logs ------------------------------------------------------------------------------------------------


def test_json_logs_are_one_object_per_line_with_trace_ids_inside_a_span() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    try:
        telemetry.configure_logging("json")
        assert len(root.handlers) == 1
        root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        log = logging.getLogger("countersign.test")
        log.info("plain %s", "line")
        with TracerProvider().get_tracer("test").start_as_current_span("work") as span:
            log.warning('inside a span with "quotes"\nand a newline')
            context = span.get_span_context()
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])

    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    first, second, third = (json.loads(line) for line in lines)
    assert first["level"] == "info" and first["logger"] == "countersign.test" and first["message"] == "plain line"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$", first["time"])
    assert "trace_id" not in first
    assert second["message"] == 'inside a span with "quotes"\nand a newline'
    assert second["trace_id"] == format(context.trace_id, "032x")
    assert second["span_id"] == format(context.span_id, "016x")
    assert third["level"] == "error" and "ValueError: boom" in third["exception"]


def test_text_logs_stay_the_default() -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    telemetry.configure_logging("text")
    assert root.handlers == before


def test_worker_metrics_are_served_on_their_own_port_with_the_time_of_the_last_pass() -> None:
    from countersign.bootstrap.metrics import WorkerMetrics

    now = [1_700_000_000.0]
    metrics = WorkerMetrics(clock=lambda: now[0])
    port = metrics.serve("127.0.0.1", 0)
    try:
        started = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
        now[0] += 42.0
        metrics.pass_seconds.observe(0.3)
        metrics.passes.labels("completed").inc()
        samples = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
    finally:
        metrics.close()
    # Until the first pass ends, the last pass reads as the start: "no pass for N minutes" counts from there.
    assert started[("countersign_worker_last_pass_timestamp_seconds", ())] == 1_700_000_000.0
    assert samples[("countersign_worker_last_pass_timestamp_seconds", ())] == 1_700_000_042.0
    assert samples[("countersign_worker_pass_seconds_count", ())] == 1
    assert samples[("countersign_worker_passes_total", (("outcome", "completed"),))] == 1
    assert samples[("countersign_build_info", tuple(sorted(build_labels().items())))] == 1
    assert samples[("process_cpu_seconds_total", ())] > 0


async def test_metrics_report_the_job_queue_ready_running_failed_and_the_oldest_ready_age(
    conn: Any, runtime: Runtime, default_books: Any
) -> None:
    """Starting a close queues its advance (migration 0024's trigger); job rows are then moved as a worker would."""
    await start_default_close(conn, runtime, default_books)
    metrics = ServeMetrics()
    await metrics.refresh_from_tables(conn)
    queued = _samples(metrics.exposition().decode())
    ready = await count(
        conn, "SELECT count(*) FROM procrastinate.procrastinate_jobs WHERE status = 'todo' AND scheduled_at IS NULL"
    )
    assert ready >= 1 and queued[("countersign_jobs_ready", ())] == ready
    assert queued[("countersign_jobs_running", ())] == 0 and queued[("countersign_jobs_failed", ())] == 0
    assert 0 <= queued[("countersign_jobs_oldest_ready_age_seconds", ())] < 60

    async with conn.cursor() as cur:
        await cur.execute("SELECT id FROM procrastinate.procrastinate_jobs WHERE status = 'todo' ORDER BY id LIMIT 1")
        (job,) = await cur.fetchone()
    # Queued ten minutes ago: the oldest ready job has waited that long.
    await conn.execute(
        "UPDATE procrastinate.procrastinate_events SET at = now() - interval '10 minutes' WHERE job_id = %s", (job,)
    )
    await metrics.refresh_from_tables(conn)
    waited = _samples(metrics.exposition().decode())
    assert 600 <= waited[("countersign_jobs_oldest_ready_age_seconds", ())] < 660

    # Due only in an hour: not ready, whatever its age. Then running, then failed for good.
    await conn.execute(
        "UPDATE procrastinate.procrastinate_jobs SET scheduled_at = now() + interval '1 hour' WHERE id = %s", (job,)
    )
    await metrics.refresh_from_tables(conn)
    scheduled = _samples(metrics.exposition().decode())
    assert scheduled[("countersign_jobs_ready", ())] == ready - 1
    assert scheduled[("countersign_jobs_oldest_ready_age_seconds", ())] < 60
    await conn.execute("UPDATE procrastinate.procrastinate_jobs SET status = 'doing' WHERE id = %s", (job,))
    await metrics.refresh_from_tables(conn)
    assert _samples(metrics.exposition().decode())[("countersign_jobs_running", ())] == 1
    await conn.execute("UPDATE procrastinate.procrastinate_jobs SET status = 'failed' WHERE id = %s", (job,))
    await metrics.refresh_from_tables(conn)
    failed = _samples(metrics.exposition().decode())
    assert failed[("countersign_jobs_failed", ())] == 1 and failed[("countersign_jobs_running", ())] == 0
