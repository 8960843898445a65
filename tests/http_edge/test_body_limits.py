"""Every door refuses an oversized body while reading it, with or without Content-Length, before its handler runs.

Attacks: a signed decision, a signed Slack click, a Bot Framework invoke with a valid token and an authenticated A2A
message, each padded past its door's limit, sent once with a Content-Length and once chunked (no length). The
client's body is a lazy generator, so the bytes it yielded are the bytes the server pulled: at most one chunk past
the limit. Then the same against real `countersign serve` and `countersign specialists serve` processes over
sockets with 1 GiB bodies: 413 (or a connection closed after it), `/healthz` still answers, RSS grows < 50 MB.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.types import Role
from google.protobuf.json_format import MessageToDict

from countersign.bootstrap.app import create_app
from countersign.bootstrap.limits import DOOR_BODY_LIMITS, SLACK_MAX_BODY_BYTES, TEAMS_MAX_BODY_BYTES
from countersign.bootstrap.runtime import Runtime, engine_context
from countersign.callbacks.principals import upsert_principals
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.http_edge.limits import MIB, BodyLimit, BodyLimitMiddleware
from countersign.specialists.server import SPECIALIST_MAX_BODY_BYTES, build_specialists_app
from countersign.web.callbacks import MAX_BODY_BYTES as CALLBACK_MAX_BODY_BYTES
from tests.bot.conftest import (  # noqa: F401  (fixtures)
    PEOPLE,
    SERVICE_URL,
    TEAM,
    TEAMS_APP_ID,
    TENANT,
    button_click,
    chat_runtime,
    fake_teams_auth,
    free_port,
    server_env,
    slack_headers,
    teams_connector,
)
from tests.bot.test_teams import invoke
from tests.fakes.teams_connector import FakeTeamsConnector
from tests.support import count, decision_body, signed_headers, start_default_close

CHUNK_BYTES = 16 * 1024
SPECIALIST_TOKEN = "specialist-token-for-tests"
MODES = ["content-length", "chunked"]


@dataclass
class LazyBody:
    """`prefix` then filler up to `total_bytes`, yielded lazily; `yielded_bytes` is what the reader pulled."""

    prefix: bytes
    total_bytes: int
    filler: bytes = b" "
    yielded_bytes: int = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        block = self.filler * CHUNK_BYTES
        data = self.prefix
        while self.yielded_bytes < self.total_bytes:
            piece = (data + block)[: min(CHUNK_BYTES, self.total_bytes - self.yielded_bytes)]
            data = data[len(piece) :] if len(data) > len(piece) else b""
            self.yielded_bytes += len(piece)
            yield piece


def _headers(mode: str, body: LazyBody, extra: dict[str, str]) -> dict[str, str]:
    headers = dict(extra)
    if mode == "content-length":
        headers["content-length"] = str(body.total_bytes)
    return headers


def _assert_refused(response: httpx.Response, body: LazyBody, max_bytes: int, mode: str) -> None:
    assert response.status_code == 413, response.text
    assert response.json() == {"error": "body_too_large", "detail": f"request body exceeds {max_bytes} bytes"}
    pulled_at_most = 0 if mode == "content-length" else max_bytes + CHUNK_BYTES
    assert body.yielded_bytes <= max(pulled_at_most, CHUNK_BYTES), "the server pulled bytes past the limit"


# --- the FastAPI doors over ASGI --------------------------------------------------------------------------------


@pytest.fixture
def door_runtime(chat_runtime: Runtime) -> Runtime:  # noqa: F811
    settings = chat_runtime.settings.model_copy(update=dict(slack_team_ids=(TEAM,), teams_tenant_ids=(TENANT,)))
    return replace(chat_runtime, settings=settings)


@pytest_asyncio.fixture
async def doors(door_runtime: Runtime, teams_connector: Any) -> AsyncIterator[httpx.AsyncClient]:  # noqa: F811
    app = create_app(door_runtime)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://countersign.test") as client:
            yield client


async def _open_gate(conn: Any, runtime: Runtime, books: Path) -> str:
    close_id = await start_default_close(conn, runtime, books)
    await upsert_principals(conn, PEOPLE)
    async with engine_context(runtime) as ctx:
        await advance(conn, close_id, ctx)
    status = await close_status(conn, close_id)
    return str(next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals" and g["status"] == "open"))


def test_each_door_has_its_limit() -> None:
    middleware = BodyLimitMiddleware(lambda *_: None, limits=DOOR_BODY_LIMITS, default_max_bytes=1)  # type: ignore[arg-type]
    assert middleware.max_bytes_for("/callbacks/gates/x/decisions") == CALLBACK_MAX_BODY_BYTES == 8 * 1024
    assert middleware.max_bytes_for("/slack/events") == SLACK_MAX_BODY_BYTES
    assert middleware.max_bytes_for("/api/messages") == TEAMS_MAX_BODY_BYTES
    assert middleware.max_bytes_for("/closes/x") == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_padded_signed_decision_is_refused_before_the_callback_runs(
    mode: str, conn: Any, doors: httpx.AsyncClient, door_runtime: Runtime, default_books: Path
) -> None:
    gate_id = await _open_gate(conn, door_runtime, default_books)
    signed = decision_body("alice.chen", gate_id=gate_id)
    body = LazyBody(signed, total_bytes=64 * CALLBACK_MAX_BODY_BYTES)
    padded = signed + b" " * (body.total_bytes - len(signed))  # valid JSON, validly signed: only its size is wrong
    response = await doors.post(
        f"/callbacks/gates/{gate_id}/decisions", content=body, headers=_headers(mode, body, signed_headers(padded))
    )
    _assert_refused(response, body, CALLBACK_MAX_BODY_BYTES, mode)
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
    decided = "SELECT count(*) FROM {} WHERE kind = 'gate_decided'"
    assert await count(conn, decided.format("trace_event")) + await count(conn, decided.format("trace_pending")) == 0


@pytest.mark.parametrize("mode", MODES)
async def test_a_padded_signed_slack_click_is_refused_before_bolt_sees_it(
    mode: str, conn: Any, doors: httpx.AsyncClient, door_runtime: Runtime, default_books: Path, fake_slack: Any
) -> None:
    gate_id = await _open_gate(conn, door_runtime, default_books)
    click = button_click(gate_id, "U0ALICE") + b"&pad="
    body = LazyBody(click, total_bytes=4 * SLACK_MAX_BODY_BYTES, filler=b"x")
    padded = click + b"x" * (body.total_bytes - len(click))
    response = await doors.post("/slack/events", content=body, headers=_headers(mode, body, slack_headers(padded)))
    _assert_refused(response, body, SLACK_MAX_BODY_BYTES, mode)
    await asyncio.sleep(0.5)  # a lazy listener would have called users.info by now
    assert fake_slack.calls_to("users.info") == []
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


@pytest.mark.parametrize("mode", MODES)
async def test_a_padded_authenticated_teams_invoke_is_refused_before_the_adapter_runs(
    mode: str,
    conn: Any,
    doors: httpx.AsyncClient,
    door_runtime: Runtime,
    default_books: Path,
    fake_teams_auth: Any,  # noqa: F811
) -> None:
    gate_id = await _open_gate(conn, door_runtime, default_books)
    activity = json.dumps(invoke(gate_id, "aad-alice")).encode()
    body = LazyBody(activity, total_bytes=4 * TEAMS_MAX_BODY_BYTES)
    token = fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=SERVICE_URL)
    auth = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    response = await doors.post("/api/messages", content=body, headers=_headers(mode, body, auth))
    _assert_refused(response, body, TEAMS_MAX_BODY_BYTES, mode)
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0


def _send_message_body(text: str) -> bytes:
    from a2a.helpers import new_data_part, new_message

    message = new_message([new_data_part({"kind": "bank", "note": text})], role=Role.ROLE_USER)
    message.metadata.update({"idempotency_key": "k1"})
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": MessageToDict(message)}}
    return json.dumps(request).encode()


@pytest.mark.parametrize("mode", MODES)
async def test_an_oversized_authenticated_a2a_message_is_refused_before_the_specialist_runs(mode: str) -> None:
    calls: list[dict[str, Any]] = []

    def handler(payload: dict[str, Any]) -> dict[str, Any]:
        calls.append(payload)
        return {}

    limit = 64 * 1024  # smaller than the default (SPECIALIST_MAX_BODY_BYTES) to keep the test quick
    app = build_specialists_app(
        "http://specialists.test",
        {"reconciliation": handler},
        token=SPECIALIST_TOKEN,
        max_body_bytes=limit,
    )
    body = LazyBody(_send_message_body("x"), total_bytes=8 * limit)
    headers = {"authorization": f"Bearer {SPECIALIST_TOKEN}", "a2a-version": "1.0", "content-type": "application/json"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://specialists.test") as http:
        response = await http.post("/reconciliation", content=body, headers=_headers(mode, body, headers))
        _assert_refused(response, body, limit, mode)
        fits = _send_message_body("fits")
        ok = await http.post("/reconciliation", content=fits, headers=headers)
    assert ok.status_code == 200 and "result" in ok.json(), ok.text
    assert calls == [{"kind": "bank", "note": "fits"}]


async def test_a_body_at_the_limit_passes_and_one_byte_more_does_not() -> None:
    seen: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        seen.append(b"".join(chunks))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    limited = BodyLimitMiddleware(app, limits=[BodyLimit("/x", 100)], default_max_bytes=0)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=limited), base_url="http://t") as http:
        assert (await http.post("/x", content=LazyBody(b"", 100))).status_code == 204
        assert (await http.post("/x", content=LazyBody(b"", 101))).status_code == 413
        assert (await http.post("/y", content=b"a")).status_code == 413
        assert (await http.post("/x", content=b"a", headers={"content-length": "1, 1"})).status_code == 400
    assert seen == [b" " * 100]


# --- real processes, real sockets, 1 GiB ------------------------------------------------------------------------

GIB = 1024 * MIB
RSS_BUDGET_BYTES = 50 * 1000 * 1000


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class RssSampler:
    """The highest VmRSS of `pid` seen every 20 ms while active (catches transient buffering, not just the end)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_bytes = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak_bytes = max(self.peak_bytes, rss_bytes(self.pid))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def _stream_gib(http: httpx.AsyncClient, path: str, headers: dict[str, str], mode: str) -> tuple[int | None, int]:
    """POST 1 GiB lazily; the status (None when the server closed the connection first) and the bytes written."""
    body = LazyBody(b"", GIB, filler=b"a")
    try:
        response = await http.post(path, content=body, headers=_headers(mode, body, headers))
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        return None, body.yielded_bytes
    return response.status_code, body.yielded_bytes


async def _raw_probe(base_url: str, path: str, headers: dict[str, str], mode: str, max_bytes: int) -> int:
    """The status a server answers over a raw socket to a head declaring 1 GiB (no body sent), or to a chunked body
    whose first chunk is one byte over the limit (no more sent). Nothing is left unread on the server's side, so
    its close cannot reset the connection before the answer arrives."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        lines = [f"POST {path} HTTP/1.1", f"host: {host}", *(f"{k}: {v}" for k, v in headers.items())]
        if mode == "content-length":
            writer.write(("\r\n".join([*lines, f"content-length: {GIB}"]) + "\r\n\r\n").encode())
        else:
            writer.write(("\r\n".join([*lines, "transfer-encoding: chunked"]) + "\r\n\r\n").encode())
            writer.write(b"%x\r\n" % (max_bytes + 1) + b"a" * (max_bytes + 1) + b"\r\n")
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout=30)
    finally:
        writer.close()
    return int(status_line.split()[1])


async def _wait_healthy(http: httpx.AsyncClient, process: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        assert process.poll() is None, (process.stdout.read() if process.stdout else b"").decode()
        try:
            if (await http.get("/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("server did not become healthy")


@pytest.fixture
def connector() -> Iterator[FakeTeamsConnector]:
    fake = FakeTeamsConnector().start()
    yield fake


def _process(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "countersign.cli.main", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


async def _assert_gib_refused_with_bounded_rss(
    process: subprocess.Popen[bytes], base_url: str, doors: list[tuple[str, dict[str, str], int, int]]
) -> list[str]:
    """Each door gets 1 GiB with a Content-Length and 1 GiB chunked; `expected` is its status (or a closed socket)."""
    report = []
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        await _wait_healthy(http, process)
        for _ in range(3):  # warm each door once so first-use allocations are not counted as growth
            await http.get("/healthz")
        for path, headers, _, _ in doors:
            await http.post(path, content=b"{}", headers=headers)
        before = rss_bytes(process.pid)
        with RssSampler(process.pid) as sampler:
            for path, headers, expected, max_bytes in doors:
                for mode in MODES:
                    assert await _raw_probe(base_url, path, headers, mode, max_bytes) == expected, f"{path} {mode}"
                    started = time.monotonic()
                    status, written = await _stream_gib(http, path, headers, mode)
                    assert status in (expected, None), f"{path} {mode}: {status}"
                    assert (await http.get("/healthz")).status_code == 200
                    report.append(f"{path} {mode}: {status} after {written} bytes, {time.monotonic() - started:.2f}s")
        after = rss_bytes(process.pid)
    growth = max(after, sampler.peak_bytes) - before
    report.append(f"rss before {before} after {after} peak {sampler.peak_bytes} growth {growth}")
    assert growth < RSS_BUDGET_BYTES, "\n".join(report)
    return report


async def test_a_gib_body_to_each_serve_door_is_refused_and_rss_stays_bounded(
    database: Any,
    tmp_path: Path,
    fake_slack: Any,
    fake_teams_auth: Any,  # noqa: F811
    connector: FakeTeamsConnector,
) -> None:
    port = free_port()
    env = server_env(database.url, tmp_path / "state", fake_slack, fake_teams_auth, connector)
    env |= {"COUNTERSIGN_SLACK_TEAM_IDS": TEAM, "COUNTERSIGN_TEAMS_TENANT_IDS": TENANT}
    server = _process(["serve", "--port", str(port)], env)
    doors = [
        (
            "/callbacks/gates/00000000-0000-0000-0000-000000000000/decisions",
            {"content-type": "application/json"},
            413,
            8 * 1024,
        ),
        ("/slack/events", {"content-type": "application/x-www-form-urlencoded"}, 413, SLACK_MAX_BODY_BYTES),
        ("/api/messages", {"content-type": "application/json"}, 413, TEAMS_MAX_BODY_BYTES),
    ]
    try:
        report = await _assert_gib_refused_with_bounded_rss(server, f"http://127.0.0.1:{port}", doors)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print("\n".join(report))


async def test_a_gib_body_to_the_specialists_is_refused_and_rss_stays_bounded(tmp_path: Path) -> None:
    import os

    port = free_port()
    env = {**os.environ, "COUNTERSIGN_SPECIALIST_TOKEN": SPECIALIST_TOKEN, "COUNTERSIGN_STATE_DIR": str(tmp_path)}
    server = _process(["specialists", "serve", "--port", str(port)], env)
    auth = {"authorization": f"Bearer {SPECIALIST_TOKEN}", "a2a-version": "1.0", "content-type": "application/json"}
    doors = [
        ("/reconciliation", auth, 413, SPECIALIST_MAX_BODY_BYTES),
        ("/accruals", {"content-type": "application/json"}, 401, 0),  # no token: refused before any body byte
    ]
    try:
        report = await _assert_gib_refused_with_bounded_rss(server, f"http://127.0.0.1:{port}", doors)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print("\n".join(report))
