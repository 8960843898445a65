"""The Close Board over a payment run: a certificate that breaks an invariant, run by the real engine with the
stand-in specialists over A2A, its payment gate's reconstruction and cited clauses, and the contract's position."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path
from typing import Any

from markupsafe import escape

from countersign.engine.construction import load_construction_set
from countersign.engine.orchestrator import EngineContext, advance
from countersign.engine.runs import close_status
from countersign.engine.workflows import shipped_handlers
from countersign.engine.workflows.certificates.runs import start_payment_run
from countersign.money.formatting import format_money
from countersign.policy.wording import in_words
from countersign.specialists.client import open_in_process
from tests.board.pages_support import Board, board_fixture  # noqa: F401  (the `board` fixture)
from tests.engine import payment_run_support as support
from tests.support import import_default_principals


async def _violating_run(conn: Any, runtime: Any, data_dir: Path) -> tuple[str, dict[str, Any]]:
    certificate = support.edited(data_dir, support.make_violating)
    await import_default_principals(conn)
    set_id = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    close_id = await start_payment_run(
        conn,
        set_id=set_id,
        certificate_id=certificate["id"],
        policy=runtime.policy,
        workflow=runtime.workflows["certificates"],
        started_by="test-starter",
    )
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = EngineContext(
            runtime.policy, runtime.workflows, client.call, handlers=shipped_handlers(support.retriever())
        )
        assert (await advance(conn, close_id, ctx)).status == "awaiting_approval"
    return close_id, certificate


async def test_a_payment_gate_shows_each_broken_invariants_amounts_and_the_cited_clauses_text(
    board: Board, conn: Any, runtime: Any, tmp_path: Path
) -> None:
    close_id, certificate = await _violating_run(conn, runtime, support.generate(tmp_path / "construction"))
    (gate,) = (await close_status(conn, close_id))["gates"]
    async with conn.cursor() as cur:
        await cur.execute("SELECT summary FROM gate WHERE gate_id = %s", (gate["gate_id"],))
        row = await cur.fetchone()
    assert row is not None
    summary = row[0]["certificate"]
    currency = summary["currency"]

    def money(amount: str) -> str:
        return format_money(Decimal(amount), currency, locale=runtime.settings.locale)

    await board.look_as("erin.park")
    front = (await board.client.get("/board/")).text
    assert certificate["id"] in front and money(summary["amount_to_certify"]) in front

    page = (await board.client.get(f"/board/gates/{gate['gate_id']}")).text
    assert f"Payment certificate No. {certificate['number']}: {certificate['contract']}" in page
    assert money(summary["amount_to_certify"]) in page and money(summary["previously_certified"]) in page
    foots = next(v for v in summary["violations"] if v["invariant"] == "statement_foots")
    assert str(escape(foots["title"])) in page and str(escape(foots["explanation"])) in page
    for name, amount in foots["amounts"].items():
        assert str(escape(in_words(name))) in page and money(amount) in page, name
    corpus = {c.id: c for c in support.retriever().corpus.clauses}
    for clause in foots["clauses"]:
        assert str(escape(corpus[clause["id"]].text)) in page, clause["id"]
    assert "not in the run&#39;s retrieval set" not in page
    assert str(escape(in_words("retention_released_once"))) in page  # an invariant that held

    chart = await board.client.get(f"/board/charts/closes/{close_id}/position.svg")
    assert chart.status_code == 200 and chart.headers["content-type"].startswith("image/svg+xml")
    texts = [e.text.strip() for e in ET.fromstring(chart.content).iter() if e.text and e.text.strip()]
    assert {"Claimed gross to date", "Claimed net to date", "Certified before it", "Amount due"} <= set(texts)
    first = support.find(support.read_certificates(tmp_path / "construction"), certificate["contract"], 1)
    assert f"No. 1 {first['period']}" in texts  # the prior certificate of the same contract
    assert f"No. {certificate['number']} {certificate['period']} (held)" in texts  # this one breaks an invariant
    assert money(certificate["totals"]["amount_due"]) in texts and money(first["totals"]["amount_due"]) in texts
    assert b"<script" not in chart.content
