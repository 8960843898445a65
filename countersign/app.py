"""The ASGI app: signed callbacks, read APIs, health. Slack and Teams mount here in later work."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from callbacks.http import build_callback_router
from engine.closes import CloseNotFound, close_status

from .runtime import Runtime, app_version


class MissingSecret(RuntimeError):
    pass


def create_app(runtime: Runtime) -> FastAPI:
    secret = runtime.settings.callback_secret
    if not secret:
        raise MissingSecret("COUNTERSIGN_CALLBACK_SECRET is not set: refusing to serve signed callbacks without it")
    pool = AsyncConnectionPool(
        runtime.database.callbacks_url, min_size=1, max_size=10, open=False, kwargs={"autocommit": True}
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await pool.open()
        try:
            yield
        finally:
            await pool.close()

    @asynccontextmanager
    async def connect() -> AsyncIterator[AsyncConnection[Any]]:
        async with pool.connection() as conn:
            yield conn

    app = FastAPI(title="Countersign", version=app_version(), lifespan=lifespan)
    app.include_router(build_callback_router(secret, connect))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        async with connect() as conn:
            await conn.execute("SELECT 1")
        return {"status": "ok"}

    @app.get("/closes/{close_id}")
    async def get_close(close_id: str) -> JSONResponse:
        async with connect() as conn:
            try:
                return JSONResponse(await close_status(conn, close_id))
            except CloseNotFound as exc:
                return JSONResponse({"error": "close_not_found", "detail": str(exc)}, status_code=404)

    return app
