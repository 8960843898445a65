"""The Close Board's pages in tests: the real app through its ASGI interface, a viewer put in place of the session (the
sign-in is another module's), and real closes run on real PostgreSQL to the gates a person would look at."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest_asyncio
from fastapi import FastAPI
from psycopg import AsyncConnection

from countersign.board.session import Viewer, require_viewer
from countersign.bootstrap.app import create_app
from countersign.bootstrap.runtime import Runtime
from countersign.callbacks.callers import find_caller
from tests.board.browser_support import (  # noqa: F401  (the browser tests' fixtures)
    board_page,
    board_server,
    browser,
    chromium_session,
    screenshot,
)


@dataclass
class Board:
    """The app, a client of it, and a way to say who is looking."""

    app: FastAPI
    client: httpx.AsyncClient
    conn: AsyncConnection[Any]

    async def look_as(self, principal: str) -> Viewer:
        """Every board request from now on is `principal`'s, as a session would make it."""
        found = await find_caller(self.conn, principal)
        assert found is not None, principal
        viewer = Viewer(caller=found[0], csrf_token="t")
        self.app.dependency_overrides[require_viewer] = _constant(viewer)
        return viewer

    def signed_out(self) -> None:
        self.app.dependency_overrides.pop(require_viewer, None)


def _constant(viewer: Viewer) -> Callable[[], Viewer]:
    return lambda: viewer


@pytest_asyncio.fixture(name="board")
async def board_fixture(runtime: Runtime, conn: AsyncConnection[Any]) -> AsyncIterator[Board]:
    app = create_app(runtime)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://countersign.test") as client:
            yield Board(app, client, conn)
