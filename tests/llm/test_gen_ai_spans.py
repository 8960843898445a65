"""Each HTTP attempt at the model is one OpenTelemetry GenAI span: `chat {model}`, sizes and counts, never content."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from countersign.llm import Limits, LoopStopped, Message, ModelRequest, OpenAICompatibleProvider, run_loop
from tests.llm.fake_openai import FakeOpenAI, Reply, completion

PROMPT = "Why did rent at the Leeds depot rise in March?"
ANSWER = "Rent rose with the new lease signed in February."
REQUEST = ModelRequest(
    model="fake-model",
    template_hash="t" * 64,
    messages=(Message("system", "Explain the variance."), Message("user", PROMPT)),
    max_tokens=200,
    temperature=0.0,
)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    spans.shutdown()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def no_content_in(span: ReadableSpan) -> None:
    """No prompt, system instruction or completion text in any attribute, event or the status."""
    texts = [str(value) for value in (span.attributes or {}).values()]
    texts += [str(event.attributes) for event in span.events] + [str(span.status.description)]
    for secret in (PROMPT, "Explain the variance", ANSWER, "overloaded"):
        assert not any(secret in text for text in texts), f"{secret!r} leaked into span {span.name}"
    assert not any(key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.prompt")) for key in span.attributes or {})


async def test_a_retried_call_is_one_span_per_attempt_with_gen_ai_attributes(
    fake: FakeOpenAI, http: httpx.AsyncClient, tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    fake.replies += [
        Reply(status=429, json={"error": {"message": "overloaded"}}, headers={"Retry-After": "0"}),
        Reply(json=completion(ANSWER, prompt_tokens=31, completion_tokens=9)),
    ]
    provider = OpenAICompatibleProvider(fake.base_url, api_key=None, http=http, tracer_provider=tracer_provider)
    result = await run_loop(provider, REQUEST)
    assert result.text == ANSWER
    failed, answered = exporter.get_finished_spans()
    port = int(fake.base_url.split(":")[2].split("/")[0])
    common: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "fake-model",
        "gen_ai.request.max_tokens": 200,
        "gen_ai.request.temperature": 0.0,
        "server.address": "127.0.0.1",
        "server.port": port,
    }
    assert (failed.name, failed.kind, failed.status.status_code) == (
        "chat fake-model",
        SpanKind.CLIENT,
        StatusCode.ERROR,
    )
    assert dict(failed.attributes or {}) == {**common, "error.type": "429"}
    assert (answered.name, answered.kind, answered.status.status_code) == (
        "chat fake-model",
        SpanKind.CLIENT,
        StatusCode.UNSET,
    )
    assert dict(answered.attributes or {}) == {
        **common,
        "gen_ai.response.model": "fake-model",
        "gen_ai.response.id": "chatcmpl-fake",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 31,
        "gen_ai.usage.output_tokens": 9,
    }
    for span in (failed, answered):
        no_content_in(span)
        assert span.events == ()  # no exception event: its message would carry the body excerpt


async def test_a_malformed_answer_and_a_transport_failure_name_their_error_type(
    fake: FakeOpenAI, http: httpx.AsyncClient, tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    fake.replies.append(Reply(raw=("{" + ANSWER).encode()))
    provider = OpenAICompatibleProvider(fake.base_url, api_key=None, http=http, tracer_provider=tracer_provider)
    with pytest.raises(LoopStopped):
        await run_loop(provider, REQUEST)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    closed = OpenAICompatibleProvider(
        f"http://127.0.0.1:{port}/v1", api_key=None, http=http, tracer_provider=tracer_provider
    )
    with pytest.raises(LoopStopped):
        await run_loop(closed, REQUEST, limits=Limits(max_attempts_per_step=1))
    malformed, refused = exporter.get_finished_spans()
    assert (malformed.attributes or {})["error.type"] == "malformed_answer"
    assert (refused.attributes or {})["error.type"] == "httpx.ConnectError"
    for span in (malformed, refused):
        assert span.status.status_code == StatusCode.ERROR
        no_content_in(span)
