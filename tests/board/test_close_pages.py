"""The Close Board's pages over a real close: the default books (seed 42) run by the real engine and specialists to the
gates a person looks at, decisions through the signed callback, and every page read as a signed-in person."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from dataclasses import replace
from decimal import Decimal
from typing import Any

import httpx
from fastapi import FastAPI
from markupsafe import escape

from countersign.audit.checkpoint import generate_signer
from countersign.audit.transparency_log import sign_log_checkpoint
from countersign.board.pages import build_root_router
from countersign.engine.books import load_bank_feed
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.money.formatting import format_money
from countersign.policy.wording import in_words
from countersign.services.board_reads import may_decide
from countersign.states import Decision, GateStatus
from countersign.store.gates import DecisionRecord, read_gate
from tests.board.pages_support import Board, board_fixture  # noqa: F401  (the `board` fixture)
from tests.engine.workflow_support import approve_open_gates
from tests.support import count, post_decision, start_default_close

SVG = "{http://www.w3.org/2000/svg}"


def _texts(svg: bytes) -> list[str]:
    """Every piece of text in a parsed SVG (titles, legends, labels, tooltips)."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return [text.strip() for element in root.iter() for text in (element.text,) if text and text.strip()]


async def _gate(conn: Any, close_id: str, task: str, kind: str = "approval") -> dict[str, Any]:
    gates: list[dict[str, Any]] = [
        g for g in (await close_status(conn, close_id))["gates"] if g["task"] == task and g["kind"] == kind
    ]
    return gates[-1]


async def _halted_close(conn: Any, runtime: Any, engine_ctx: Any, books: Any) -> str:
    close_id = await start_default_close(conn, runtime, books)
    assert (await advance(conn, close_id, engine_ctx)).status == "halted"
    return close_id


def _html(text: str) -> str:
    """`text` as the board's templates write it (markupsafe's escaping)."""
    return str(escape(text))


def _money(runtime: Any, amount: Any, currency: str = "GBP") -> str:
    return format_money(Decimal(str(amount)), currency, locale=runtime.settings.locale)


async def test_the_front_page_lists_the_close_with_whom_it_waits_on_and_the_inbox_is_the_viewers(
    board: Board, conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id = await _halted_close(conn, runtime, engine_ctx, default_books)
    await board.look_as("erin.park")  # an auditor: reads closes, decides nothing
    front = await board.client.get("/board/")
    assert front.status_code == 200
    assert f'href="/board/closes/{close_id}"' in front.text
    assert "ACME-UK" in front.text and in_words("halted") in front.text
    assert "waiting on the controller role, 1 approval still missing" in front.text  # three controller gates
    assert front.text.count("waiting on the controller role") == 3
    assert "Nothing is waiting on you." in (await board.client.get("/board/inbox")).text

    await board.look_as("alice.chen")
    inbox = (await board.client.get("/board/inbox")).text
    accruals = await _gate(conn, close_id, "accruals")
    assert f'href="/board/gates/{accruals["gate_id"]}"' in inbox and "Period-end accruals" in inbox

    # Once she has decided a gate it waits on her no more.
    await approve_open_gates(board.client, conn, close_id, tasks={"accruals"})
    after = (await board.client.get("/board/inbox")).text
    assert accruals["gate_id"] not in after
    assert inbox.count('href="/board/gates/') - 1 == after.count('href="/board/gates/')


async def test_a_close_page_shows_tasks_gates_the_timeline_and_a_verified_trace_with_its_checkpoint(
    board: Board, conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id = await _halted_close(conn, runtime, engine_ctx, default_books)
    await board.look_as("carol.main")
    page = (await board.client.get(f"/board/closes/{close_id}")).text
    assert "Bank reconciliation" in page and in_words("halted") in page
    assert "account 1000: 17 of 17 bank lines unmatched" in page
    assert "The trace is intact" in page and "No checkpoint has been signed yet." in page
    assert _html("orchestrator → reconciliation-agent") in page  # who handed what to whom
    assert f'src="/board/charts/closes/{close_id}/timeline.svg"' in page
    assert "variance.svg" not in page  # no variance output yet

    stored = await sign_log_checkpoint(conn, generate_signer("board.test/trace"), "board.test/trace", actor="test")
    assert stored is not None
    page = (await board.client.get(f"/board/closes/{close_id}")).text
    assert f"It extends the last signed checkpoint: tree size {stored.tree_size}" in page
    assert "board.test/trace" in page

    chart = await board.client.get(f"/board/charts/closes/{close_id}/timeline.svg")
    assert chart.status_code == 200 and chart.headers["content-type"].startswith("image/svg+xml")
    assert chart.headers["content-security-policy"] == "default-src 'none'; style-src 'unsafe-inline'"
    texts = _texts(chart.content)
    for task in ("bank_reconciliation", "accruals", "intercompany"):
        assert task in texts
    assert b"<script" not in chart.content


async def test_an_escalation_gate_shows_the_reason_in_words_and_the_unmatched_bank_lines_with_currency(
    board: Board, conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id = await _halted_close(conn, runtime, engine_ctx, default_books)
    gate = await _gate(conn, close_id, "bank_reconciliation", "escalation")
    await board.look_as("bob.osei")
    page = (await board.client.get(f"/board/gates/{gate['gate_id']}")).text
    assert _html(in_words("anomaly_over_tolerance")) in page
    assert "account 1000: 17 of 17 bank lines unmatched (tolerance 55%)" in page
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT l.bank_line_id, l.amount FROM book_bank_line l JOIN close_run r USING (book_set_id)"
            " WHERE r.close_id = %s AND l.feed_version = 1 AND l.account = '1000'",
            (close_id,),
        )
        lines = await cur.fetchall()
    assert len(lines) == 17
    for line_id, amount in lines:
        assert line_id in page and _money(runtime, amount) in page
    assert "100.0%" in page  # the unmatched share of account 1000
    assert "Nobody has decided yet." in page
    assert '<section class="decide" id="decide"' in page


async def test_an_accruals_gate_shows_the_proposed_journal_then_the_posted_one_and_each_decisions_proof(
    board: Board, conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id = await _halted_close(conn, runtime, engine_ctx, default_books)
    gate = await _gate(conn, close_id, "accruals")
    await board.look_as("carol.main")
    page = (await board.client.get(f"/board/gates/{gate['gate_id']}")).text
    async with conn.cursor() as cur:
        await cur.execute("SELECT summary FROM gate WHERE gate_id = %s", (gate["gate_id"],))
        (summary,) = await cur.fetchone()
    assert _money(runtime, summary["total"]) in page
    for line in summary["journal_lines"]:
        assert _money(runtime, line["amount"]) in page and _html(line["description"]) in page
    assert "Posted to the ledger" not in page

    await approve_open_gates(board.client, conn, close_id, tasks={"accruals"})
    await advance(conn, close_id, engine_ctx)
    page = (await board.client.get(f"/board/gates/{gate['gate_id']}")).text
    assert "Posted to the ledger" in page
    assert await count(conn, "SELECT count(*) FROM journal WHERE source_close = %s", close_id) == 1
    assert "Alice Chen (Financial Controller) (alice.chen)" in page
    assert _html(f"{in_words('ed25519')}, through {in_words('signed_callback')}") in page
    assert in_words("approved") in page


async def test_a_variance_gate_shows_the_table_the_narrative_and_its_picture(
    board: Board, conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id = await _halted_close(conn, runtime, engine_ctx, default_books)
    book_set = await count(conn, "SELECT book_set_id FROM close_run WHERE close_id = %s", close_id)
    corrected = default_books / "corrected" / "bank_lines.csv"
    await load_bank_feed(conn, book_set, corrected, loaded_by="alice.chen", close_id=close_id)
    rerun_checked = False
    for _ in range(4):
        gates = (await close_status(conn, close_id))["gates"]
        if any(g["task"] == "variance_analysis" for g in gates):
            break
        for rerun in [g for g in gates if g["task"] == "bank_reconciliation" and g["attempt"] == 2]:
            # Alice asked for the re-run (she loaded the corrected feed): it waits on another controller, not her.
            assert "alice.chen" in rerun["requested_by"]
            await board.look_as("alice.chen")
            assert rerun["gate_id"] not in (await board.client.get("/board/inbox")).text
            await board.look_as("bob.osei")
            assert rerun["gate_id"] in (await board.client.get("/board/inbox")).text
            rerun_checked = True
        await approve_open_gates(board.client, conn, close_id)
        await advance(conn, close_id, engine_ctx)
    assert rerun_checked
    gate = await _gate(conn, close_id, "variance_analysis")
    async with conn.cursor() as cur:
        await cur.execute("SELECT summary FROM gate WHERE gate_id = %s", (gate["gate_id"],))
        (summary,) = await cur.fetchone()
    assert summary["flagged"]

    await board.look_as("alice.chen")
    page = (await board.client.get(f"/board/gates/{gate['gate_id']}")).text
    for row in summary["flagged"]:
        assert _html(row["name"]) in page
        for figure in ("actual", "budget", "prior", "variance_budget", "variance_prior"):
            assert _money(runtime, row[figure]) in page, (row["name"], figure)
    assert _html(summary["narrative"]) in page
    assert "No flags on the narrative." in page
    assert f'src="/board/charts/closes/{close_id}/variance.svg"' in page

    chart = await board.client.get(f"/board/charts/closes/{close_id}/variance.svg")
    assert chart.status_code == 200 and chart.headers["content-type"].startswith("image/svg+xml")
    texts = _texts(chart.content)
    assert {"Actual", "Budget", "Prior period"} <= set(texts)
    for row in summary["flagged"]:
        assert f"{row['account']} {row['name']}" in texts
        assert _money(runtime, row["actual"]) in texts and _money(runtime, row["budget"]) in texts
    assert b"<script" not in chart.content


async def test_a_viewer_without_a_read_role_is_refused_everywhere(
    board: Board, conn: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await board.look_as("dana.reyes")  # an accountant: prepares work, reads no close
    unknown = str(uuid.uuid4())
    for path in (
        "/board/",
        "/board/inbox",
        f"/board/closes/{close_id}",
        f"/board/gates/{unknown}",
        f"/board/charts/closes/{close_id}/timeline.svg",
        f"/board/charts/closes/{close_id}/variance.svg",
        f"/board/charts/closes/{close_id}/position.svg",
    ):
        response = await board.client.get(path)
        assert response.status_code == 403, path
        assert "You may not read closes" in response.text and "auditor" in response.text, path
        assert "ACME-UK" not in response.text and close_id not in response.text, path


async def test_unknown_closes_and_gates_are_404_pages(
    board: Board, conn: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await board.look_as("erin.park")
    for path in (
        f"/board/closes/{uuid.uuid4()}",
        "/board/closes/not-a-close",
        f"/board/gates/{uuid.uuid4()}",
        "/board/gates/not-a-gate",
        f"/board/charts/closes/{uuid.uuid4()}/timeline.svg",
        f"/board/charts/closes/{close_id}/variance.svg",  # a close with no variance output yet
        f"/board/charts/closes/{close_id}/position.svg",  # not a payment run
    ):
        response = await board.client.get(path)
        assert response.status_code == 404, path
        assert "Not found" in response.text, path
    assert (await board.client.get(f"/board/closes/{close_id}")).status_code == 200


async def test_without_a_session_no_page_shows_anything(
    board: Board, conn: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    board.signed_out()
    for path in (
        "/board/",
        "/board/inbox",
        f"/board/closes/{close_id}",
        f"/board/charts/closes/{close_id}/timeline.svg",
    ):
        response = await board.client.get(path)
        assert response.status_code != 200, path
        assert "ACME-UK" not in response.text and close_id not in response.text, path


async def test_the_stylesheet_is_served_and_nothing_else_from_static(board: Board) -> None:
    css = await board.client.get("/board/static/board.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "font" in css.text
    for name in ("pages.py", "..%2Fpages.py", "missing.css"):
        assert (await board.client.get(f"/board/static/{name}")).status_code == 404


async def test_a_gate_is_offered_only_to_whom_the_decision_would_admit(
    board: Board, conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id = await _halted_close(conn, runtime, engine_ctx, default_books)
    gate = await read_gate(conn, (await _gate(conn, close_id, "accruals"))["gate_id"])
    assert gate is not None and gate.approver_role == "controller"
    alice = await board.look_as("alice.chen")
    assert may_decide(gate, alice.caller)
    assert not may_decide(gate, (await board.look_as("carol.main")).caller)  # cfo only: not the gate's role
    assert not may_decide(replace(gate, prepared_by="alice.chen"), alice.caller)
    assert not may_decide(replace(gate, requested_by=("dana.reyes", "alice.chen")), alice.caller)
    assert not may_decide(replace(gate, lifecycle="applied"), alice.caller)
    assert not may_decide(replace(gate, status=GateStatus.EXPIRED), alice.caller)
    assert not may_decide(replace(gate, decisions=(replace_decision(gate, "alice.chen"),)), alice.caller)
    assert not may_decide(gate, replace(alice.caller, active=False))


def replace_decision(gate: Any, principal: str) -> DecisionRecord:
    return DecisionRecord(principal, principal, Decision.APPROVE, "reviewed", gate.opened_at, "signed_callback")


async def test_a_persons_reason_is_shown_as_text_never_as_markup(
    board: Board, conn: Any, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id = await _halted_close(conn, runtime, engine_ctx, default_books)
    gate = await _gate(conn, close_id, "intercompany")
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    assert (await post_decision(board.client, gate["gate_id"], "alice.chen", reason=hostile)).status_code == 200
    await board.look_as("erin.park")
    page = (await board.client.get(f"/board/gates/{gate['gate_id']}")).text
    assert _html(hostile) in page
    assert "<script>alert" not in page and "<img src=x" not in page and " style=" not in page
    assert page.count("<script") == 1 and '<script src="/board/static/board.js" defer></script>' in page


async def test_the_root_sends_a_browser_to_the_board() -> None:
    app = FastAPI()
    app.include_router(build_root_router())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://countersign.test") as client:
        response = await client.get("/")
    assert response.status_code == 303 and response.headers["location"] == "/board/"
