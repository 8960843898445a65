"""A whole close on real PostgreSQL with the real specialists over A2A and decisions over the signed callback."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from countersign.engine.books import load_bank_feed
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from tests.engine.workflow_support import approve_open_gates
from tests.support import count, post_decision, start_default_close


async def test_default_close_halts_on_account_1000_then_completes_after_people_decide(
    conn: Any, runtime: Any, engine_ctx: Any, api: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)

    first = await advance(conn, close_id, engine_ctx)
    assert first.status == "halted"
    status = await close_status(conn, close_id)
    bank = next(t for t in status["tasks"] if t["task"] == "bank_reconciliation")
    assert bank["status"] == "halted"
    assert bank["reason"].startswith("account 1000: 17 of 17 bank lines unmatched")
    escalation = [g for g in status["gates"] if g["kind"] == "escalation"]
    assert [g["task"] for g in escalation] == ["bank_reconciliation"]

    # A person investigates, loads the corrected feed, and approves the re-run.
    await load_bank_feed(
        conn,
        await _book_set(conn, close_id),
        default_books / "corrected" / "bank_lines.csv",
        loaded_by="alice.chen",
        close_id=close_id,
    )
    for _ in range(10):
        status = await close_status(conn, close_id)
        if status["status"] == "closed":
            break
        await approve_open_gates(api, conn, close_id)
        await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)

    assert status["status"] == "closed"
    assert {t["status"] for t in status["tasks"]} == {"done"}
    assert len(status["gates"]) >= 5
    assert all(g["status"] == "approved" for g in status["gates"])
    assert all(
        d["principal"] in ("alice.chen", "bob.osei", "carol.main") for g in status["gates"] for d in g["decisions"]
    )
    signoff = next(g for g in status["gates"] if g["task"] == "close_signoff")
    assert signoff["quorum"] == 2 and {d["principal"] for d in signoff["decisions"]} == {
        "bob.osei",
        "carol.main",
    }
    assert await count(conn, "SELECT count(*) FROM accounting_period WHERE status = 'closed'") == 1
    # The accrual journal posted once, balanced, after its gate passed.
    assert await count(conn, "SELECT count(*) FROM journal WHERE source_task = 'accruals'") == 1
    assert await count(conn, "SELECT sum(amount) FROM journal_line") == 0
    # Nothing ran twice: one dispatch row per task attempt.
    assert (
        await count(
            conn,
            "SELECT count(*) FROM (SELECT task, attempt FROM dispatch GROUP BY 1, 2 HAVING count(*) > 1) d",
        )
        == 0
    )
    # Advancing a closed close does nothing.
    again = await advance(conn, close_id, engine_ctx)
    assert again.status == "closed" and again.steps == []


async def test_accrual_journal_posts_only_after_its_gate_passes(
    conn: Any, runtime: Any, engine_ctx: Any, api: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    accruals = next(g for g in status["gates"] if g["task"] == "accruals")
    assert accruals["status"] == "open"
    assert await count(conn, "SELECT count(*) FROM journal") == 0

    assert (await post_decision(api, accruals["gate_id"], "alice.chen")).status_code == 200
    assert await count(conn, "SELECT count(*) FROM journal") == 0  # decided, not yet applied by the engine
    await advance(conn, close_id, engine_ctx)
    assert await count(conn, "SELECT count(*) FROM journal WHERE source_task = 'accruals'") == 1
    total = await count(conn, "SELECT sum(amount) FROM journal_line WHERE amount > 0")
    assert Decimal(total) > 0


async def test_rejected_gate_blocks_the_close_and_posts_nothing(
    conn: Any, runtime: Any, engine_ctx: Any, api: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    accruals = next(g for g in status["gates"] if g["task"] == "accruals")
    assert (await post_decision(api, accruals["gate_id"], "alice.chen", "reject")).status_code == 200
    report = await advance(conn, close_id, engine_ctx)
    assert report.status == "blocked"
    assert await count(conn, "SELECT count(*) FROM journal") == 0
    status = await close_status(conn, close_id)
    assert next(t for t in status["tasks"] if t["task"] == "accruals")["status"] == "rejected"
    assert next(t for t in status["tasks"] if t["task"] == "variance_analysis")["status"] == "pending"


async def _book_set(conn: Any, close_id: str) -> int:
    return await count(conn, "SELECT book_set_id FROM close_run WHERE close_id = %s", close_id)
