"""The one interface every model call passes through, and the ways a call fails."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from models.messages import ModelRequest, ModelResponse


class Provider(Protocol):
    name: str  # "replay" | "openai" | "record"

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


class NoRecordedResponse(LookupError):
    """Replay found no cassette for the request: never a silent default."""

    def __init__(self, key: str, cassette_dir: Path) -> None:
        self.key = key
        self.cassette_dir = cassette_dir
        super().__init__(f"no recorded response for request {key} in {cassette_dir}")


class ProviderError(Exception):
    """The provider could not answer: transport, HTTP status, or an answer we cannot read. The message says which."""


class AnswerTooLarge(ProviderError):
    """The answer ran past `max_bytes` while it was read; the rest was never read. The loop makes it a budget stop."""

    def __init__(self, url: str, max_bytes: int, declared_bytes: int | None = None) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self.declared_bytes = declared_bytes  # the answer's Content-Length, when it declared one
        declared = f" (it declared {declared_bytes})" if declared_bytes is not None else ""
        super().__init__(f"the answer from {url} exceeds {max_bytes} bytes{declared}")
