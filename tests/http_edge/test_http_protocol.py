"""The bounded protocol in-process, on a real loopback socket, with small bounds: its edges, one attack at a time.

A head of exactly `max_header_bytes` is served and one byte more is refused with 431; a body that stalls after its
head is cut off and the app sees the client disconnect; a kept-alive connection that dribbles its next head is closed
(bytes do not re-arm the deadline); idle sockets take no slot, while requests in flight beyond the bound get 503;
pipelined requests are still answered in order.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from countersign.http_edge.protocol import ConnectionBounds, bounded_protocol

BOUNDS = ConnectionBounds(
    max_header_bytes=1024,
    max_header_count=10,
    header_read_timeout_s=0.5,
    body_read_timeout_s=0.5,
    max_requests_in_flight=2,
)


class App:
    """Answers 200 with the body length; `/hold` waits until `release` is set; records what `receive` returned."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.disconnects = 0
        self.holding = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        received = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnects += 1
                return
            received += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        if scope["path"] == "/hold":
            self.holding += 1
            await self.release.wait()
        body = str(received).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def server() -> AsyncIterator[tuple[App, int]]:
    app = App()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app, http=bounded_protocol(BOUNDS), limit_concurrency=None, lifespan="off", log_level="warning"
    )
    instance = uvicorn.Server(config)
    serving = asyncio.create_task(instance.serve(sockets=[sock]))
    for _ in range(200):
        if instance.started:
            break
        await asyncio.sleep(0.02)
    try:
        yield app, sock.getsockname()[1]
    finally:
        app.release.set()
        instance.should_exit = True
        await serving
        sock.close()


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def _closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sent until it closed the connection (a reset counts as closed)."""
    try:
        return await asyncio.wait_for(reader.read(), timeout=10)
    except ConnectionResetError:
        return b""


def _head(path: str = "/", *, size: int | None = None, extra: str = "") -> bytes:
    base = f"GET {path} HTTP/1.1\r\nhost: t\r\n{extra}"
    if size is None:
        return (base + "\r\n").encode()
    padding = size - len(base) - len("x-pad: \r\n\r\n")
    return (base + "x-pad: " + "a" * padding + "\r\n\r\n").encode()


async def test_a_head_of_exactly_the_limit_is_served_and_one_byte_more_is_refused(server: tuple[App, int]) -> None:
    _, port = server
    for size, status in ((BOUNDS.max_header_bytes, b"200"), (BOUNDS.max_header_bytes + 1, b"431")):
        reader, writer = await _connect(port)
        head = _head(size=size, extra="connection: close\r\n")
        assert len(head) == size
        writer.write(head)
        answer = await _closed(reader)
        writer.close()
        assert answer.split(b" ")[1] == status, (size, answer)


async def test_one_field_over_the_count_is_refused(server: tuple[App, int]) -> None:
    _, port = server
    fields = "".join(f"x-{i}: 1\r\n" for i in range(BOUNDS.max_header_count - 2))
    reader, writer = await _connect(port)
    writer.write(_head(extra=fields + "connection: close\r\n"))  # host + these + connection = the bound exactly
    assert (await _closed(reader)).startswith(b"HTTP/1.1 200 ")
    reader, writer = await _connect(port)
    writer.write(_head(extra=fields + "x-one-more: 1\r\nconnection: close\r\n"))
    assert (await _closed(reader)).startswith(b"HTTP/1.1 431 ")


async def test_a_body_that_stalls_after_its_head_is_cut_off(server: tuple[App, int]) -> None:
    app, port = server
    reader, writer = await _connect(port)
    writer.write(b"POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\n\r\n" + b"x" * 10)
    assert await _closed(reader) == b""
    for _ in range(100):
        if app.disconnects:
            break
        await asyncio.sleep(0.02)
    assert app.disconnects == 1


async def test_a_kept_alive_connection_dribbling_its_next_head_is_closed(server: tuple[App, int]) -> None:
    _, port = server
    reader, writer = await _connect(port)
    writer.write(_head())
    first = await reader.readuntil(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200 ")
    await reader.readexactly(1)  # the body: "0"
    closed = False
    for byte in b"GET / HTTP/1.1\r\nx-slow: " + b"a" * 500:  # one byte every 50 ms: 25 s if never cut off
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except ConnectionError:
            closed = True
            break
        if reader.at_eof():
            closed = True
            break
        await asyncio.sleep(0.05)
    assert closed, "a dribbled head kept the connection open"


async def test_idle_sockets_take_no_slot_but_requests_in_flight_do(server: tuple[App, int]) -> None:
    app, port = server
    idle = [await _connect(port) for _ in range(20)]  # ten times the bound, none sending a byte
    reader, writer = await _connect(port)
    writer.write(_head(extra="connection: close\r\n"))
    assert (await _closed(reader)).startswith(b"HTTP/1.1 200 ")
    held = [await _connect(port) for _ in range(BOUNDS.max_requests_in_flight)]
    for _, held_writer in held:
        held_writer.write(_head("/hold"))
    for _ in range(250):  # until both are inside the app
        if app.holding == BOUNDS.max_requests_in_flight:
            break
        await asyncio.sleep(0.02)
    reader, writer = await _connect(port)
    writer.write(_head(extra="connection: close\r\n"))
    assert (await _closed(reader)).startswith(b"HTTP/1.1 503 ")
    app.release.set()
    for held_reader, _ in held:
        assert (await held_reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
    for _, idle_writer in idle:
        idle_writer.close()


async def test_pipelined_requests_are_answered_in_order(server: tuple[App, int]) -> None:
    _, port = server
    reader, writer = await _connect(port)
    writer.write(
        b"POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 3\r\n\r\nabc"
        b"POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\nconnection: close\r\n\r\nabcde"
    )
    answer = await _closed(reader)
    assert answer.count(b"HTTP/1.1 200 ") == 2
    assert answer.endswith(b"5") and b"\r\n\r\n3HTTP/1.1" in answer
