"""Overdue gates escalate and never approve; expired gates re-run their task under a fresh gate."""

from __future__ import annotations

from typing import Any

from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.support import count, rewrite_gate_as_owner, start_default_close


async def _accruals_gate(conn: Any, runtime: Any, engine_ctx: Any, default_books: Any) -> tuple[str, str]:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    return close_id, next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals")


async def test_an_overdue_gate_escalates_once_and_stays_open(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id, gate_id = await _accruals_gate(conn, runtime, engine_ctx, default_books)
    await rewrite_gate_as_owner(conn, gate_id, "due_at = now() - interval '1 hour'")
    first = await advance(conn, close_id, engine_ctx)
    second = await advance(conn, close_id, engine_ctx)
    assert any("overdue" in step for step in first.steps)
    assert not any("overdue" in step for step in second.steps)
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'gate_overdue'") == 1
    status = await close_status(conn, close_id)
    gate = next(g for g in status["gates"] if g["gate_id"] == gate_id)
    assert gate["status"] == "open" and gate["overdue"] is True and gate["decisions"] == []
    assert await count(conn, "SELECT count(*) FROM journal") == 0


async def test_an_expired_gate_reruns_the_task_and_opens_a_fresh_gate(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id, gate_id = await _accruals_gate(conn, runtime, engine_ctx, default_books)
    await rewrite_gate_as_owner(
        conn, gate_id, "due_at = now() - interval '2 days', expires_at = now() - interval '1 day'"
    )
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    accruals = [g for g in status["gates"] if g["task"] == "accruals"]
    assert [(g["attempt"], g["status"]) for g in accruals] == [(1, "expired"), (2, "open")]
    assert next(t for t in status["tasks"] if t["task"] == "accruals")["attempt"] == 2
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'gate_expired'") == 1
    assert await count(conn, "SELECT count(*) FROM journal") == 0
