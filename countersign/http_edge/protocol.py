"""uvicorn's httptools protocol with the bounds it lacks: request heads, silent connections, requests in flight.

uvicorn (0.54) reads a request head with no limit (httptools accumulates a header value across reads for as long as
it keeps coming) and arms no timer on a fresh connection: `timeout_keep_alive` starts only after a response, and
any byte cancels it. Its `limit_concurrency` counts open connections, so connections that never send a byte fill it
and every door answers 503. This subclass (ADR 0023):

- counts the bytes of each request line and headers as they arrive, feeding the parser no more than
  `max_header_bytes`; past it, or past `max_header_count` header fields, it answers 431 and closes, so the excess is
  never read, let alone kept;
- closes a connection whose request head is not complete `header_read_timeout_s` after it opened or after its last
  response (a silent connection, or one dribbling its head byte by byte), and one whose body is not complete
  `body_read_timeout_s` after its head;
- answers 503 when `max_requests_in_flight` requests are already running: only requests count, not idle sockets.

A head that starts in the same read as the end of the request before it (pipelining) is counted from the next read
on, so such a head can reach at most twice the limit before it is refused.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState


@dataclass(frozen=True)
class ConnectionBounds:
    max_header_bytes: int
    max_header_count: int
    header_read_timeout_s: float
    body_read_timeout_s: float
    max_requests_in_flight: int

    def __post_init__(self) -> None:
        if min(self.max_header_bytes, self.max_header_count, self.max_requests_in_flight) < 1:
            raise ValueError(f"header and request bounds must be positive: {self}")
        if self.header_read_timeout_s <= 0 or self.body_read_timeout_s <= 0:
            raise ValueError(f"timeouts must be positive: {self}")


class HeadTooLarge(Exception):
    """Raised inside the parser's callback when a request head has more header fields than allowed."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        super().__init__(f"request {what} exceed {limit}")


def _refusal(status: int, phrase: str, body: dict[str, str]) -> bytes:
    content = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(content)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + content


def head_too_large_body(what: str, limit: int) -> dict[str, str]:
    return {"error": "headers_too_large", "detail": f"request {what} exceed {limit}"}


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """One connection, bounded by `bounds`; build a subclass with `bounded_protocol` and pass it as uvicorn's `http`."""

    bounds: ClassVar[ConnectionBounds]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._application = self.app
        self._reading_head = True
        self._head_bytes = 0
        self._head_fields = 0
        self._deadline: asyncio.TimerHandle | None = None

    # --- the connection ---------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.bounds.header_read_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        while data and not self.transport.is_closing():
            if self._reading_head:
                room = self.bounds.max_header_bytes - self._head_bytes
                if room <= 0:
                    self._refuse_head("line and headers (bytes)", self.bounds.max_header_bytes)
                    return
                piece, data = data[:room], data[room:]
                self._head_bytes += len(piece)
            else:
                piece, data = data, b""
            if not self._feed(piece):
                return

    def _feed(self, piece: bytes) -> bool:
        """Parse `piece`; False when the connection is refused or handed over (uvicorn's own handling otherwise)."""
        try:
            self.parser.feed_data(piece)
        except httptools.HttpParserCallbackError as error:
            if isinstance(error.__context__, HeadTooLarge):
                self._refuse_head(error.__context__.what, error.__context__.limit)
                return False
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return False
        except httptools.HttpParserError:
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return False
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        return True

    def _refuse_head(self, what: str, limit: int) -> None:
        self.logger.warning("Refused a request head: %s exceed %s.", what, limit)
        self._disarm()
        self.transport.write(_refusal(431, "Request Header Fields Too Large", head_too_large_body(what, limit)))
        self.transport.close()

    # --- the parser's callbacks -------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_fields = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_fields += 1
        if self._head_fields > self.bounds.max_header_count:
            raise HeadTooLarge("header fields", self.bounds.max_header_count)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._disarm()
        busy = len(self.tasks) >= self.bounds.max_requests_in_flight
        if busy:
            self.logger.warning("Exceeded the requests-in-flight limit (%s).", self.bounds.max_requests_in_flight)
        self.app = service_unavailable if busy else self._application
        super().on_headers_complete()
        self._arm(self.bounds.body_read_timeout_s)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._reading_head = True
        self._head_bytes = 0

    def on_response_complete(self) -> None:
        super().on_response_complete()
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self._reading_head and not self.transport.is_closing():
            self._arm(self.bounds.header_read_timeout_s)  # the next request's head, however slowly it comes

    # --- the deadline -----------------------------------------------------------------------------------------

    def _arm(self, timeout_s: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(timeout_s, self._deadline_passed)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _deadline_passed(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def bounded_protocol(bounds: ConnectionBounds) -> type[BoundedHttpToolsProtocol]:
    """A protocol class for `uvicorn.run(http=...)` holding `bounds` (uvicorn constructs it per connection)."""
    return type("BoundedHttpToolsProtocol", (BoundedHttpToolsProtocol,), {"bounds": bounds})
