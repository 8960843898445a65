"""The engine's duplicate stage on corrections and rejected certificates: a corrected re-submission is not held
against the certificate it supersedes, and a certificate whose payment gate people rejected (never paid) is not what
a re-submission duplicates. Real PostgreSQL, the shipped workflow, stand-in specialists over A2A.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from psycopg import AsyncConnection

from countersign.cards.certificates import CertificateSummary, certificate_summary
from countersign.engine.construction import load_construction_set
from countersign.engine.orchestrator import EngineContext, advance
from countersign.engine.runs import close_status
from countersign.engine.workflows import shipped_handlers
from countersign.engine.workflows.certificates.duplicate_check import rejected_at_payment_gate
from countersign.engine.workflows.certificates.runs import start_payment_run
from countersign.policy import Workflow
from countersign.specialists.client import open_in_process
from tests.engine import payment_run_support as support
from tests.engine.workflow_support import approve_open_gates
from tests.support import APPROVERS, import_default_principals, post_decision

Certificate = dict[str, Any]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return support.generate(tmp_path / "construction")


async def _start(conn: AsyncConnection[Any], runtime: Any, data_dir: Path, certificate_id: str) -> str:
    await import_default_principals(conn)
    set_id = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    workflow: Workflow = runtime.workflows["certificates"]
    return await start_payment_run(
        conn,
        set_id=set_id,
        certificate_id=certificate_id,
        policy=runtime.policy,
        workflow=workflow,
        started_by="test-starter",
    )


def _context(runtime: Any, client: Any) -> EngineContext:
    return EngineContext(runtime.policy, runtime.workflows, client.call, handlers=shipped_handlers(support.retriever()))


async def _payment_gate(conn: AsyncConnection[Any], close_id: str) -> dict[str, Any]:
    gates: list[dict[str, Any]] = [g for g in (await close_status(conn, close_id))["gates"] if g["task"] == "payment"]
    return gates[-1]


async def _card(conn: AsyncConnection[Any], runtime: Any, data_dir: Path, certificate_id: str) -> CertificateSummary:
    """Run the certificate up to its payment gate and read the gate's card."""
    close_id = await _start(conn, runtime, data_dir, certificate_id)
    async with open_in_process(support.SPECIALISTS) as client:
        assert (await advance(conn, close_id, _context(runtime, client))).status == "awaiting_approval"
    gate = await _payment_gate(conn, close_id)
    async with conn.cursor() as cur:
        await cur.execute("SELECT summary FROM gate WHERE gate_id = %s", (gate["gate_id"],))
        row = await cur.fetchone()
    assert row is not None
    card = certificate_summary(row[0])
    assert card is not None
    return card


async def _decide(
    conn: AsyncConnection[Any], runtime: Any, api: Any, data_dir: Path, certificate_id: str, decision: str
) -> None:
    """Run the certificate to its payment gate and decide it (`approve` certifies it, `reject` blocks it)."""
    close_id = await _start(conn, runtime, data_dir, certificate_id)
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        assert (await advance(conn, close_id, ctx)).status == "awaiting_approval"
        if decision == "approve":
            await approve_open_gates(api, conn, close_id)
        else:
            gate = await _payment_gate(conn, close_id)
            response = await post_decision(api, gate["gate_id"], APPROVERS[gate["approver_role"]][0], "reject")
            assert response.status_code == 200, response.text
        final = await advance(conn, close_id, ctx)
    assert final.status == ("blocked" if decision == "reject" else "closed"), final.steps


def _correction_of(certificates: list[Certificate], original: Certificate, *, supersedes: bool) -> Certificate:
    """`original` sent again four days later under a new id and invoice number, naming it as superseded or not."""
    corrected = copy.deepcopy(original)
    corrected["id"] = "IPC-CORRECTED0001"
    corrected["invoice_number"] = "CORR-0001"
    day = int(original["date"][-2:])
    corrected["date"] = f"{original['date'][:-2]}{min(day + 4, 28):02d}"
    if supersedes:
        corrected["supersedes"] = original["id"]
    certificates.append(corrected)
    return corrected


def _violating_with_correction(data_dir: Path, *, supersedes: bool) -> tuple[Certificate, Certificate]:
    """Certificate 2 of the first contract overstated by 1,000.00 (held by an invariant), and its correction: the
    statement as it should have been."""
    certificates = support.read_certificates(data_dir)
    honest = copy.deepcopy(support.find(certificates, "CT-0001", 2))
    violating = support.make_violating(certificates)
    correction = _correction_of(certificates, honest, supersedes=False)
    if supersedes:
        correction["supersedes"] = violating["id"]
    support.write_certificates(data_dir, certificates)
    return violating, correction


async def test_a_correction_of_a_held_certificate_is_not_held_against_the_certificate_it_corrects(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    _violating, correction = _violating_with_correction(data_dir, supersedes=True)
    card = await _card(conn, runtime, data_dir, correction["id"])
    assert card.holds == ()
    assert [v.invariant for v in card.violations] == [], "the correction itself passes every invariant"


async def test_the_same_correction_without_its_link_is_held_as_a_duplicate(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    violating, correction = _violating_with_correction(data_dir, supersedes=False)
    card = await _card(conn, runtime, data_dir, correction["id"])
    (hold,) = card.holds
    assert hold.other.startswith(f"{violating['id']} line ")


async def test_a_resubmission_of_a_certificate_rejected_at_its_payment_gate_is_not_held(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    original = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    resubmitted = support.edited(data_dir, support.add_duplicate)
    await _decide(conn, runtime, api, data_dir, original["id"], "reject")
    set_id = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    assert await rejected_at_payment_gate(conn, set_id) == {original["id"]}
    card = await _card(conn, runtime, data_dir, resubmitted["id"])
    assert card.holds == ()


async def test_a_resubmission_of_a_certified_certificate_is_held(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    original = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    resubmitted = support.edited(data_dir, support.add_duplicate)
    await _decide(conn, runtime, api, data_dir, original["id"], "approve")
    set_id = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    assert await rejected_at_payment_gate(conn, set_id) == frozenset()
    card = await _card(conn, runtime, data_dir, resubmitted["id"])
    (hold,) = card.holds
    assert hold.other.startswith(f"{original['id']} line ")
