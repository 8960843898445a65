"""The ASGI app: Slack, Teams, signed callbacks, read APIs and health, on one FastAPI server.

A short factory: check the settings, open the pools, and mount each door's router (countersign/web/ for HTTP,
countersign/bot/ for Slack
and Teams). The routes themselves live with their doors.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from countersign.audit.sealer import GroupSealer
from countersign.bootstrap import migrate, telemetry
from countersign.bootstrap.chat import build_senders, channel_targets, check_allow_lists, check_chat_settings
from countersign.bootstrap.limits import DEFAULT_MAX_BODY_BYTES, DOOR_BODY_LIMITS
from countersign.bootstrap.metrics import CONTENT_TYPE, DecisionTimer, ServeMetrics
from countersign.bootstrap.migrate import ping, schema_revision
from countersign.bootstrap.runtime import Runtime, app_version, start_close_with_books, start_rules
from countersign.bootstrap.settings import Settings
from countersign.engine.outbox import enqueue_card_updates
from countersign.engine.shutdown import release_claims
from countersign.http_edge.limits import BodyLimitMiddleware
from countersign.services.starting import StartedPaymentRuns, start_payment_runs_for_month
from countersign.web.callbacks import build_callback_router
from countersign.web.health import build_health_router
from countersign.web.reads import build_read_router

if TYPE_CHECKING:
    from countersign.bot.wiring import ChatWiring
    from countersign.delivery.worker import InlineDelivery

log = logging.getLogger("countersign.bootstrap.app")

READY_TIMEOUT_S = 5.0  # /readyz answers within this even when the database hangs
SHUTDOWN_DELIVERY_WAIT_S = 5.0  # on stop, in-flight card updates get this long before they are cancelled

Connect = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]


class MissingSecret(RuntimeError):
    pass


def _pool(url: str) -> AsyncConnectionPool:
    return AsyncConnectionPool(url, min_size=1, max_size=10, open=False, kwargs={"autocommit": True})


def _connector(pool: AsyncConnectionPool) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[AsyncConnection[Any]]:
        async with pool.connection() as conn:
            yield conn

    return connect


@dataclass
class _Pools:
    """The server's two pools (one per service role) and its group sealer, opened and closed with the app."""

    callbacks: AsyncConnectionPool
    engine: AsyncConnectionPool
    sealer: GroupSealer
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)  # closed first (InlineDelivery)

    @classmethod
    def for_runtime(cls, runtime: Runtime) -> _Pools:
        callbacks_url = runtime.database.callbacks_url
        sealer = GroupSealer(lambda: AsyncConnection.connect(callbacks_url, autocommit=True))
        return cls(_pool(callbacks_url), _pool(runtime.database.engine_url), sealer)

    @property
    def connect_callbacks(self) -> Connect:
        return _connector(self.callbacks)

    @property
    def connect_engine(self) -> Connect:
        return _connector(self.engine)

    @asynccontextmanager
    async def lifespan(self, _: FastAPI) -> AsyncIterator[None]:
        await self.callbacks.open()
        await self.engine.open()
        try:
            yield
        finally:
            # uvicorn has finished the in-flight requests (or its graceful timeout passed) before this runs.
            for stop in self.on_stop:
                await stop()
            try:
                async with self.engine.connection(timeout=READY_TIMEOUT_S) as conn:
                    await release_claims(conn)  # card updates cancelled above go straight back to the worker
            except Exception:
                log.warning("could not release this server's outbox claims; they expire by themselves", exc_info=True)
            await self.sealer.close()
            await self.callbacks.close()
            await self.engine.close()


def _check_settings(settings: Settings) -> None:
    if not settings.callback_secret:
        raise MissingSecret("COUNTERSIGN_CALLBACK_SECRET is not set: refusing to serve signed callbacks without it")
    try:
        check_chat_settings(settings)
        check_allow_lists(settings)
    except RuntimeError as exc:
        raise MissingSecret(str(exc)) from exc


def create_app(runtime: Runtime) -> FastAPI:
    settings = runtime.settings
    _check_settings(settings)
    pools = _Pools.for_runtime(runtime)
    metrics = ServeMetrics(outbox_budget_s=settings.outbox_budget_hours * 3600)
    docs: dict[str, Any] = {} if settings.openapi else {"docs_url": None, "redoc_url": None, "openapi_url": None}
    app = FastAPI(title="Countersign", version=app_version(), lifespan=pools.lifespan, **docs)
    app.add_middleware(BodyLimitMiddleware, limits=DOOR_BODY_LIMITS, default_max_bytes=DEFAULT_MAX_BODY_BYTES)
    app.add_middleware(DecisionTimer, metrics=metrics)  # outermost: times refusals at the body limit too
    telemetry.instrument_app(
        app
    )  # traces only when OTEL_EXPORTER_OTLP_ENDPOINT is set (countersign/bootstrap/telemetry.py)
    chat = settings.slack_enabled or settings.teams_enabled
    senders = build_senders(settings) if chat else {}
    # A decision's card updates go out in the background, whichever door decided; the answer waits at most
    # INLINE_WAIT_S for them, and no pool connection is held while Slack or Teams answers (delivery/worker.py).
    deliver = _inline_delivery(pools.connect_engine, senders, settings.outbox_budget_hours) if chat else None
    if deliver is not None:
        pools.on_stop.append(partial(deliver.aclose, wait_s=SHUTDOWN_DELIVERY_WAIT_S))
    assert settings.callback_secret  # _check_settings
    callbacks = build_callback_router(
        settings.callback_secret,
        pools.connect_callbacks,
        seal=pools.sealer.seal,
        on_recorded=enqueue_card_updates,
        deliver=deliver,
    )
    app.include_router(callbacks)
    app.include_router(_health_router(pools, metrics))
    app.include_router(build_read_router(pools.connect_callbacks, pools.connect_engine, runtime.policy))
    _install_board(app, runtime, pools, deliver)
    if deliver is not None:
        _mount_chat(app, runtime, pools, senders, deliver)
    return app


def _install_board(app: FastAPI, runtime: Runtime, pools: _Pools, deliver: InlineDelivery | None) -> None:
    from countersign.board.app import BoardDeps, install_board

    deps = BoardDeps(
        connect_callbacks=pools.connect_callbacks,
        connect_engine=pools.connect_engine,
        policy=runtime.policy,
        board_url=runtime.settings.board_url,
        locale=runtime.settings.locale,
        seal=pools.sealer.seal,
        on_recorded=enqueue_card_updates,
        deliver=deliver,
    )
    install_board(app, deps)


def _health_router(pools: _Pools, metrics: ServeMetrics) -> APIRouter:
    return build_health_router(
        connect_callbacks=pools.connect_callbacks,
        connect_engine=pools.connect_engine,
        ping=ping,
        schema_revision=schema_revision,
        head_revision=migrate.head_revision(),
        metrics=metrics,
        metrics_content_type=CONTENT_TYPE,
        timeout_s=READY_TIMEOUT_S,
    )


def _inline_delivery(connect_engine: Any, senders: dict[str, object], budget_hours: float) -> InlineDelivery:
    from countersign.delivery.worker import InlineDelivery

    return InlineDelivery(connect_engine, senders, budget_hours=budget_hours)  # type: ignore[arg-type]


def _mount_chat(
    app: FastAPI, runtime: Runtime, pools: _Pools, senders: dict[str, object], deliver: InlineDelivery
) -> None:
    """Mount Slack and Teams on the wiring every chat door shares."""
    from countersign.bot.wiring import ChatWiring

    settings = runtime.settings
    connect_engine = pools.connect_engine

    async def start_close_for(entity: str, period: str, started_by: str, synthetic: bool) -> str:
        """`close start` from a chat door: the same `start_close_with_books` the CLI calls, on books loaded before
        or (asked) synthetic ones."""
        async with connect_engine() as conn:
            return await start_close_with_books(
                runtime, conn, entity=entity, period=period, books_dir=None, started_by=started_by, synthetic=synthetic
            )

    async def start_payment_runs_for(period: str, started_by: str) -> StartedPaymentRuns:
        """`payments start` from a chat door: the month's runs on the latest set with it, as the CLI starts them."""
        async with connect_engine() as conn:
            return await start_payment_runs_for_month(
                conn, start_rules(runtime, "certificates"), period=period, set_id=None, started_by=started_by
            )

    wiring = ChatWiring(
        connect_callbacks=pools.connect_callbacks,
        connect_engine=connect_engine,
        start_close=start_close_for,
        start_payment_runs=start_payment_runs_for,
        deliver=deliver,
        on_recorded=enqueue_card_updates,
        board_url=settings.board_url,
        locale=settings.locale,
        channels=channel_targets(settings),
        seal=pools.sealer.seal,
        policy=runtime.policy,
        slack_team_ids=frozenset(settings.slack_team_ids),
        teams_tenant_ids=frozenset(settings.teams_tenant_ids),
    )
    if settings.slack_enabled:
        from countersign.bot.slack_events import build_slack_router

        assert settings.slack_bot_token and settings.slack_signing_secret
        slack = build_slack_router(
            token=settings.slack_bot_token,
            signing_secret=settings.slack_signing_secret,
            api_url=settings.slack_api_url,
            wiring=wiring,
        )
        app.include_router(slack)
    if settings.teams_enabled:
        app.include_router(_teams_router(settings, senders, wiring))


def _teams_router(settings: Settings, senders: dict[str, object], wiring: ChatWiring) -> APIRouter:
    from countersign.bootstrap.chat import teams_sender
    from countersign.bot.teams import TeamsAdapter, build_authentication, build_teams_router

    assert settings.teams_app_id  # check_chat_settings: and a password unless UserAssignedMSI
    auth = build_authentication(
        settings.teams_app_id,
        settings.teams_app_password,
        settings.teams_openid_metadata_url,
        app_type=settings.teams_app_type,
        tenant_id=settings.teams_app_tenant_id,
        tenant_openid_metadata_url=settings.teams_tenant_openid_metadata_url,
    )
    sender = senders.get("teams") or teams_sender(settings)
    adapter = TeamsAdapter(app_id=settings.teams_app_id, auth=auth, sender=sender, wiring=wiring)  # type: ignore[arg-type]
    return build_teams_router(adapter)
