"""Approve with edits on the Close Board over HTTP, with a software authenticator in place of the person's device: the
gate page offers a quantity surveyor (only) the amend form; the passkey signs the decision message carrying the
amendment's digest; the amendment sent back must be the one signed; the page then shows both sums (issue 35)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from countersign.bootstrap.app import create_app
from countersign.bootstrap.runtime import Runtime
from countersign.certificates.amendment import Amendment
from countersign.money.formatting import format_money
from countersign.states import GateStatus
from tests.board.test_passkey_ceremonies import BOARD, Person, _enrol, _sign_in
from tests.engine import payment_run_support as support
from tests.engine.workflows.test_approve_with_edits import QS, REASON, _amendment, _open_payment_gate
from tests.support import count


@pytest_asyncio.fixture
async def board_app(runtime: Runtime) -> AsyncIterator[Any]:
    rt = replace(runtime, settings=runtime.settings.model_copy(update={"board_url": BOARD}))
    app = create_app(rt)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return support.generate(tmp_path / "construction")


def _wire(amendment: Amendment) -> dict[str, Any]:
    return {
        "currency": amendment.currency,
        "proposed": str(amendment.proposed),
        "certified": str(amendment.certified),
        "lines": [
            {
                "line": a.line,
                "proposed": f"{Decimal(a.proposed_minor) / 100:.2f}",
                "certified": f"{Decimal(a.certified_minor) / 100:.2f}",
                "reason": a.reason,
            }
            for a in amendment.adjustments
        ],
    }


async def _begin(person: Person, gate_id: str, amendment: dict[str, Any]) -> Any:
    begun = await person.client.post(
        f"/board/gates/{gate_id}/decision/options",
        json={"decision": "approve", "reason": REASON, "amendment": amendment},
        headers={"x-csrf-token": person.csrf},
    )
    return begun


async def test_a_quantity_surveyor_approves_with_edits_on_the_board_signed_with_their_passkey(
    conn: Any, board_app: Any, runtime: Runtime, data_dir: Path
) -> None:
    _, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    gate_id = gate["gate_id"]
    claimed = Decimal(certificate["totals"]["amount_due"])
    amendment = _amendment(claimed)
    surveyor = await _enrol(conn, board_app, QS)
    other = await _enrol(conn, board_app, "bob.osei")
    assert (await _sign_in(surveyor)).status_code == 200 and (await _sign_in(other)).status_code == 200

    page = await surveyor.client.get(f"/board/gates/{gate_id}")
    assert page.status_code == 200 and "Approve with edits and sign" in page.text
    assert "Certify another sum (quantity surveyor)" in page.text
    not_qs = await other.client.get(f"/board/gates/{gate_id}")
    assert "Approve and sign" in not_qs.text and "Approve with edits and sign" not in not_qs.text

    # A line that does not add up is refused naming the field, before anything is signed.
    wrong = _wire(amendment)
    wrong["lines"][0]["certified"] = "1.00"
    refused = await _begin(surveyor, gate_id, wrong)
    assert (refused.status_code, refused.json()["field"]) == (400, "amendment.lines"), refused.text
    assert "add up to" in refused.json()["error"]

    begun = await _begin(surveyor, gate_id, _wire(amendment))
    assert begun.status_code == 200, begun.text
    assert begun.json()["message"]["amendment_digest"] == amendment.digest()
    assertion = surveyor.device.assert_(begun.json()["options"])
    # The amendment sent with the signature must be the one signed: another sum is refused, and nothing is written.
    swapped = _wire(_amendment(claimed, certified_off=Decimal("2000.00")))
    done = await surveyor.client.post(
        f"/board/gates/{gate_id}/decision",
        json={"response": assertion, "amendment": swapped},
        headers={"x-csrf-token": surveyor.csrf},
    )
    assert done.status_code == 409 and "not the one your passkey signed" in done.text, done.text
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0

    begun = await _begin(surveyor, gate_id, _wire(amendment))
    assertion = surveyor.device.assert_(begun.json()["options"])
    done = await surveyor.client.post(
        f"/board/gates/{gate_id}/decision",
        json={"response": assertion, "amendment": _wire(amendment)},
        headers={"x-csrf-token": surveyor.csrf},
    )
    assert done.status_code == 200, done.text
    assert done.json()["status"] == GateStatus.APPROVED
    row = await (
        await conn.execute("SELECT channel, certified_minor, proof->>'amendment_digest' FROM gate_decision")
    ).fetchone()
    assert row == ("board", amendment.certified_minor, amendment.digest())

    shown = await surveyor.client.get(f"/board/gates/{gate_id}")
    certified, proposed = format_money(claimed - 1500, "GBP"), format_money(claimed - 1000, "GBP")
    assert f"Certified {certified} (proposed {proposed}): {REASON}" in shown.text.replace("&#39;", "'"), json.dumps(
        shown.text[-3000:]
    )
