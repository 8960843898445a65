"""The decision writer and an approval with edits: a replay is a no-op, the same nonce with another amendment is a
conflict, and a row the database's amendment check refuses is a refusal in words (issue 35)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from countersign.callbacks import decision_writer
from tests.engine import payment_run_support as support
from tests.engine.workflows.test_approve_with_edits import (
    _amendment,
    _body,
    _open_payment_gate,
    _post,
)
from tests.support import count


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return support.generate(tmp_path / "construction")


async def test_a_replayed_amended_approval_records_once_and_another_amendment_under_its_nonce_conflicts(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    _, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    gate_id, claimed = gate["gate_id"], Decimal(certificate["totals"]["amount_due"])
    body = _body(gate_id, _amendment(claimed))
    first = await _post(api, gate_id, body)
    assert first.status_code == 200 and first.json()["recorded"] is True, first.text
    again = await _post(api, gate_id, body)
    assert again.status_code == 200 and again.json()["recorded"] is False, again.text
    other = json.loads(_body(gate_id, _amendment(claimed, certified_off=Decimal("2000.00"))))
    other["nonce"] = json.loads(body)["nonce"]
    conflict = await _post(api, gate_id, json.dumps(other).encode())
    assert conflict.status_code == 409, conflict.text


async def test_past_the_writers_own_check_the_database_refuses_an_amendment_above_the_claim_in_words(
    conn: Any, runtime: Any, api: Any, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the writer's bound check switched off, the database's amendment check still refuses the row, and the
    writer answers with its words (403 `refused_by_database`), never a server error."""
    monkeypatch.setattr(decision_writer, "check_against", lambda *args, **kwargs: None)
    _, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    gate_id, claimed = gate["gate_id"], Decimal(certificate["totals"]["amount_due"])
    above = await _post(api, gate_id, _body(gate_id, _amendment(claimed, certified_off=Decimal("-0.01"))))
    assert (above.status_code, above.json()["error"]) == (403, "refused_by_database"), above.text
    assert "between zero and the claim" in above.json()["detail"]
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
