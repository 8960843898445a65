"""The engine reaching the specialists over a real socket, as in a deployment (COUNTERSIGN_SPECIALISTS_URL)."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import replace
from typing import Any

import pytest
import uvicorn

from countersign.bootstrap.runtime import MissingSpecialistToken, engine_context
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.specialists.server import build_specialists_app
from tests.support import count, start_default_close

TOKEN = "specialist-token-for-tests"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_close_advances_against_specialists_served_over_http(
    conn: Any, runtime: Any, default_books: Any
) -> None:
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(
        uvicorn.Config(build_specialists_app(base_url, token=TOKEN), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        assert server.started
        remote = replace(
            runtime, settings=runtime.settings.model_copy(update=dict(specialists_url=base_url, specialist_token=TOKEN))
        )
        close_id = await start_default_close(conn, remote, default_books)
        async with engine_context(remote) as ctx:
            report = await advance(conn, close_id, ctx)
    finally:
        server.should_exit = True
        await serving
    assert report.status == "halted"
    status = await close_status(conn, close_id)
    assert {g["task"] for g in status["gates"]} == {"bank_reconciliation", "accruals", "intercompany"}
    assert await count(conn, "SELECT count(*) FROM dispatch WHERE status = 'completed'") == 5


def test_specialists_serve_refuses_to_start_without_a_token(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COUNTERSIGN_SPECIALIST_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "countersign.cli.main", "specialists", "serve", "--port", str(_free_port())],
        env=env | {"COUNTERSIGN_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "COUNTERSIGN_SPECIALIST_TOKEN" in done.stderr


async def test_the_engine_refuses_remote_specialists_without_a_token(runtime: Any) -> None:
    remote = replace(
        runtime,
        settings=runtime.settings.model_copy(update=dict(specialists_url="http://127.0.0.1:9", specialist_token=None)),
    )
    with pytest.raises(MissingSpecialistToken, match="COUNTERSIGN_SPECIALIST_TOKEN"):
        async with engine_context(remote):
            pass


async def test_a_close_cannot_advance_against_remote_specialists_with_the_wrong_token(
    conn: Any, runtime: Any, default_books: Any
) -> None:
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(
        uvicorn.Config(build_specialists_app(base_url, token=TOKEN), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        wrong = replace(
            runtime,
            settings=runtime.settings.model_copy(update=dict(specialists_url=base_url, specialist_token="nope")),
        )
        close_id = await start_default_close(conn, wrong, default_books)
        async with engine_context(wrong) as ctx:
            await advance(conn, close_id, ctx)
    finally:
        server.should_exit = True
        await serving
    assert await count(conn, "SELECT count(*) FROM dispatch WHERE status = 'completed'") == 0
