"""`/healthz`, `/readyz` and `/metrics`: is the server up, may it take traffic, and its counts.

The probes are handed in by the composition root (a ping, the schema revision, the metrics' table refresh), so this
door imports no database code; each answers within `timeout_s` even when the database hangs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from countersign.services.decide import Connect

log = logging.getLogger("countersign.bootstrap.app")

Probe = Callable[[Any], Awaitable[Any]]  # run on a connection: ping, or the schema revision


class Metrics(Protocol):
    """countersign/bootstrap/metrics.py `ServeMetrics`, as the `/metrics` route uses it."""

    async def refresh_from_tables(self, conn: Any) -> None: ...

    def database_down(self) -> None: ...

    def exposition(self) -> bytes | str: ...


def build_health_router(
    *,
    connect_callbacks: Connect,
    connect_engine: Connect,
    ping: Probe,
    schema_revision: Callable[[Any], Awaitable[str | None]],
    head_revision: str,
    metrics: Metrics,
    metrics_content_type: str,
    timeout_s: float,
) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        async with connect_callbacks() as conn:
            await ping(conn)
        return {"status": "ok"}

    @router.get("/readyz", responses={503: {"description": "not ready; `reason` says why"}})
    async def readyz() -> JSONResponse:
        """200 when the database answers as both service roles and its schema is at this release's head."""
        revision: str | None = None
        for role, connect in (("engine", connect_engine), ("callbacks", connect_callbacks)):
            try:
                async with asyncio.timeout(timeout_s), connect() as conn:
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

    @router.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        """Prometheus text format: counts and durations only (no names, reasons, amounts or ids)."""
        try:
            async with asyncio.timeout(timeout_s), connect_engine() as conn:
                await metrics.refresh_from_tables(conn)
        except Exception:
            log.warning("/metrics could not read the tables", exc_info=True)
            metrics.database_down()
        return Response(metrics.exposition(), media_type=metrics_content_type)

    return router
