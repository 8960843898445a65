"""The operator's use cases on a running close and its deliveries: advance a close, load a corrected bank feed into
its books, replay a dead-lettered dispatch, redrive dead-lettered chat messages and count the outbox.

The CLI calls these (`close advance`, `close load-bank-feed`, `dispatch replay`, `outbox redrive`, `outbox status`);
each takes the connection (or the way to connect) and the engine context its composition root built.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import seal_pending
from countersign.engine import books, dispatch, outbox, runs
from countersign.engine.context import AdvanceReport, EngineContext
from countersign.engine.leases import Connect
from countersign.engine.orchestrator import advance
from countersign.engine.outbox import OutboxSummary
from countersign.engine.workflows.close.bank_pages import (
    progress_to as paged_progress,  # a paged reconciliation's progress
)
from countersign.services.errors import CloseNotFound, NoCloseStarted, ServiceError
from countersign.states import ChatPlatform

__all__ = [
    "BANK_LINES_FIRST_COLUMN",
    "AdvanceReport",
    "DispatchNotReplayable",
    "OutboxSummary",
    "advance_close",
    "latest_close_or_named",
    "load_bank_feed_for_close",
    "outbox_counts",
    "paged_progress",
    "redrive_outbox",
    "replay_dispatch",
    "require_close",
]

BANK_LINES_FIRST_COLUMN: str = books.BANK_LINES_COLUMNS[0][0]
"""The header a bank_lines.csv in the books format starts with: such a file is loaded as it is, not imported."""


class DispatchNotReplayable(ServiceError, ValueError):
    """`dispatch replay` of a dispatch that is not dead-lettered, or whose task did not fail; the message says which."""


async def latest_close_or_named(conn: AsyncConnection[Any], close_id: str | None) -> str:
    """`close_id` when given; otherwise the latest close's id, `NoCloseStarted` when none was started."""
    if close_id:
        return close_id
    latest = await runs.latest_close_id(conn)
    if latest is None:
        raise NoCloseStarted()
    return latest


async def require_close(conn: AsyncConnection[Any], close_id: str) -> None:
    """Nothing when `close_id` names a close; `CloseNotFound` otherwise (a malformed id too)."""
    try:
        await runs.load_close(conn, close_id)
    except runs.CloseNotFound:
        raise CloseNotFound(close_id) from None


async def advance_close(connect: Connect, close_id: str, ctx: EngineContext) -> AdvanceReport:
    """Run every step of the close that is ready; stop at gates and halts. A connection is taken from `connect` per
    step, so none is held while a specialist works."""
    return await advance(connect, close_id, ctx)


async def load_bank_feed_for_close(conn: AsyncConnection[Any], close_id: str, feed: Path, *, loaded_by: str) -> int:
    """Load a corrected bank feed (books format) for the books of `close_id`; returns the feed's new version. The
    next bank reconciliation reads it. `CloseNotFound` for an unknown close."""
    try:
        record = await runs.load_close(conn, close_id)
    except runs.CloseNotFound:
        raise CloseNotFound(close_id) from None
    return await books.load_bank_feed(conn, record.book_set_id, feed, loaded_by=loaded_by, close_id=close_id)


async def replay_dispatch(conn: AsyncConnection[Any], dispatch_id: int, *, actor: str) -> tuple[str, str]:
    """Give a dead-lettered dispatch fresh attempts and seal the trace; returns (close id, task).
    `DispatchNotReplayable` naming why when it cannot be replayed."""
    try:
        replayed = await dispatch.replay_dead_letter(conn, dispatch_id, actor=actor)
    except (dispatch.NotDeadLettered, dispatch.NotReplayable) as exc:
        raise DispatchNotReplayable(str(exc)) from None
    await seal_pending(conn)
    return replayed


async def redrive_outbox(
    conn: AsyncConnection[Any], *, gate_id: str | None, platform: ChatPlatform | None, since: datetime | None
) -> list[int]:
    """Put the dead-lettered messages that match back to pending with a fresh budget; returns their ids."""
    return await outbox.redrive_dead_letters(conn, gate_id=gate_id, platform=platform, since=since)


async def outbox_counts(conn: AsyncConnection[Any], *, budget_hours: float) -> OutboxSummary:
    """Messages by status and platform, the oldest pending one's age and how many are past `budget_hours`."""
    return await outbox.outbox_summary(conn, budget_hours=budget_hours)
