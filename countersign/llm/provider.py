"""The one interface every model call passes through, and the ways a call fails."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from countersign.llm.messages import ModelRequest, ModelResponse


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
    """The provider could not answer: transport, HTTP status, or an answer we cannot read. The message says which.

    `error_type` is short and of low cardinality (an HTTP status such as "400", an exception's qualified name such as
    "httpx.ReadTimeout", or "malformed_answer"): what a span's `error.type` carries, never the answer's text.
    """

    def __init__(self, message: str, *, error_type: str = "provider_error") -> None:
        self.error_type = error_type
        super().__init__(message)


class ProviderUnavailable(ProviderError):
    """The model did not answer this time and may if asked again: HTTP 429, a 5xx, or a connection never made.

    `retry_after_s` is the wait the server asked for (its `Retry-After`, in seconds from now), or None when it named
    none. Only this error is retried, by the loop, inside its wall-clock bound.
    """

    def __init__(self, message: str, *, error_type: str, retry_after_s: float | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, error_type=error_type)


class AnswerTooLarge(ProviderError):
    """The answer ran past `max_bytes` while it was read; the rest was never read. The loop makes it a budget stop."""

    def __init__(self, url: str, max_bytes: int, declared_bytes: int | None = None) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self.declared_bytes = declared_bytes  # the answer's Content-Length, when it declared one
        declared = f" (it declared {declared_bytes})" if declared_bytes is not None else ""
        super().__init__(f"the answer from {url} exceeds {max_bytes} bytes{declared}", error_type="answer_too_large")
