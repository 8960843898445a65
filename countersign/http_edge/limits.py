"""Bounded request bodies for any ASGI app: a body over its door's limit is refused while it is being read.

Pure ASGI, so it sits in front of FastAPI (`countersign serve`) and of the specialists' Starlette app alike. It lives
in `engine` because the specialists' app does and `engine` may import nothing above it; the composition root
(`countersign.bootstrap.app`) imports it from here for the chat and callback doors.

A declared `Content-Length` over the limit is refused before the first byte of the body is read. Otherwise every
`http.request` message is counted as it arrives (chunked bodies included); the message that crosses the limit is
never handed to the app: the 413 goes out at once with `Connection: close`, so the server stops reading the rest
and closes the connection, and the app sees `BodyTooLarge` instead of more bytes. The app never receives more than
`max_bytes` bytes of body, and anything it tries to send after the 413 is dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

KIB = 1024
MIB = 1024 * KIB

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("countersign.http_limits")


class BodyTooLarge(Exception):
    """Raised to the app from `receive` once the body crossed its limit; the client already has its 413."""

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        super().__init__(f"request body for {path} exceeds {max_bytes} bytes")


@dataclass(frozen=True)
class BodyLimit:
    """Bodies sent to paths starting with `path_prefix` may hold at most `max_bytes` bytes."""

    path_prefix: str
    max_bytes: int

    def __post_init__(self) -> None:
        if not self.path_prefix.startswith("/"):
            raise ValueError(f"path_prefix must start with '/': {self.path_prefix!r}")
        if self.max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0: {self.max_bytes}")


def _json_response(status: int, body: dict[str, str]) -> tuple[Message, Message]:
    content = json.dumps(body).encode()
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(content)).encode()),
            (b"connection", b"close"),
        ],
    }
    return start, {"type": "http.response.body", "body": content, "more_body": False}


def too_large_body(max_bytes: int) -> dict[str, str]:
    return {"error": "body_too_large", "detail": f"request body exceeds {max_bytes} bytes"}


def _declared_length(scope: Scope) -> int | str | None:
    """The Content-Length header as an int, None when absent, or the raw text when it is not one number."""
    values: list[bytes] = [value for name, value in scope.get("headers", ()) if name.lower() == b"content-length"]
    if not values:
        return None
    text = values[0].decode("latin-1").strip()
    if len(values) > 1 or not text.isdigit():
        return text
    return int(text)


class BodyLimitMiddleware:
    """Refuse request bodies over the limit of the longest matching path prefix (else `default_max_bytes`)."""

    def __init__(self, app: ASGIApp, *, limits: Sequence[BodyLimit], default_max_bytes: int) -> None:
        if default_max_bytes < 0:
            raise ValueError(f"default_max_bytes must be >= 0: {default_max_bytes}")
        self.app = app
        self.limits = tuple(sorted(limits, key=lambda limit: len(limit.path_prefix), reverse=True))
        self.default_max_bytes = default_max_bytes

    def max_bytes_for(self, path: str) -> int:
        for limit in self.limits:
            if path.startswith(limit.path_prefix):
                return limit.max_bytes
        return self.default_max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        max_bytes = self.max_bytes_for(path)
        declared = _declared_length(scope)
        if isinstance(declared, str):
            await _send_all(send, 400, {"error": "invalid_content_length", "detail": f"not a length: {declared!r}"})
            return
        if declared is not None and declared > max_bytes:
            await _send_all(send, 413, too_large_body(max_bytes))
            return
        guard = _Guard(path, max_bytes, receive, send)
        try:
            await self.app(scope, guard.receive, guard.send)
        except Exception:
            if not guard.refused:
                raise
            log.debug("app stopped after its body was refused at %s bytes (%s)", max_bytes, path, exc_info=True)


async def _send_all(send: Send, status: int, body: dict[str, str]) -> None:
    start, content = _json_response(status, body)
    await send(start)
    await send(content)


class _Guard:
    """One request's byte count, and whether the 413 went out (after which the app's sends are dropped)."""

    def __init__(self, path: str, max_bytes: int, receive: Receive, send: Send) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.received_bytes = 0
        self.refused = False
        self._response_started = False
        self._receive = receive
        self._send = send

    async def receive(self) -> Message:
        if self.refused:
            raise BodyTooLarge(self.path, self.max_bytes)
        message = await self._receive()
        if message["type"] != "http.request":
            return message
        self.received_bytes += len(message.get("body", b""))
        if self.received_bytes <= self.max_bytes:
            return message
        self.refused = True
        if not self._response_started:
            await _send_all(self._send, 413, too_large_body(self.max_bytes))
        raise BodyTooLarge(self.path, self.max_bytes)

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self._response_started = True
        await self._send(message)
