"""The demos' server: the real app on a real socket, its Close Board at `http://localhost:PORT/board/`.

The board must know its own origin before it starts (passkeys are bound to it), so the socket is bound first and the
app is created for that port.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

import uvicorn

from countersign.bootstrap.app import create_app
from countersign.bootstrap.runtime import Runtime
from countersign.scenarios.passkey_people import reserve_board_socket


@dataclass(frozen=True)
class DemoServer:
    base_url: str  # http://127.0.0.1:PORT, where clients connect
    board_url: str  # http://localhost:PORT, the board's origin
    runtime: Runtime  # the runtime the app was created with (its board_url set)


@asynccontextmanager
async def demo_server(rt: Runtime) -> AsyncIterator[DemoServer]:
    sock, board_url = reserve_board_socket()
    rt = replace(rt, settings=rt.settings.model_copy(update=dict(board_url=board_url)))
    server = uvicorn.Server(uvicorn.Config(create_app(rt), log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                raise RuntimeError("the demo server failed to start")
            await asyncio.sleep(0.05)
        yield DemoServer(f"http://127.0.0.1:{sock.getsockname()[1]}", board_url, rt)
    finally:
        server.should_exit = True
        await serving
        sock.close()
