"""What a model is asked and what it answers: plain values, with one canonical byte form for a request.

The canonical form is what a cassette is keyed by, so it holds everything that may change an answer: the model
id, the prompt-template hash, every message (with the tool calls an assistant message made), the tools offered
and the sampling parameters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ROLES = frozenset({"system", "user", "assistant", "tool"})


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def strict_json_loads(text: str | bytes) -> Any:
    """`json.loads` that refuses NaN and Infinity, which canonical JSON cannot hold."""
    return json.loads(text, parse_constant=_refuse_constant)


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8 without escaping: equal values give equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: Mapping[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    tool_call_id: str | None = None
    # An assistant message that asked for tools carries its calls: an OpenAI-compatible server refuses a tool
    # message whose call it has not seen, and the calls are part of what the next answer depends on.
    tool_calls: tuple[ToolCall, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"message role {self.role!r} is not one of {sorted(ROLES)}")

    def as_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "tool_call_id": self.tool_call_id,
            "tool_calls": [call.as_json() for call in self.tool_calls],
        }


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]  # a JSON schema

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}


@dataclass(frozen=True)
class ModelRequest:
    model: str
    template_hash: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 512
    temperature: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "template_hash": self.template_hash,
            "messages": [message.as_json() for message in self.messages],
            "tools": [tool.as_json() for tool in self.tools],
            "max_tokens": self.max_tokens,
            "temperature": float(self.temperature),
        }

    def canonical(self) -> bytes:
        return canonical_json(self.as_json())

    def key(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()


@dataclass(frozen=True)
class ModelResponse:
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    tokens_in: int
    tokens_out: int
    finish_reason: str

    def as_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "tool_calls": [call.as_json() for call in self.tool_calls],
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "finish_reason": self.finish_reason,
        }
