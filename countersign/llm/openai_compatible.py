"""A provider that speaks OpenAI's chat-completions JSON over httpx: vLLM, Ollama, llama.cpp's server, Azure OpenAI.

The answer must report usage (prompt and completion tokens): the loop's token ceiling cannot be kept without it,
so an answer without usage is refused like any other malformed answer.

The answer is read incrementally and refused (`AnswerTooLarge`) as soon as it passes `max_answer_bytes`, or at once
when its Content-Length says it will; compression is not accepted, so the bytes counted are the bytes held.

A failure the model may not repeat if asked again is `ProviderUnavailable`, which the loop retries within its bounds:
HTTP 429, a 5xx other than 501 and 505 (which say the request itself will never be served), and a connection that
was never made (nothing was sent, so nothing was spent). A read that failed or timed out after the request was sent
is not retried: the server may have spent tokens the loop cannot count. Any other status is a plain `ProviderError`.
A `Retry-After` header (seconds, or an HTTP-date read against `wall_clock`) travels with the error.

Every HTTP attempt is one OpenTelemetry span named `chat {model}` with the GenAI semantic conventions' attributes:
sizes, ids, token counts and finish reasons, never a prompt, a completion or a body excerpt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from countersign.llm.messages import Message, ModelRequest, ModelResponse, ToolCall, strict_json_loads
from countersign.llm.provider import AnswerTooLarge, ProviderError, ProviderUnavailable

_BODY_EXCERPT_CHARS = 200
MAX_ANSWER_BYTES = 1024 * 1024
"""One chat completion's body. The loop's whole budget is 4,000 tokens (about 16 KB of text; even escaped as
\\uXXXX, under 100 KB), so a real answer is a small fraction of this; past it the answer is refused unread."""


NOT_RETRIED_5XX = frozenset({501, 505})  # Not Implemented, HTTP Version Not Supported: the same answer every time
NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)  # the request never left this process
_DELAY_SECONDS = re.compile(r"\d+(?:\.\d+)?")

# The OpenTelemetry GenAI semantic conventions' names. The installed opentelemetry-semantic-conventions (0.66b1) marks
# its gen_ai.* constants as moved to the GenAI conventions' own repository, and `gen_ai.system` as replaced by
# `gen_ai.provider.name`; the names below are the current ones. `error.type`, `server.*` are stable conventions.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
CHAT = "chat"


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """The wait a `Retry-After` header asks for, in seconds from `now`: delay-seconds or an HTTP-date (RFC 9110).

    A date already past is 0; a value that is neither form is None (the caller falls back to its own backoff).
    """
    if value is None:
        return None
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110's IMF-fixdate is GMT; an obsolete form without a zone is read as GMT too
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def _message_json(message: Message) -> dict[str, Any]:
    body: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_call_id is not None:
        body["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        body["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments), sort_keys=True)},
            }
            for call in message.tool_calls
        ]
    return body


def chat_completions_body(request: ModelRequest) -> dict[str, Any]:
    """The JSON body of POST /chat/completions for `request`."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [_message_json(message) for message in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)},
            }
            for tool in request.tools
        ]
    return body


def _tool_call(value: Any) -> ToolCall:
    function = value["function"]
    arguments = function.get("arguments") or "{}"
    parsed = strict_json_loads(arguments) if isinstance(arguments, str) else arguments
    if not isinstance(parsed, dict):
        raise TypeError(f"arguments of tool call {value.get('id')!r} are not a JSON object")
    return ToolCall(id=str(value["id"]), name=str(function["name"]), arguments=parsed)


def _token_count(usage: Any, field: str) -> int:
    count = usage[field]
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"usage.{field} is {count!r}, not a non-negative integer")
    return count


def parse_chat_completion(document: Any) -> ModelResponse:
    """Read choices[0].message and usage; anything else missing or mistyped raises (KeyError, TypeError, ValueError)."""
    choice = document["choices"][0]
    message = choice["message"]
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError("choices[0].message.content is neither text nor null")
    calls = tuple(_tool_call(call) for call in message.get("tool_calls") or ())
    usage = document["usage"]
    return ModelResponse(
        content=content,
        tool_calls=calls,
        tokens_in=_token_count(usage, "prompt_tokens"),
        tokens_out=_token_count(usage, "completion_tokens"),
        finish_reason=str(choice.get("finish_reason") or ""),
    )


class OpenAICompatibleProvider:
    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        http: httpx.AsyncClient,
        timeout_s: float = 60.0,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        gen_ai_provider: str = "openai",
        tracer_provider: TracerProvider | None = None,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if max_answer_bytes < 1:
            raise ValueError(f"max_answer_bytes must be positive: {max_answer_bytes}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.http = http
        self.timeout_s = timeout_s
        self.max_answer_bytes = max_answer_bytes
        self.gen_ai_provider = gen_ai_provider  # gen_ai.provider.name: "openai", or the server's when it is known
        self.tracer = trace.get_tracer(__name__, tracer_provider=tracer_provider)
        self.wall_clock = wall_clock  # reads a Retry-After given as an HTTP-date
        url = httpx.URL(self.url)
        self._server: dict[str, AttributeValue] = {
            SERVER_ADDRESS: url.host,
            SERVER_PORT: url.port or (443 if url.scheme == "https" else 80),
        }

    async def complete(self, request: ModelRequest) -> ModelResponse:
        with self._span(request) as span:
            response, document = await self._post(request)
            span.set_attribute(GEN_AI_USAGE_INPUT_TOKENS, response.tokens_in)
            span.set_attribute(GEN_AI_USAGE_OUTPUT_TOKENS, response.tokens_out)
            if response.finish_reason:
                span.set_attribute(GEN_AI_RESPONSE_FINISH_REASONS, (response.finish_reason,))
            if isinstance(document.get("model"), str):
                span.set_attribute(GEN_AI_RESPONSE_MODEL, document["model"])
            if isinstance(document.get("id"), str):
                span.set_attribute(GEN_AI_RESPONSE_ID, document["id"])
            return response

    @contextmanager
    def _span(self, request: ModelRequest) -> Iterator[Span]:
        """One CLIENT span for one HTTP attempt; a failure sets `error.type` and the ERROR status, no message."""
        attributes: dict[str, AttributeValue] = {
            GEN_AI_OPERATION_NAME: CHAT,
            GEN_AI_PROVIDER_NAME: self.gen_ai_provider,
            GEN_AI_REQUEST_MODEL: request.model,
            GEN_AI_REQUEST_MAX_TOKENS: request.max_tokens,
            GEN_AI_REQUEST_TEMPERATURE: float(request.temperature),
            **self._server,
        }
        with self.tracer.start_as_current_span(
            f"{CHAT} {request.model}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,  # an exception's message can hold a body excerpt
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as error:
                span.set_attribute(ERROR_TYPE, _error_type(error))
                span.set_status(Status(StatusCode.ERROR))
                raise

    async def _post(self, request: ModelRequest) -> tuple[ModelResponse, dict[str, Any]]:
        headers = {"Accept-Encoding": "identity"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            async with self.http.stream(
                "POST", self.url, json=chat_completions_body(request), headers=headers, timeout=self.timeout_s
            ) as answer:
                status = answer.status_code
                retry_after = answer.headers.get("retry-after")
                content = await self._read_bounded(answer)
        except httpx.HTTPError as error:
            message = f"transport error calling {self.url}: {type(error).__name__}: {error}"
            if isinstance(error, NEVER_SENT):
                raise ProviderUnavailable(message, error_type=_error_type(error)) from error
            raise ProviderError(message, error_type=_error_type(error)) from error
        if status >= 400:
            excerpt = content[:_BODY_EXCERPT_CHARS].decode("utf-8", errors="replace")
            message = f"HTTP {status} from {self.url}: {excerpt}"
            if status == 429 or (status >= 500 and status not in NOT_RETRIED_5XX):
                wait_s = retry_after_seconds(retry_after, self.wall_clock())
                raise ProviderUnavailable(message, error_type=str(status), retry_after_s=wait_s)
            raise ProviderError(message, error_type=str(status))
        return self._parse(content)

    async def _read_bounded(self, answer: httpx.Response) -> bytes:
        """The body, read chunk by chunk and refused the moment it would pass `max_answer_bytes`."""
        encoding = answer.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise ProviderError(
                f"the answer from {self.url} is {encoding}-encoded; only identity is accepted",
                error_type="unsupported_encoding",
            )
        declared = answer.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_answer_bytes:
            raise AnswerTooLarge(self.url, self.max_answer_bytes, int(declared))
        chunks: list[bytes] = []
        received = 0
        async for chunk in answer.aiter_raw():
            received += len(chunk)
            if received > self.max_answer_bytes:
                raise AnswerTooLarge(self.url, self.max_answer_bytes)
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse(self, content: bytes) -> tuple[ModelResponse, dict[str, Any]]:
        try:
            document = strict_json_loads(content)
        except ValueError as error:
            raise ProviderError(
                f"malformed answer from {self.url}: not JSON ({error})", error_type="malformed_answer"
            ) from error
        try:
            return parse_chat_completion(document), document
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            raise ProviderError(
                f"malformed answer from {self.url}: {type(error).__name__}: {error}", error_type="malformed_answer"
            ) from error


def _error_type(error: BaseException) -> str:
    """`error.type`: ours when we named it, else the exception's qualified class name (the conventions' fallback)."""
    if isinstance(error, ProviderError):
        return error.error_type
    kind = type(error)
    module = "httpx" if kind.__module__.startswith("httpx") else kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
