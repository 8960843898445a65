"""Request heads and silent connections against a real `countersign serve` (and `specialists serve`) on real sockets.

Attacks, as a stranger would run them: 1 GiB of request headers on one connection, and on eight at once; a request
with more header fields than allowed; 500 connections that send nothing and 20 that dribble a request head one byte
at a time. Each head is refused with 431 (or the connection closed) long before the client runs out of bytes, the
silent connections are closed by the server, a person's signed decision still records (not 503) while the sockets
are held, and the server's RSS grows < 50 MB. Latency under these attacks is in bench/doors.py, not here.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from countersign.bootstrap.limits import MAX_HEADER_BYTES, MAX_HEADER_COUNT
from countersign.bootstrap.runtime import Runtime, engine_context
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.http_edge.limits import MIB
from countersign.http_edge.protocol import head_too_large_body
from tests.bot.conftest import free_port
from tests.http_edge.test_body_limits import RSS_BUDGET_BYTES, RssSampler, rss_bytes
from tests.support import count, decision_body, signed_headers, start_default_close

GIB = 1024 * MIB
CHUNK_BYTES = 64 * 1024
EARLY_BYTES = 16 * MIB
"""The server must have closed a connection sending an endless head before the client wrote this much: the limit
(32 KiB) plus what the two kernels' socket buffers can absorb after the server stopped reading."""
SPECIALIST_TOKEN = "specialist-token-for-tests"


def _serve(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "countersign.cli.main", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


@pytest.fixture
def serve(database: Any, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`countersign serve` on the test database, its head timeout short so the test sees silent sockets closed."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "TEAMS_"))},
        "DATABASE_URL": database.url,
        "COUNTERSIGN_STATE_DIR": str(tmp_path / "state"),
        "COUNTERSIGN_CALLBACK_SECRET": "test-callback-secret",
    }
    process = _serve(["serve", "--port", str(port), "--header-read-timeout-s", "1"], env)
    try:
        yield process, port
    finally:
        process.terminate()
        process.wait(timeout=30)


async def _wait_healthy(port: int, process: subprocess.Popen[bytes]) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        for _ in range(600):
            assert process.poll() is None, (process.stdout.read() if process.stdout else b"").decode()
            try:
                if (await http.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("server did not become healthy")


async def _open_gate(conn: Any, runtime: Runtime, books: Path) -> str:
    close_id = await start_default_close(conn, runtime, books)
    async with engine_context(runtime) as ctx:
        await advance(conn, close_id, ctx)
    status = await close_status(conn, close_id)
    return str(next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals" and g["status"] == "open"))


async def _decide(port: int, gate_id: str) -> httpx.Response:
    body = decision_body("alice.chen", gate_id=gate_id)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        return await http.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))


def _endless_head(port: int, total_bytes: int = GIB) -> tuple[int, bytes]:
    """Send a request whose one header value runs to `total_bytes`, stopping as soon as the server stops reading.

    Returns the bytes written and whatever the server answered. Small socket buffers keep what the kernels absorb
    after the server closed small, so the count says how early it closed."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CHUNK_BYTES)
        sock.settimeout(30)
        written = 0
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: countersign.test\r\nx-padding: ")
        chunk = b"a" * CHUNK_BYTES
        try:
            while written < total_bytes:
                sock.sendall(chunk)
                written += len(chunk)
                if written > EARLY_BYTES:  # the server is still reading: no point offering the rest of the GiB
                    break
            sock.sendall(b"\r\n\r\n")
        except OSError:  # reset or broken pipe: the server closed the connection
            pass
        try:
            answer = sock.recv(4096)
        except OSError:
            answer = b""
    return written, answer


def _status(answer: bytes) -> int | None:
    return int(answer.split()[1]) if answer.startswith(b"HTTP/1.1 ") else None


def _raw_request(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(30)
        sock.sendall(head)
        chunks = []
        while data := sock.recv(65536):  # every head here says `connection: close`, and a refusal closes too
            chunks.append(data)
        return b"".join(chunks)


def _head(extra_headers: int = 0, padding_bytes: int = 0) -> bytes:
    lines = [b"GET /healthz HTTP/1.1", b"host: countersign.test", b"connection: close"]
    lines += [b"x-field-%d: 1" % i for i in range(extra_headers)]
    if padding_bytes:
        lines.append(b"x-padding: " + b"a" * padding_bytes)
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def test_a_gib_of_headers_is_refused_early_and_a_decision_still_records(
    serve: tuple[subprocess.Popen[bytes], int], conn: Any, runtime: Runtime, default_books: Path
) -> None:
    process, port = serve
    gate_id = await _open_gate(conn, runtime, default_books)
    await _wait_healthy(port, process)
    # Positive controls first: a head just under the limit, and exactly the allowed number of fields, are served.
    fields_allowed = MAX_HEADER_COUNT - 3  # host and connection count, and the padding line
    assert _status(_raw_request(port, _head(fields_allowed, MAX_HEADER_BYTES - 4096))) == 200
    for _ in range(3):  # warm the door so first-use allocations are not counted as growth
        await asyncio.to_thread(_raw_request, port, _head())
    before = rss_bytes(process.pid)
    with RssSampler(process.pid) as sampler:
        too_many = _raw_request(port, _head(MAX_HEADER_COUNT))
        one = await asyncio.to_thread(_endless_head, port)
        eight = await asyncio.gather(*(asyncio.to_thread(_endless_head, port) for _ in range(8)))
        decided = await _decide(port, gate_id)
    after = rss_bytes(process.pid)
    for written, answer in [one, *eight]:
        assert written <= EARLY_BYTES, f"the server was still reading a head after {written} bytes"
        assert _status(answer) in (431, None), answer  # 431, or the connection closed before it could be read
    assert _status(too_many) == 431, too_many
    assert too_many.endswith(json.dumps(head_too_large_body("header fields", MAX_HEADER_COUNT)).encode())
    assert decided.status_code == 200, decided.text
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE principal_id = 'alice.chen'") == 1
    growth = max(after, sampler.peak_bytes) - before
    assert growth < RSS_BUDGET_BYTES, f"rss before {before} after {after} peak {sampler.peak_bytes}"


async def _closed_by_server(sock: socket.socket, timeout_s: float) -> bool:
    """True once the server closed `sock` (EOF or reset); False if it was still open after `timeout_s`."""
    sock.setblocking(False)
    try:
        return await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 1), timeout_s) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


async def _dribble(sock: socket.socket, stop: asyncio.Event) -> bool:
    """Send a request head one byte every 50 ms, forever; True when the server closed the connection."""
    head = _head()[:-4] + b"\r\nx-slow: " + b"a" * 100_000
    loop = asyncio.get_running_loop()
    for byte in head:
        if stop.is_set():
            return False
        try:
            await loop.sock_sendall(sock, bytes([byte]))
        except (ConnectionResetError, BrokenPipeError):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_silent_and_dribbling_connections_are_closed_and_hold_no_slot(
    serve: tuple[subprocess.Popen[bytes], int], conn: Any, runtime: Runtime, default_books: Path
) -> None:
    process, port = serve
    gate_id = await _open_gate(conn, runtime, default_books)
    await _wait_healthy(port, process)
    for _ in range(3):
        await asyncio.to_thread(_raw_request, port, _head())
    before = rss_bytes(process.pid)
    with RssSampler(process.pid) as sampler:
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(500)]
        dribblers = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
        for sock in dribblers:
            sock.setblocking(False)
        stop = asyncio.Event()
        dribbling = [asyncio.create_task(_dribble(sock, stop)) for sock in dribblers]
        try:
            # While all 520 are held (more than the 200 requests allowed in flight), the doors answer.
            health = await asyncio.to_thread(_raw_request, port, _head())
            decided = await _decide(port, gate_id)
            # Then the server closes every one of them: the silent ones and the ones still sending bytes.
            closed = await asyncio.gather(*(_closed_by_server(sock, 20) for sock in silent))
            done, pending = await asyncio.wait(dribbling, timeout=30)
            dribbler_closed = [task.result() for task in done] + [False] * len(pending)
        finally:
            stop.set()
            for task in dribbling:
                task.cancel()
            for sock in [*silent, *dribblers]:
                sock.close()
    after = rss_bytes(process.pid)
    assert _status(health) == 200, health
    assert decided.status_code == 200, decided.text
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE principal_id = 'alice.chen'") == 1
    assert sum(closed) == len(silent), f"{len(silent) - sum(closed)} silent connections were left open"
    assert all(dribbler_closed), "a connection dribbling its head was never closed"
    growth = max(after, sampler.peak_bytes) - before
    assert growth < RSS_BUDGET_BYTES, f"rss before {before} after {after} peak {sampler.peak_bytes}"


async def test_the_specialists_door_refuses_an_endless_head_too(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "COUNTERSIGN_SPECIALIST_TOKEN": SPECIALIST_TOKEN, "COUNTERSIGN_STATE_DIR": str(tmp_path)}
    process = _serve(["specialists", "serve", "--port", str(port), "--header-read-timeout-s", "1"], env)
    try:
        await _wait_healthy(port, process)
        before = rss_bytes(process.pid)
        written, answer = await asyncio.to_thread(_endless_head, port)
        silent = socket.create_connection(("127.0.0.1", port))
        closed = await _closed_by_server(silent, 20)
        silent.close()
        growth = rss_bytes(process.pid) - before
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert written <= EARLY_BYTES and _status(answer) in (431, None), (written, answer)
    assert closed, "a silent connection to the specialists was left open"
    assert growth < RSS_BUDGET_BYTES
