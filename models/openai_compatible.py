"""A provider that speaks OpenAI's chat-completions JSON over httpx: vLLM, Ollama, llama.cpp's server, Azure OpenAI.

The answer must report usage (prompt and completion tokens): the loop's token ceiling cannot be kept without it,
so an answer without usage is refused like any other malformed answer.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from models.messages import Message, ModelRequest, ModelResponse, ToolCall, strict_json_loads
from models.provider import ProviderError

_BODY_EXCERPT_CHARS = 200


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

    def __init__(self, base_url: str, *, api_key: str | None, http: httpx.AsyncClient, timeout_s: float = 60.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.http = http
        self.timeout_s = timeout_s

    async def complete(self, request: ModelRequest) -> ModelResponse:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            answer = await self.http.post(
                self.url, json=chat_completions_body(request), headers=headers, timeout=self.timeout_s
            )
        except httpx.HTTPError as error:
            raise ProviderError(f"transport error calling {self.url}: {type(error).__name__}: {error}") from error
        if answer.status_code >= 400:
            excerpt = answer.text[:_BODY_EXCERPT_CHARS]
            raise ProviderError(f"HTTP {answer.status_code} from {self.url}: {excerpt}")
        try:
            document = strict_json_loads(answer.content)
        except ValueError as error:
            raise ProviderError(f"malformed answer from {self.url}: not JSON ({error})") from error
        try:
            return parse_chat_completion(document)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            raise ProviderError(f"malformed answer from {self.url}: {type(error).__name__}: {error}") from error
