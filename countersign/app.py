"""The ASGI app: Slack, Teams, signed callbacks, read APIs and health, on one FastAPI server."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from audit.sealer import GroupSealer
from callbacks.http import ErrorBody, build_callback_router
from engine.closes import CloseNotFound, close_status

from .chat import build_senders, channel_targets, check_chat_settings
from .runtime import Runtime, app_version, start_close_with_books

log = logging.getLogger("countersign.app")


class MissingSecret(RuntimeError):
    pass


def _pool(url: str) -> AsyncConnectionPool:
    return AsyncConnectionPool(url, min_size=1, max_size=10, open=False, kwargs={"autocommit": True})


def create_app(runtime: Runtime) -> FastAPI:
    settings = runtime.settings
    if not settings.callback_secret:
        raise MissingSecret("COUNTERSIGN_CALLBACK_SECRET is not set: refusing to serve signed callbacks without it")
    try:
        check_chat_settings(settings)
    except RuntimeError as exc:
        raise MissingSecret(str(exc)) from exc
    callbacks_pool = _pool(runtime.database.callbacks_url)
    engine_pool = _pool(runtime.database.engine_url)
    callbacks_url = runtime.database.callbacks_url
    sealer = GroupSealer(lambda: AsyncConnection.connect(callbacks_url, autocommit=True))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await callbacks_pool.open()
        await engine_pool.open()
        try:
            yield
        finally:
            await sealer.close()
            await callbacks_pool.close()
            await engine_pool.close()

    def connector(pool: AsyncConnectionPool) -> Callable[[], Any]:
        @asynccontextmanager
        async def connect() -> AsyncIterator[AsyncConnection[Any]]:
            async with pool.connection() as conn:
                yield conn

        return connect

    connect_callbacks = connector(callbacks_pool)
    connect_engine = connector(engine_pool)
    app = FastAPI(title="Countersign", version=app_version(), lifespan=lifespan)
    app.include_router(build_callback_router(settings.callback_secret, connect_callbacks, seal=sealer.seal))

    if settings.slack_enabled or settings.teams_enabled:
        _mount_chat(app, runtime, connect_callbacks, connect_engine, sealer.seal)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        async with connect_callbacks() as conn:
            await conn.execute("SELECT 1")
        return {"status": "ok"}

    @app.get("/closes/{close_id}", responses={404: {"model": ErrorBody, "description": "unknown close"}})
    async def get_close(close_id: str) -> JSONResponse:
        async with connect_engine() as conn:
            try:
                return JSONResponse(await close_status(conn, close_id))
            except CloseNotFound as exc:
                return JSONResponse({"error": "close_not_found", "detail": str(exc)}, status_code=404)

    return app


def _mount_chat(
    app: FastAPI, runtime: Runtime, connect_callbacks: Any, connect_engine: Any, seal: Callable[[], Any]
) -> None:
    from bot.delivery import deliver_due
    from bot.services import ChatServices

    settings = runtime.settings
    senders = build_senders(settings)

    async def deliver(message_ids: list[int]) -> None:
        if message_ids:
            async with connect_engine() as conn:
                await deliver_due(conn, senders, message_ids=message_ids)  # type: ignore[arg-type]

    async def start_close_for(entity: str, period: str, started_by: str) -> str:
        async with connect_engine() as conn:
            return await start_close_with_books(
                runtime, conn, entity=entity, period=period, books_dir=None, started_by=started_by
            )

    services = ChatServices(
        connect_callbacks=connect_callbacks,
        connect_engine=connect_engine,
        start_close=start_close_for,
        deliver=deliver,
        channels=channel_targets(settings),
        seal=seal,
    )
    if settings.slack_enabled:
        from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler

        from bot.slack import build_slack_app
        from bot.slack_signature import SlackSignatureRejected, verify_slack_request

        assert settings.slack_bot_token and settings.slack_signing_secret
        slack_handler = AsyncSlackRequestHandler(
            build_slack_app(
                token=settings.slack_bot_token,
                signing_secret=settings.slack_signing_secret,
                api_url=settings.slack_api_url,
                services=services,
            )
        )

        signing_secret = settings.slack_signing_secret

        @app.post("/slack/events")
        async def slack_events(request: Request) -> Response:
            try:
                verify_slack_request(signing_secret, request.headers, await request.body())
            except SlackSignatureRejected as exc:
                return JSONResponse({"error": "signature_rejected", "detail": exc.reason}, status_code=401)
            try:
                return await slack_handler.handle(request)
            except Exception:  # a signed but malformed payload: bolt cannot parse it
                log.exception("Slack sent a request bolt could not handle")
                return JSONResponse({"error": "malformed_slack_request"}, status_code=400)

    if settings.teams_enabled:
        from bot.delivery import TeamsSender
        from bot.teams import TeamsAdapter, build_authentication

        assert settings.teams_app_id and settings.teams_app_password
        sender = senders.get("teams") or TeamsSender(
            settings.teams_app_id, settings.teams_app_password, settings.teams_service_url or ""
        )
        if settings.teams_token_url and isinstance(sender, TeamsSender):
            sender.token_url = settings.teams_token_url
        adapter = TeamsAdapter(
            app_id=settings.teams_app_id,
            auth=build_authentication(
                settings.teams_app_id, settings.teams_app_password, settings.teams_openid_metadata_url
            ),
            sender=sender,  # type: ignore[arg-type]
            services=services,
        )

        @app.post("/api/messages")
        async def teams_messages(request: Request) -> Response:
            return await adapter.handle(request)
