"""A provider that speaks OpenAI's chat-completions JSON over httpx: vLLM, Ollama, llama.cpp's server, Azure OpenAI.

The answer must report usage (prompt and completion tokens): the loop's token ceiling cannot be kept without it,
so an answer without usage is refused like any other malformed answer.

The answer is read incrementally and refused (`AnswerTooLarge`) as soon as it passes `max_answer_bytes`, or at once
when its Content-Length says it will; compression is not accepted, so the bytes counted are the bytes held.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from models.messages import Message, ModelRequest, ModelResponse, ToolCall, strict_json_loads
from models.provider import AnswerTooLarge, ProviderError

_BODY_EXCERPT_CHARS = 200
MAX_ANSWER_BYTES = 1024 * 1024
"""One chat completion's body. The loop's whole budget is 4,000 tokens (about 16 KB of text; even escaped as
\\uXXXX, under 100 KB), so a real answer is a small fraction of this; past it the answer is refused unread."""


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
    ) -> None:
        if max_answer_bytes < 1:
            raise ValueError(f"max_answer_bytes must be positive: {max_answer_bytes}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.http = http
        self.timeout_s = timeout_s
        self.max_answer_bytes = max_answer_bytes

    async def complete(self, request: ModelRequest) -> ModelResponse:
        headers = {"Accept-Encoding": "identity"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            async with self.http.stream(
                "POST", self.url, json=chat_completions_body(request), headers=headers, timeout=self.timeout_s
            ) as answer:
                status = answer.status_code
                content = await self._read_bounded(answer)
        except httpx.HTTPError as error:
            raise ProviderError(f"transport error calling {self.url}: {type(error).__name__}: {error}") from error
        if status >= 400:
            excerpt = content[:_BODY_EXCERPT_CHARS].decode("utf-8", errors="replace")
            raise ProviderError(f"HTTP {status} from {self.url}: {excerpt}")
        return self._parse(content)

    async def _read_bounded(self, answer: httpx.Response) -> bytes:
        """The body, read chunk by chunk and refused the moment it would pass `max_answer_bytes`."""
        encoding = answer.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise ProviderError(f"the answer from {self.url} is {encoding}-encoded; only identity is accepted")
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

    def _parse(self, content: bytes) -> ModelResponse:
        try:
            document = strict_json_loads(content)
        except ValueError as error:
            raise ProviderError(f"malformed answer from {self.url}: not JSON ({error})") from error
        try:
            return parse_chat_completion(document)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            raise ProviderError(f"malformed answer from {self.url}: {type(error).__name__}: {error}") from error
