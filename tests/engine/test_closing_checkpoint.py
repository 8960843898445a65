"""Sign-off ends with a signed checkpoint that covers it, announced in the close's channels, even when a worker's
checkpoint job signed everything a moment before (the workers drill found that race)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from countersign.audit.checkpoint import generate_signer
from countersign.audit.trace import append_event, seal_pending
from countersign.audit.transparency_log import latest_checkpoint, sign_log_checkpoint
from countersign.engine import orchestrator
from countersign.engine.context import AdvanceReport
from countersign.engine.integrity import closing_checkpoint_problems
from countersign.engine.orchestrator import _sign_closing_checkpoint
from countersign.engine.outbox import ChannelTarget
from countersign.engine.runs import load_close
from tests.support import start_default_close

CHANNEL = ChannelTarget("slack", "C0CLOSE")


async def _closed(conn: Any, runtime: Any, books: Path) -> str:
    close_id = await start_default_close(conn, runtime, books)
    async with conn.transaction():
        await append_event(conn, actor="test", kind="period_closed", payload={}, close_id=close_id)
    await seal_pending(conn)
    return close_id


async def _notices(conn: Any, close_id: str) -> list[str]:
    cursor = await conn.execute(
        "SELECT dedupe_key FROM outbox_message WHERE close_id = %s AND kind = 'notice' ORDER BY message_id", (close_id,)
    )
    return [row[0] for row in await cursor.fetchall()]


async def test_a_sign_off_signs_and_announces_its_own_checkpoint(
    conn: Any, runtime: Any, default_books: Path, engine_ctx: Any
) -> None:
    close_id = await _closed(conn, runtime, default_books)
    ctx = replace(engine_ctx, signer=generate_signer("countersign.test/close"), channels=(CHANNEL,))
    report = AdvanceReport(close_id, "closed")

    await _sign_closing_checkpoint(conn, await load_close(conn, close_id), ctx, report)

    latest = await latest_checkpoint(conn)
    assert latest is not None and report.steps == [f"trace checkpoint signed at tree size {latest.tree_size}"]
    assert await _notices(conn, close_id) == [f"checkpoint:{latest.tree_size}:slack:C0CLOSE"]
    assert await closing_checkpoint_problems(conn, [close_id]) == []


async def test_a_checkpoint_signed_a_moment_before_is_the_one_announced(
    conn: Any, runtime: Any, default_books: Path, engine_ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    close_id = await _closed(conn, runtime, default_books)
    signer = generate_signer("countersign.test/close")
    covering = await sign_log_checkpoint(conn, signer, signer.name, actor="worker")  # the checkpoint job won
    assert covering is not None

    async def nothing_new(*_args: Any, **_kwargs: Any) -> None:
        return None  # what signing answers while the winner's own `checkpoint_signed` event is still queued

    monkeypatch.setattr(orchestrator, "sign_log_checkpoint", nothing_new)
    ctx = replace(engine_ctx, signer=signer, channels=(CHANNEL,))
    report = AdvanceReport(close_id, "closed")

    await orchestrator._sign_closing_checkpoint(conn, await load_close(conn, close_id), ctx, report)

    assert report.steps == [
        f"trace checkpoint at tree size {covering.tree_size}, signed a moment before, covers the sign-off"
    ]
    notices = await _notices(conn, close_id)
    assert len(notices) == 1 and notices[0].startswith(f"checkpoint:{covering.tree_size}:{close_id}")
    assert await closing_checkpoint_problems(conn, [close_id]) == []
