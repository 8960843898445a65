"""The bounded loop: each bound is checked before the call that would exceed it; tools; events; typed stops."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from countersign.llm import (
    Limits,
    LoopStopped,
    Message,
    ModelRequest,
    ModelResponse,
    NoRecordedResponse,
    ProviderError,
    ReplayProvider,
    ToolCall,
    run_loop,
)
from countersign.llm.loop import estimate_prompt_tokens

REQUEST = ModelRequest(
    model="test-model", template_hash="t" * 64, messages=(Message("user", "Why did rent rise?"),), max_tokens=100
)


def asks_for(tool: str, step: int) -> ModelResponse:
    return ModelResponse(None, (ToolCall(f"call-{step}", tool, {"account": "6100"}),), 10, 5, "tool_calls")


def answers(text: str) -> ModelResponse:
    return ModelResponse(text, (), 10, 5, "stop")


class CountingProvider:
    """Plays a script of responses (the last one repeats) and counts the calls it was asked."""

    name = "fake"

    def __init__(self, *script: ModelResponse, on_call: Any = None) -> None:
        self.script = list(script)
        self.requests: list[ModelRequest] = []
        self.on_call = on_call

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if self.on_call is not None:
            self.on_call()
        return self.script[min(len(self.requests), len(self.script)) - 1]


class AlwaysAsksForATool(CountingProvider):
    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return asks_for("gl_lines", len(self.requests))


def gl_lines(arguments: Mapping[str, Any]) -> str:
    return json.dumps({"account": arguments["account"], "lines": [{"amount": "1200.00"}]})


async def test_a_text_answer_ends_the_loop() -> None:
    provider = CountingProvider(answers("Rent rose with the new lease."))
    result = await run_loop(provider, REQUEST)
    assert (result.text, result.steps, result.tokens_in, result.tokens_out) == (
        "Rent rose with the new lease.",
        1,
        10,
        5,
    )
    assert provider.calls == 1


async def test_tool_calls_run_and_their_results_go_back_to_the_model() -> None:
    provider = CountingProvider(asks_for("gl_lines", 1), answers("It rose by 1200.00."))
    result = await run_loop(provider, REQUEST, tools={"gl_lines": gl_lines})
    assert result.text == "It rose by 1200.00." and result.steps == 2 and result.tokens_in == 20
    second = provider.requests[1].messages
    assert second[:1] == REQUEST.messages
    assert second[1] == Message("assistant", "", tool_calls=(ToolCall("call-1", "gl_lines", {"account": "6100"}),))
    assert second[2].role == "tool" and second[2].tool_call_id == "call-1"
    assert json.loads(second[2].content)["lines"] == [{"amount": "1200.00"}]


async def test_an_unknown_tool_gets_a_tool_message_not_an_exception() -> None:
    provider = CountingProvider(asks_for("approve_payment", 1), answers("I cannot approve."))
    result = await run_loop(provider, REQUEST, tools={"gl_lines": gl_lines})
    assert result.text == "I cannot approve."
    reply = json.loads(provider.requests[1].messages[-1].content)
    assert reply == {"error": "unknown tool 'approve_payment'", "tools": ["gl_lines"]}


async def test_every_step_and_tool_call_is_an_event_sent_to_the_sink_and_returned() -> None:
    sunk: list[Mapping[str, Any]] = []
    provider = CountingProvider(asks_for("gl_lines", 1), answers("done"))
    result = await run_loop(provider, REQUEST, tools={"gl_lines": gl_lines}, sink=sunk.append)
    assert list(result.events) == sunk
    assert [e["kind"] for e in sunk] == ["model_step", "tool_call", "model_step"]
    first, tool, second = sunk
    assert first == {
        "kind": "model_step",
        "step": 1,
        "model": "test-model",
        "template_hash": "t" * 64,
        "request_key": REQUEST.key(),
        "tokens_in": 10,
        "tokens_out": 5,
        "latency_ms": first["latency_ms"],
        "attempts": 1,
        "tool_calls": ["gl_lines"],
        "finish_reason": "tool_calls",
    }
    assert isinstance(first["latency_ms"], int) and first["latency_ms"] >= 0
    assert second["request_key"] == provider.requests[1].key() != REQUEST.key()
    assert tool["step"] == 1 and tool["tool"] == "gl_lines" and len(tool["arguments_sha256"]) == 64
    assert tool["result_chars"] == len(gl_lines({"account": "6100"}))
    assert json.loads(json.dumps(sunk)) == sunk  # JSON-safe


async def test_the_step_bound_stops_before_the_seventh_call() -> None:
    provider = AlwaysAsksForATool()
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(provider, REQUEST, tools={"gl_lines": gl_lines}, limits=Limits(max_tokens=100_000))
    assert provider.calls == 6
    assert (stopped.value.reason, stopped.value.bound, stopped.value.step) == ("budget_exhausted", "steps", 7)
    assert "max_steps=6" in stopped.value.detail and "step 7" in stopped.value.detail
    assert len([e for e in stopped.value.events if e["kind"] == "model_step"]) == 6


async def test_the_token_bound_stops_before_the_call_that_could_exceed_it() -> None:
    first_prompt = estimate_prompt_tokens(REQUEST)
    # Room for step 1 (its prompt estimate + max_tokens) but not for step 2 after 15 tokens were spent.
    ceiling = first_prompt + REQUEST.max_tokens + 10
    provider = AlwaysAsksForATool()
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(provider, REQUEST, tools={"gl_lines": gl_lines}, limits=Limits(max_tokens=ceiling))
    assert provider.calls == 1
    assert (stopped.value.reason, stopped.value.bound, stopped.value.step) == ("budget_exhausted", "tokens", 2)
    assert f"max_tokens={ceiling}" in stopped.value.detail and "15 used" in stopped.value.detail


async def test_the_token_bound_refuses_even_the_first_call_when_it_cannot_fit() -> None:
    provider = CountingProvider(answers("never"))
    ceiling = estimate_prompt_tokens(REQUEST) + REQUEST.max_tokens - 1
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(provider, REQUEST, limits=Limits(max_tokens=ceiling))
    assert provider.calls == 0
    assert (stopped.value.bound, stopped.value.step) == ("tokens", 1)


async def test_exactly_reaching_the_token_ceiling_is_allowed() -> None:
    provider = CountingProvider(answers("fits"))
    ceiling = estimate_prompt_tokens(REQUEST) + REQUEST.max_tokens
    assert (await run_loop(provider, REQUEST, limits=Limits(max_tokens=ceiling))).text == "fits"


async def test_the_wall_clock_bound_stops_before_the_next_call_once_the_deadline_passed() -> None:
    now = [100.0]
    # Each call takes 3 fake seconds: steps start at 0, 3, 6, 9; the deadline of 10 s is past at 12.
    provider = AlwaysAsksForATool()
    provider_complete = provider.complete

    async def slow_complete(request: ModelRequest) -> ModelResponse:
        now[0] += 3.0
        return await provider_complete(request)

    provider.complete = slow_complete  # type: ignore[method-assign]
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(
            provider,
            REQUEST,
            tools={"gl_lines": gl_lines},
            limits=Limits(deadline_s=10.0, max_tokens=100_000),
            clock=lambda: now[0],
        )
    assert provider.calls == 4
    assert (stopped.value.reason, stopped.value.bound, stopped.value.step) == ("budget_exhausted", "wall_clock", 5)
    assert "12.000s elapsed" in stopped.value.detail and "deadline_s=10.0" in stopped.value.detail


async def test_a_hung_provider_is_stopped_by_the_remaining_deadline() -> None:
    class Hangs:
        name = "hangs"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            await asyncio.sleep(30)
            raise AssertionError("unreachable")

    started = asyncio.get_running_loop().time()
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(Hangs(), REQUEST, limits=Limits(deadline_s=0.2))
    assert asyncio.get_running_loop().time() - started < 2.0
    assert (stopped.value.reason, stopped.value.bound, stopped.value.step) == ("budget_exhausted", "wall_clock", 1)


async def test_a_missing_cassette_stops_with_no_recorded_response(tmp_path: Any) -> None:
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(ReplayProvider(tmp_path), REQUEST)
    assert (stopped.value.reason, stopped.value.bound, stopped.value.step) == ("no_recorded_response", None, 1)
    assert REQUEST.key() in stopped.value.detail
    assert isinstance(stopped.value.__cause__, NoRecordedResponse)


async def test_a_provider_error_stops_with_provider_error() -> None:
    class Fails:
        name = "fails"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            raise ProviderError("HTTP 400 from the fake")

    with pytest.raises(LoopStopped) as stopped:
        await run_loop(Fails(), REQUEST)
    assert (stopped.value.reason, stopped.value.bound, stopped.value.step) == ("provider_error", None, 1)
    assert "HTTP 400" in stopped.value.detail


async def test_an_answer_with_neither_text_nor_tool_calls_is_a_provider_error() -> None:
    provider = CountingProvider(ModelResponse(None, (), 10, 0, "length"))
    with pytest.raises(LoopStopped) as stopped:
        await run_loop(provider, REQUEST)
    assert (stopped.value.reason, stopped.value.step) == ("provider_error", 1)


@pytest.mark.parametrize(
    "limits",
    [
        dict(max_steps=0),
        dict(deadline_s=0.0),
        dict(max_tokens=0),
        dict(max_attempts_per_step=0),
        dict(retry_backoff_s=0.0),
        dict(max_retry_wait_s=-1.0),
        dict(min_attempt_s=0.0),
    ],
)
def test_limits_must_be_positive(limits: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="positive"):
        Limits(**limits)
