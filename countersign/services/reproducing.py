"""The auditor's re-run of a close (`countersign trace reproduce`): the recorded specialist calls asked again, compared
byte for byte (countersign/engine/reproduce.py). Read-only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.context import EngineContext
from countersign.engine.reproduce import NothingToReproduce, ReproductionReport, reproduce_close
from countersign.services.operating import require_close

__all__ = ["NothingToReproduce", "ReproductionReport", "reproduce"]


async def reproduce(
    conn: AsyncConnection[Any],
    close_id: str,
    ctx: EngineContext,
    *,
    versions_now: Mapping[str, Any],
    gate_id: str | None = None,
) -> ReproductionReport:
    """Re-run the close's completed specialist calls (one gate's with `gate_id`); `NothingToReproduce` when none."""
    await require_close(conn, close_id)
    return await reproduce_close(conn, close_id, ctx, versions_now=versions_now, gate_id=gate_id)
