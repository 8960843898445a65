"""The ASGI app: Slack, Teams, signed callbacks, read APIs and health, on one FastAPI server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from audit.sealer import GroupSealer
from callbacks.callers import ReadCredentials, ReadUnauthenticated, access_for, authenticate_reader
from countersign import migrate, telemetry
from countersign.chat import build_senders, channel_targets, check_allow_lists, check_chat_settings
from countersign.limits import DEFAULT_MAX_BODY_BYTES, DOOR_BODY_LIMITS
from countersign.metrics import CONTENT_TYPE, DecisionTimer, ServeMetrics
from countersign.migrate import ping, schema_revision
from countersign.runtime import Runtime, app_version, start_close_with_books
from countersign.shutdown import release_claims
from engine.outbox import enqueue_card_updates
from engine.runs import CloseNotFound, close_status
from http_edge.limits import BodyLimitMiddleware
from policy.command_roles import READ_CLOSE
from web.callbacks import ErrorBody, build_callback_router

if TYPE_CHECKING:
    from bot.delivery import InlineDelivery

log = logging.getLogger("countersign.app")

READY_TIMEOUT_S = 5.0  # /readyz answers within this even when the database hangs
SHUTDOWN_DELIVERY_WAIT_S = 5.0  # on stop, in-flight card updates get this long before they are cancelled


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
        check_allow_lists(settings)
    except RuntimeError as exc:
        raise MissingSecret(str(exc)) from exc
    callbacks_pool = _pool(runtime.database.callbacks_url)
    engine_pool = _pool(runtime.database.engine_url)
    callbacks_url = runtime.database.callbacks_url
    sealer = GroupSealer(lambda: AsyncConnection.connect(callbacks_url, autocommit=True))
    on_stop: list[Callable[[], Awaitable[None]]] = []  # closed first when the server stops (InlineDelivery)
    metrics = ServeMetrics()
    head_revision = migrate.head_revision()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await callbacks_pool.open()
        await engine_pool.open()
        try:
            yield
        finally:
            # uvicorn has finished the in-flight requests (or its graceful timeout passed) before this runs.
            for stop in on_stop:
                await stop()
            try:
                async with engine_pool.connection(timeout=READY_TIMEOUT_S) as conn:
                    await release_claims(conn)  # card updates cancelled above go straight back to the worker
            except Exception:
                log.warning("could not release this server's outbox claims; they expire by themselves", exc_info=True)
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
    docs: dict[str, Any] = {} if settings.openapi else {"docs_url": None, "redoc_url": None, "openapi_url": None}
    app = FastAPI(title="Countersign", version=app_version(), lifespan=lifespan, **docs)
    app.add_middleware(BodyLimitMiddleware, limits=DOOR_BODY_LIMITS, default_max_bytes=DEFAULT_MAX_BODY_BYTES)
    app.add_middleware(DecisionTimer, metrics=metrics)  # outermost: times refusals at the body limit too
    telemetry.instrument_app(app)  # traces only when OTEL_EXPORTER_OTLP_ENDPOINT is set (countersign/telemetry.py)
    chat = settings.slack_enabled or settings.teams_enabled
    senders = build_senders(settings) if chat else {}
    # A decision's card updates go out in the background, whichever door decided; the answer waits at most
    # INLINE_WAIT_S for them, and no pool connection is held while Slack or Teams answers (bot/delivery.py).
    deliver = _inline_delivery(connect_engine, senders) if chat else None
    if deliver is not None:
        on_stop.append(partial(deliver.aclose, wait_s=SHUTDOWN_DELIVERY_WAIT_S))
    app.include_router(
        build_callback_router(
            settings.callback_secret,
            connect_callbacks,
            seal=sealer.seal,
            on_recorded=enqueue_card_updates,
            deliver=deliver,
        )
    )
    if deliver is not None:
        _mount_chat(app, runtime, connect_callbacks, connect_engine, sealer.seal, senders, deliver)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        async with connect_callbacks() as conn:
            await ping(conn)
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "not ready; `reason` says why"}})
    async def readyz() -> JSONResponse:
        """200 when the database answers as both service roles and its schema is at this release's head."""
        revision: str | None = None
        for role, connect in (("engine", connect_engine), ("callbacks", connect_callbacks)):
            try:
                async with asyncio.timeout(READY_TIMEOUT_S), connect() as conn:
                    await ping(conn)
                    if role == "callbacks":
                        revision = await schema_revision(conn)
            except Exception as exc:
                reason = f"the database does not answer as the {role} role ({type(exc).__name__})"
                return JSONResponse({"status": "not_ready", "reason": reason}, status_code=503)
        if revision != head_revision:
            behind = f"schema at {revision or 'no revision'}, this release needs {head_revision}"
            reason = f"{behind}: run `countersign db upgrade`"
            return JSONResponse({"status": "not_ready", "reason": reason}, status_code=503)
        return JSONResponse({"status": "ready", "schema": head_revision})

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        """Prometheus text format: counts and durations only (no names, reasons, amounts or ids)."""
        try:
            async with asyncio.timeout(READY_TIMEOUT_S), connect_engine() as conn:
                await metrics.refresh_from_tables(conn)
        except Exception:
            log.warning("/metrics could not read the tables", exc_info=True)
            metrics.database_down()
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    @app.get(
        "/closes/{close_id}",
        responses={
            401: {"model": ErrorBody, "description": "no credentials, or a revoked, unknown or stale one"},
            403: {"model": ErrorBody, "description": "the caller may not read closes"},
            404: {"model": ErrorBody, "description": "unknown close"},
        },
    )
    async def get_close(close_id: str, request: Request) -> JSONResponse:
        """Needs `Authorization: Bearer cs_...` (a principal's API token) or a principal's signed request."""
        credentials = _read_credentials(request)
        if isinstance(credentials, JSONResponse):
            return credentials
        async with connect_callbacks() as conn:
            try:
                caller = await authenticate_reader(conn, credentials, method="GET", path=request.url.path)
            except ReadUnauthenticated as exc:
                return JSONResponse({"error": "unauthenticated", "detail": exc.reason}, status_code=401)
        access = access_for(READ_CLOSE, runtime.policy, caller)
        if not access.allowed:
            detail = f"{access.reason}: reading a close needs one of the roles {', '.join(access.needed)}"
            return JSONResponse({"error": "forbidden", "detail": detail}, status_code=403)
        async with connect_engine() as conn:
            try:
                return JSONResponse(await close_status(conn, close_id))
            except CloseNotFound as exc:
                return JSONResponse({"error": "close_not_found", "detail": str(exc)}, status_code=404)

    return app


def _read_credentials(request: Request) -> ReadCredentials | JSONResponse:
    authorization = request.headers.get("authorization")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return JSONResponse(
                {"error": "unauthenticated", "detail": "Authorization must be `Bearer cs_...`"}, status_code=401
            )
        return ReadCredentials(token=token.strip())
    return ReadCredentials(
        principal=request.headers.get("x-countersign-principal"),
        signed_at=request.headers.get("x-countersign-signed-at"),
        signature=request.headers.get("x-countersign-person-signature"),
    )


def _inline_delivery(connect_engine: Any, senders: dict[str, object]) -> InlineDelivery:
    from bot.delivery import InlineDelivery

    return InlineDelivery(connect_engine, senders)  # type: ignore[arg-type]


def _mount_chat(
    app: FastAPI,
    runtime: Runtime,
    connect_callbacks: Any,
    connect_engine: Any,
    seal: Callable[[], Any],
    senders: dict[str, object],
    deliver: InlineDelivery,
) -> None:
    """Mount Slack and Teams on the services every chat door shares."""
    from bot.services import ChatServices

    settings = runtime.settings

    async def start_close_for(entity: str, period: str, started_by: str, synthetic: bool) -> str:
        """`close start` from a chat door: the same `start_close_with_books` the CLI calls, on books loaded before
        or (asked) synthetic ones."""
        async with connect_engine() as conn:
            return await start_close_with_books(
                runtime,
                conn,
                entity=entity,
                period=period,
                books_dir=None,
                started_by=started_by,
                synthetic=synthetic,
            )

    services = ChatServices(
        connect_callbacks=connect_callbacks,
        connect_engine=connect_engine,
        start_close=start_close_for,
        deliver=deliver,
        on_recorded=enqueue_card_updates,
        channels=channel_targets(settings),
        seal=seal,
        policy=runtime.policy,
        slack_team_ids=frozenset(settings.slack_team_ids),
        teams_tenant_ids=frozenset(settings.teams_tenant_ids),
    )
    if settings.slack_enabled:
        from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler

        from bot.slack import build_slack_app
        from bot.slack_shape import slack_body_problem
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
            raw = await request.body()
            try:
                verify_slack_request(signing_secret, request.headers, raw)
            except SlackSignatureRejected as exc:
                return JSONResponse({"error": "signature_rejected", "detail": exc.reason}, status_code=401)
            problem = slack_body_problem(raw, request.headers.get("content-type"))
            if problem is not None:  # signed, so from Slack's side, but not in a shape bolt can handle
                log.info("refused a signed Slack body out of shape: %s", problem)
                return JSONResponse({"error": "malformed_slack_request", "detail": problem}, status_code=400)
            try:
                return await slack_handler.handle(request)
            except Exception:  # a signed but malformed payload: bolt cannot parse it
                log.exception("Slack sent a request bolt could not handle")
                return JSONResponse({"error": "malformed_slack_request"}, status_code=400)

    if settings.teams_enabled:
        from bot.teams import TeamsAdapter, build_authentication
        from countersign.chat import teams_sender

        assert settings.teams_app_id  # check_chat_settings: and a password unless UserAssignedMSI
        sender = senders.get("teams") or teams_sender(settings)
        adapter = TeamsAdapter(
            app_id=settings.teams_app_id,
            auth=build_authentication(
                settings.teams_app_id,
                settings.teams_app_password,
                settings.teams_openid_metadata_url,
                app_type=settings.teams_app_type,
                tenant_id=settings.teams_app_tenant_id,
                tenant_openid_metadata_url=settings.teams_tenant_openid_metadata_url,
            ),
            sender=sender,  # type: ignore[arg-type]
            services=services,
        )

        @app.post("/api/messages")
        async def teams_messages(request: Request) -> Response:
            return await adapter.handle(request)
