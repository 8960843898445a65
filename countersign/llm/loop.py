"""The bounded agent loop: every bound is checked before the call that would spend, never after.

Before step n calls the provider it checks, in order:
  steps       n <= max_steps
  wall_clock  elapsed < deadline_s (elapsed from the loop's start, by `clock`)
  tokens      tokens used so far (in + out of every earlier step) + this request's estimated prompt tokens
              + request.max_tokens <= max_tokens

The prompt estimate is len(canonical request bytes) // 4: about four bytes a token for English JSON, no tokenizer
dependency, and the same number every run. It is an estimate, so the ceiling can be passed only by what the
estimate under-counts this step; the next step counts the provider's reported usage exactly. The call itself runs
under `asyncio.timeout(deadline_s - elapsed)`. Any bound that fails raises `LoopStopped("budget_exhausted", bound,
step)` without calling.

Two bounds are checked on the answer, before anything in it runs:
  answer_bytes  the provider refused an answer past its byte cap while reading it (`AnswerTooLarge`)
  tool_calls    the answer asks for more than `max_tool_calls_per_step` tool calls: none of them runs

A step whose call fails with `ProviderUnavailable` (HTTP 429, a 5xx, a connection never made) is asked again, by
tenacity, inside the same bounds. The wait before the next attempt is the server's `Retry-After` when it gave one,
else full-jitter exponential backoff (uniform in [0, min(max_retry_wait_s, retry_backoff_s * 2 ** (attempt - 1))]).
The loop stops retrying, and raises `LoopStopped("model_unavailable", None, step)` at once, without sleeping, when
  - the step has made `max_attempts_per_step` attempts,
  - the wait would be longer than `max_retry_wait_s` (a `Retry-After` past it is not shortened: the server said
    it would not answer sooner), or
  - the time elapsed plus the wait would leave less than `min_attempt_s` before `deadline_s` (an attempt started
    with a few milliseconds left could only time out).
Each attempt runs under `asyncio.timeout` of the time then left; one still waiting at the deadline is a
`budget_exhausted` stop on `wall_clock`, as without retries. An attempt that fails otherwise is not retried.
A failed attempt reports no usage, so it spends no tokens of the ceiling and no step.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_random_exponential

from countersign.llm.messages import Message, ModelRequest, ModelResponse, ToolCall, canonical_json
from countersign.llm.provider import AnswerTooLarge, NoRecordedResponse, Provider, ProviderError, ProviderUnavailable

Tool = Callable[[Mapping[str, Any]], str]  # a query the agent may call; returns text (JSON) for the model
Sink = Callable[[Mapping[str, Any]], None]  # receives one event dict per model step and per tool call
Sleep = Callable[[float], Awaitable[None]]

BYTES_PER_TOKEN_ESTIMATE = 4


@dataclass(frozen=True)
class Limits:
    max_steps: int = 6
    deadline_s: float = 20.0
    max_tokens: int = 4000
    max_tool_calls_per_step: int = 8
    max_attempts_per_step: int = 5  # HTTP attempts for one step: the first and up to four retries
    retry_backoff_s: float = 1.0  # the first retry's backoff window; it doubles each retry
    max_retry_wait_s: float = 10.0  # no single wait is longer; a Retry-After past it stops the loop at once
    min_attempt_s: float = 1.0  # a retry is made only if at least this much of the deadline is left after its wait

    def __post_init__(self) -> None:
        counts = (self.max_steps, self.max_tokens, self.max_tool_calls_per_step, self.max_attempts_per_step)
        seconds = (self.deadline_s, self.retry_backoff_s, self.max_retry_wait_s, self.min_attempt_s)
        if min(counts) < 1 or min(seconds) <= 0:
            raise ValueError(f"limits must be positive: {self}")


class LoopStopped(Exception):
    """The loop ended without an answer. `reason` is the escalation reason; `bound` names the budget that ran out."""

    def __init__(
        self,
        reason: str,
        bound: str | None,
        step: int,
        detail: str = "",
        *,
        events: tuple[Mapping[str, Any], ...] = (),
        tokens_in: int = 0,
        tokens_out: int = 0,
    ) -> None:
        self.reason = reason  # "budget_exhausted" | "no_recorded_response" | "model_unavailable" | "provider_error"
        self.bound = bound  # budget_exhausted: "steps" | "wall_clock" | "tokens" | "answer_bytes" | "tool_calls"
        self.step = step  # the step that would have run (1-based)
        self.detail = detail or f"{reason} at step {step}"
        self.events = events  # the events of the steps that did run
        self.tokens_in = tokens_in
        self.tokens_out = tokens_out
        super().__init__(self.detail)


@dataclass(frozen=True)
class LoopResult:
    text: str
    steps: int
    tokens_in: int
    tokens_out: int
    events: tuple[Mapping[str, Any], ...]


def estimate_prompt_tokens(request: ModelRequest) -> int:
    return len(request.canonical()) // BYTES_PER_TOKEN_ESTIMATE


def _no_tool_message(name: str, known: Mapping[str, Tool]) -> str:
    return canonical_json({"error": f"unknown tool {name!r}", "tools": sorted(known)}).decode()


class _Run:
    """The state of one loop: messages so far, tokens spent, events emitted."""

    def __init__(
        self, request: ModelRequest, limits: Limits, sink: Sink | None, clock: Callable[[], float], sleep: Sleep
    ) -> None:
        self.request = request
        self.limits = limits
        self.sink = sink
        self.clock = clock
        self.sleep = sleep
        self.started = clock()
        self.messages: list[Message] = list(request.messages)
        self.tokens_in = 0
        self.tokens_out = 0
        self.events: list[Mapping[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if self.sink is not None:
            self.sink(event)

    def stop(self, reason: str, bound: str | None, step: int, detail: str) -> LoopStopped:
        return LoopStopped(
            reason,
            bound,
            step,
            detail,
            events=tuple(self.events),
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
        )

    def check_budget(self, step: int, step_request: ModelRequest) -> float:
        """Raise before a call that would exceed a bound; return the seconds left before the deadline."""
        limits = self.limits
        if step > limits.max_steps:
            raise self.stop(
                "budget_exhausted", "steps", step, f"step bound: step {step} would exceed max_steps={limits.max_steps}"
            )
        elapsed_s = self.elapsed_s()
        if elapsed_s >= limits.deadline_s:
            raise self.stop(
                "budget_exhausted",
                "wall_clock",
                step,
                f"wall-clock bound: before step {step}, {elapsed_s:.3f}s elapsed of deadline_s={limits.deadline_s}",
            )
        used = self.tokens_in + self.tokens_out
        prompt_estimate = estimate_prompt_tokens(step_request)
        if used + prompt_estimate + step_request.max_tokens > limits.max_tokens:
            raise self.stop(
                "budget_exhausted",
                "tokens",
                step,
                f"token bound: step {step} could spend {used} used + {prompt_estimate} prompt (estimated)"
                f" + {step_request.max_tokens} max_tokens = {used + prompt_estimate + step_request.max_tokens}"
                f" > max_tokens={limits.max_tokens}",
            )
        return limits.deadline_s - elapsed_s

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    async def call(self, provider: Provider, step: int, step_request: ModelRequest) -> tuple[ModelResponse, int]:
        """The step's answer and how many attempts it took; retries `ProviderUnavailable` within the bounds."""
        retries = _Retries(self, step)
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(ProviderUnavailable),
            wait=retries.wait,
            stop=retries.stop,
            sleep=self.sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    retries.attempts += 1
                    remaining_s = self.limits.deadline_s - self.elapsed_s()
                    if remaining_s <= 0:
                        raise self.stop(
                            "budget_exhausted",
                            "wall_clock",
                            step,
                            f"wall-clock bound: before attempt {retries.attempts} of step {step},"
                            f" {self.elapsed_s():.3f}s elapsed of deadline_s={self.limits.deadline_s}",
                        )
                    async with asyncio.timeout(remaining_s):
                        return await provider.complete(step_request), retries.attempts
        except TimeoutError:
            earlier = (
                f" (attempt {retries.attempts}; earlier: {', '.join(retries.failures)})" if retries.failures else ""
            )
            raise self.stop(
                "budget_exhausted",
                "wall_clock",
                step,
                f"wall-clock bound: step {step} was still waiting when deadline_s={self.limits.deadline_s} passed"
                + earlier,
            ) from None
        except NoRecordedResponse as error:
            raise self.stop("no_recorded_response", None, step, f"step {step}: {error}") from error
        except AnswerTooLarge as error:
            raise self.stop(
                "budget_exhausted", "answer_bytes", step, f"answer-size bound: step {step}: {error}"
            ) from error
        except ProviderUnavailable as error:
            raise self.stop(
                "model_unavailable",
                None,
                step,
                f"model unavailable: step {step} made {retries.attempts} attempt(s) in {self.elapsed_s():.3f}s"
                f" ({', '.join(retries.failures)}); {retries.gave_up}; last: {error}",
            ) from error
        except ProviderError as error:
            raise self.stop("provider_error", None, step, f"step {step}: {error}") from error
        raise AssertionError("tenacity ended without an answer or an error")  # reraise=True: unreachable

    def run_tool(self, step: int, call: ToolCall, tools: Mapping[str, Tool]) -> str:
        tool = tools.get(call.name)
        result = _no_tool_message(call.name, tools) if tool is None else tool(call.arguments)
        self.emit(
            {
                "kind": "tool_call",
                "step": step,
                "tool": call.name,
                "arguments_sha256": hashlib.sha256(canonical_json(dict(call.arguments))).hexdigest(),
                "result_chars": len(result),
            }
        )
        return result


async def run_loop(
    provider: Provider,
    request: ModelRequest,
    *,
    tools: Mapping[str, Tool] | None = None,
    limits: Limits = Limits(),
    sink: Sink | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> LoopResult:
    """Ask, run the tools the model asks for, ask again, until it answers in text or a bound stops it.

    A tool receives the arguments the model wrote, unchecked: it validates them and answers an error as text. An
    exception a tool raises is ours and propagates; an unknown tool name is the model's and gets a tool message.
    """
    known_tools: Mapping[str, Tool] = tools or {}
    run = _Run(request, limits, sink, clock, sleep)
    step = 0
    while True:
        step += 1
        step_request = replace(request, messages=tuple(run.messages))
        run.check_budget(step, step_request)
        call_started = clock()
        response, attempts = await run.call(provider, step, step_request)
        latency_ms = round((clock() - call_started) * 1000)
        run.tokens_in += response.tokens_in
        run.tokens_out += response.tokens_out
        run.emit(
            {
                "kind": "model_step",
                "step": step,
                "model": request.model,
                "template_hash": request.template_hash,
                "request_key": step_request.key(),
                "tokens_in": response.tokens_in,
                "tokens_out": response.tokens_out,
                "latency_ms": latency_ms,
                "attempts": attempts,
                "tool_calls": [call.name for call in response.tool_calls],
                "finish_reason": response.finish_reason,
            }
        )
        if len(response.tool_calls) > limits.max_tool_calls_per_step:
            raise run.stop(
                "budget_exhausted",
                "tool_calls",
                step,
                f"tool-call bound: step {step} asked for {len(response.tool_calls)} tool calls"
                f" > max_tool_calls_per_step={limits.max_tool_calls_per_step}; none was run",
            )
        if not response.tool_calls:
            if response.content is None:
                raise run.stop("provider_error", None, step, f"step {step}: the answer had neither text nor tool calls")
            return LoopResult(
                text=response.content,
                steps=step,
                tokens_in=run.tokens_in,
                tokens_out=run.tokens_out,
                events=tuple(run.events),
            )
        run.messages.append(Message(role="assistant", content=response.content or "", tool_calls=response.tool_calls))
        for call in response.tool_calls:
            result = run.run_tool(step, call, known_tools)
            run.messages.append(Message(role="tool", content=result, tool_call_id=call.id))


class _Retries:
    """Tenacity's wait and stop for one step, keeping what a `model_unavailable` stop must say."""

    def __init__(self, run: _Run, step: int) -> None:
        self.run = run
        self.step = step
        self.attempts = 0
        self.failures: list[str] = []  # each failed attempt's error type, e.g. "429", "503", "httpx.ConnectError"
        self.gave_up = ""
        self.backoff = wait_random_exponential(multiplier=run.limits.retry_backoff_s, max=run.limits.max_retry_wait_s)

    def wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, ProviderUnavailable) and error.retry_after_s is not None:
            return error.retry_after_s
        return float(self.backoff(state))

    def stop(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, ProviderError):
            self.failures.append(error.error_type)
        limits = self.run.limits
        wait_s = state.upcoming_sleep
        elapsed_s = self.run.elapsed_s()
        if state.attempt_number >= limits.max_attempts_per_step:
            self.gave_up = f"no retry after max_attempts_per_step={limits.max_attempts_per_step}"
        elif wait_s > limits.max_retry_wait_s:
            self.gave_up = (
                f"the server asked for a wait of {wait_s:.3f}s, over max_retry_wait_s={limits.max_retry_wait_s}"
            )
        elif elapsed_s + wait_s + limits.min_attempt_s > limits.deadline_s:
            self.gave_up = (
                f"a wait of {wait_s:.3f}s after {elapsed_s:.3f}s would leave less than min_attempt_s="
                f"{limits.min_attempt_s} of deadline_s={limits.deadline_s}"
            )
        return bool(self.gave_up)
