"""A hostile model endpoint on a real socket: an answer that never ends, and an answer asking for 20,000 tool calls.

The 1 GiB answer is streamed by the fake from a 64 KiB block (the fake stays small); the provider stops reading at its
cap, the loop stops with `budget_exhausted` (bound `answer_bytes`), the narration turns that into the
`budget_exhausted` escalation, and this process's RSS grows < 50 MB. The 20,000 tool calls run none: the loop stops
with `budget_exhausted` (bound `tool_calls`) after one model step and no tool-call event.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from countersign.llm import (
    AnswerTooLarge,
    Limits,
    LoopStopped,
    Message,
    ModelRequest,
    OpenAICompatibleProvider,
    run_loop,
)
from countersign.llm.openai_compatible import MAX_ANSWER_BYTES
from countersign.policy.escalation import EscalationReason
from countersign.specialists.narration import NarrationEscalation, ask_model
from tests.http_edge.test_body_limits import RSS_BUDGET_BYTES, RssSampler, rss_bytes
from tests.llm.fake_openai import FakeOpenAI, Reply, completion

GIB = 1024 * 1024 * 1024
EARLY_BYTES = 32 * 1024 * 1024
"""The fake must have been cut off before it wrote this much: the cap (1 MiB) plus what the socket buffers and the
fake's own server hold after the provider stopped reading."""
REQUEST = ModelRequest(
    model="fake-model",
    template_hash="t" * 64,
    messages=(Message("system", "Explain."), Message("user", "Why did rent rise?")),
    max_tokens=200,
    temperature=0.0,
)


@pytest.mark.parametrize("declare_length", [False, True], ids=["chunked", "content-length"])
async def test_a_gib_answer_is_refused_while_read_and_rss_stays_bounded(
    fake: FakeOpenAI, http: httpx.AsyncClient, declare_length: bool
) -> None:
    provider = OpenAICompatibleProvider(fake.base_url, api_key=None, http=http)
    fake.replies.append(Reply(json=completion("warm-up")))  # first-use allocations are not growth
    await run_loop(provider, REQUEST)
    fake.replies.append(Reply(stream_bytes=GIB, declare_length=declare_length))
    before = rss_bytes(os.getpid())
    with RssSampler(os.getpid()) as sampler, pytest.raises(LoopStopped) as stopped:
        await run_loop(provider, REQUEST)
    after = rss_bytes(os.getpid())
    assert (stopped.value.reason, stopped.value.bound) == ("budget_exhausted", "answer_bytes")
    assert isinstance(stopped.value.__cause__, AnswerTooLarge)
    assert stopped.value.__cause__.max_bytes == MAX_ANSWER_BYTES
    assert fake.streamed_bytes < EARLY_BYTES, f"the provider kept reading: {fake.streamed_bytes} bytes sent"
    growth = max(after, sampler.peak_bytes) - before
    assert growth < RSS_BUDGET_BYTES, f"rss before {before} after {after} peak {sampler.peak_bytes}"


async def test_an_oversized_answer_becomes_the_budget_exhausted_escalation(
    fake: FakeOpenAI, http: httpx.AsyncClient
) -> None:
    provider = OpenAICompatibleProvider(fake.base_url, api_key=None, http=http, max_answer_bytes=64 * 1024)
    fake.replies.append(Reply(stream_bytes=64 * 1024 + 1))  # one byte over
    steps: list[Mapping[str, Any]] = []
    with pytest.raises(NarrationEscalation) as escalation:
        await ask_model(provider, REQUEST, Limits(), steps, "narrative")
    assert EscalationReason(escalation.value.reason) is EscalationReason.BUDGET_EXHAUSTED
    assert "answer-size bound" in escalation.value.detail
    fake.replies.append(Reply(json=completion("fits")))  # the same provider still reads an answer under its cap
    assert (await run_loop(provider, REQUEST)).text == "fits"


def _tool_calls(n: int) -> list[dict[str, Any]]:
    return [{"id": f"c{i}", "type": "function", "function": {"name": "gl_lines", "arguments": "{}"}} for i in range(n)]


@pytest.mark.parametrize("max_answer_bytes", [MAX_ANSWER_BYTES, 8 * MAX_ANSWER_BYTES], ids=["default", "roomy"])
async def test_twenty_thousand_tool_calls_in_one_answer_run_none(
    fake: FakeOpenAI, http: httpx.AsyncClient, max_answer_bytes: int
) -> None:
    """With the default cap the answer is too large to read; with room to read it, the tool-call bound refuses it."""
    invocations: list[Mapping[str, Any]] = []
    events: list[Mapping[str, Any]] = []

    def gl_lines(arguments: Mapping[str, Any]) -> str:
        invocations.append(arguments)
        return "[]"

    provider = OpenAICompatibleProvider(fake.base_url, api_key=None, http=http, max_answer_bytes=max_answer_bytes)
    fake.replies.append(Reply(json=completion(None, tool_calls=_tool_calls(20_000), finish_reason="tool_calls")))
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(provider, REQUEST, tools={"gl_lines": gl_lines}, sink=events.append)
    expected_bound = "answer_bytes" if max_answer_bytes == MAX_ANSWER_BYTES else "tool_calls"
    assert (stopped.value.reason, stopped.value.bound) == ("budget_exhausted", expected_bound)
    assert invocations == []
    assert [event for event in events if event["kind"] == "tool_call"] == []
    assert len(events) <= 1  # at most the one model step that asked


async def test_tool_calls_up_to_the_bound_run_and_one_more_runs_none(fake: FakeOpenAI, http: httpx.AsyncClient) -> None:
    invocations: list[Mapping[str, Any]] = []

    def gl_lines(arguments: Mapping[str, Any]) -> str:
        invocations.append(arguments)
        return "[]"

    provider = OpenAICompatibleProvider(fake.base_url, api_key=None, http=http)
    limits = Limits(max_tool_calls_per_step=3)
    fake.replies += [
        Reply(json=completion(None, tool_calls=_tool_calls(3), finish_reason="tool_calls")),
        Reply(json=completion("done")),
    ]
    assert (await run_loop(provider, REQUEST, tools={"gl_lines": gl_lines}, limits=limits)).text == "done"
    assert len(invocations) == 3
    fake.replies.append(Reply(json=completion(None, tool_calls=_tool_calls(4), finish_reason="tool_calls")))
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(provider, REQUEST, tools={"gl_lines": gl_lines}, limits=limits)
    assert stopped.value.bound == "tool_calls" and len(invocations) == 3
