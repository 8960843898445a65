"""The one interface every model call passes through, and the two ways a call fails."""

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
