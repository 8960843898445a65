"""Payment runs of the `certificates` workflow, end to end through A2A specialists, gates and the signed callback.

The extraction and adjudication specialists are stand-ins served over A2A (tests/engine/payment_run_support.py);
everything else is the shipped engine, the shipped workflow file and real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection

from countersign.audit.trace import verify_chain
from countersign.cards.certificates import certificate_summary
from countersign.engine.construction import (
    ConstructionDataError,
    certificates_in_set,
    load_construction_set,
    prior_certificates,
)
from countersign.engine.lifecycle import IllegalTransition, check_transition, illegal_pairs
from countersign.engine.orchestrator import EngineContext, advance
from countersign.engine.runs import close_status
from countersign.engine.supervisor import move_task
from countersign.engine.workflows import shipped_handlers
from countersign.engine.workflows.certificates.runs import payment_run_status, start_payment_run, start_payment_runs
from countersign.engine.workflows.certificates.stages import STAGES
from countersign.policy import Workflow
from countersign.specialists.client import open_in_process
from countersign.states import Machine, TaskState
from tests.engine import payment_run_support as support
from tests.engine.lifecycle_support import cloned_database, new_close, put_task
from tests.engine.workflow_support import approve_open_gates
from tests.support import APPROVERS, count, import_default_principals, post_decision


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return support.generate(tmp_path / "construction")


def _workflow(runtime: Any) -> Workflow:
    workflow: Workflow = runtime.workflows["certificates"]
    return workflow


async def _start(conn: AsyncConnection[Any], runtime: Any, data_dir: Path, certificate_id: str) -> str:
    await import_default_principals(conn)
    set_id = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    return await start_payment_run(
        conn,
        set_id=set_id,
        certificate_id=certificate_id,
        policy=runtime.policy,
        workflow=_workflow(runtime),
        started_by="test-starter",
    )


def _context(runtime: Any, client: Any) -> EngineContext:
    return EngineContext(runtime.policy, runtime.workflows, client.call, handlers=shipped_handlers(support.retriever()))


async def _gates(conn: AsyncConnection[Any], close_id: str) -> list[dict[str, Any]]:
    gates: list[dict[str, Any]] = (await close_status(conn, close_id))["gates"]
    return gates


async def _summary(conn: AsyncConnection[Any], gate_id: str) -> dict[str, Any]:
    async with conn.cursor() as cur:
        await cur.execute("SELECT summary FROM gate WHERE gate_id = %s", (gate_id,))
        row = await cur.fetchone()
    assert row is not None
    summary: dict[str, Any] = row[0]
    return summary


async def _events(conn: AsyncConnection[Any], close_id: str, kind: str) -> list[dict[str, Any]]:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT payload FROM trace_event WHERE close_id = %s AND kind = %s ORDER BY seq", (close_id, kind)
        )
        return [row[0] for row in await cur.fetchall()]


# --- loading -----------------------------------------------------------------------------------------------------


async def test_a_bad_record_names_file_line_and_field_and_nothing_is_loaded(conn: Any, data_dir: Path) -> None:
    certificates = support.read_certificates(data_dir)
    certificates[3]["totals"]["amount_due"] = "12.5"
    support.write_certificates(data_dir, certificates)
    with pytest.raises(ConstructionDataError) as refused:
        await load_construction_set(conn, data_dir, loaded_by="test-loader")
    assert refused.value.source == "certificates.jsonl line 4"
    assert refused.value.field == "totals.amount_due"
    for table in ("construction_set", "construction_contract", "construction_certificate"):
        assert await count(conn, f"SELECT count(*) FROM {table}") == 0, table


async def test_a_bad_contract_is_refused_before_any_certificate_is_read(conn: Any, data_dir: Path) -> None:
    document = json.loads((data_dir / "contracts.json").read_text(encoding="utf-8"))
    document["contracts"][1]["retention"]["rate"] = "five percent"
    (data_dir / "contracts.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConstructionDataError) as refused:
        await load_construction_set(conn, data_dir, loaded_by="test-loader")
    assert (refused.value.source, refused.value.field) == ("contracts.json contracts[1]", "retention.rate")
    assert await count(conn, "SELECT count(*) FROM construction_contract") == 0


async def test_loading_the_same_files_twice_returns_the_same_set(conn: Any, data_dir: Path) -> None:
    first = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    again = await load_construction_set(conn, data_dir, loaded_by="someone-else")
    assert first == again
    assert await count(conn, "SELECT count(*) FROM construction_set") == 1
    assert await count(conn, "SELECT count(*) FROM construction_certificate") == support.CONTRACTS * support.MONTHS
    in_month = await certificates_in_set(conn, first, period="2025-02")
    assert [c.number for c in in_month] == [2] * support.CONTRACTS
    earlier = await prior_certificates(conn, first, in_month[0].certificate_id)
    assert [c.period for c in earlier] == ["2025-01"] * support.CONTRACTS


# --- runs --------------------------------------------------------------------------------------------------------


async def test_a_clean_certificate_is_certified_once_through_its_approved_payment_gate(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    certificate = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    assert certificate["id"] not in support.faulted_ids(data_dir)
    close_id = await _start(conn, runtime, data_dir, certificate["id"])
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        first = await advance(conn, close_id, ctx)
        assert first.status == "awaiting_approval", first.steps
        (gate,) = await _gates(conn, close_id)
        assert (gate["task"], gate["kind"], gate["tier"]) == ("payment", "approval", "medium")
        summary = await _summary(conn, gate["gate_id"])
        card = certificate_summary(summary)
        assert card is not None
        assert card.amount_to_certify == Decimal(certificate["totals"]["amount_due"])
        assert (card.violations, card.holds, card.escalation) == ((), (), None)
        assert await count(conn, "SELECT count(*) FROM payment_certification") == 0

        await approve_open_gates(api, conn, close_id)
        final = await advance(conn, close_id, ctx)
        assert final.status == "closed", final.steps
        assert (await advance(conn, close_id, ctx)).status == "closed"
    async with conn.cursor() as cur:
        await cur.execute("SELECT certificate_id, close_id::text, gate_id::text, amount FROM payment_certification")
        rows = await cur.fetchall()
    assert rows == [(certificate["id"], close_id, gate["gate_id"], Decimal(certificate["totals"]["amount_due"]))]
    (certified,) = await _events(conn, close_id, "certificate_certified")
    assert certified["amount"] == certificate["totals"]["amount_due"]
    (cited,) = await _events(conn, close_id, "clauses_cited")
    assert cited["corpus_version"] == support.retriever().corpus.version
    assert {c["sha256"] for c in cited["clauses"]} <= {c.sha256 for c in support.retriever().corpus.clauses}
    assert (await verify_chain(conn)).ok
    (status,) = await payment_run_status(conn, period=certificate["period"])
    assert (status["certificate_id"], status["certified"], status["stage"]) == (certificate["id"], True, "done")


async def test_a_rejected_payment_gate_certifies_nothing(conn: Any, runtime: Any, api: Any, data_dir: Path) -> None:
    certificate = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    close_id = await _start(conn, runtime, data_dir, certificate["id"])
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        await advance(conn, close_id, ctx)
        (gate,) = await _gates(conn, close_id)
        response = await post_decision(api, gate["gate_id"], APPROVERS[gate["approver_role"]][0], "reject")
        assert response.status_code == 200, response.text
        final = await advance(conn, close_id, ctx)
    assert final.status == "blocked", final.steps
    assert await count(conn, "SELECT count(*) FROM payment_certification") == 0
    assert await _events(conn, close_id, "certificate_certified") == []


async def test_a_violating_certificate_is_gated_at_the_findings_tier_with_its_violations(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    certificate = support.edited(data_dir, support.make_violating)
    close_id = await _start(conn, runtime, data_dir, certificate["id"])
    async with open_in_process(support.SPECIALISTS) as client:
        assert (await advance(conn, close_id, _context(runtime, client))).status == "awaiting_approval"
    (gate,) = await _gates(conn, close_id)
    assert (gate["task"], gate["tier"]) == ("payment", runtime.policy.findings_tier)
    assert "finding" in gate["rule"]
    card = certificate_summary(await _summary(conn, gate["gate_id"]))
    assert card is not None
    assert "statement_foots" in {v.invariant for v in card.violations}
    foots = next(v for v in card.violations if v.invariant == "statement_foots")
    assert foots.clauses and all(c.id.startswith("CS") for c in foots.clauses)
    claimed = Decimal(certificate["totals"]["amount_due"])
    assert card.claimed_amount == claimed  # shown, not certified
    assert (card.amount_to_certify, card.basis) == (claimed - 1000, "reconstructed")  # what approval would certify
    (status,) = await payment_run_status(conn, period=certificate["period"])
    assert status["gate"] == {"tier": runtime.policy.findings_tier, "status": "open"}
    assert status["certified"] is False


async def test_a_resubmitted_certificate_is_held_naming_the_other_line(conn: Any, runtime: Any, data_dir: Path) -> None:
    original = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    duplicate = support.edited(data_dir, support.add_duplicate)
    close_id = await _start(conn, runtime, data_dir, duplicate["id"])
    async with open_in_process(support.SPECIALISTS) as client:
        assert (await advance(conn, close_id, _context(runtime, client))).status == "awaiting_approval"
    (gate,) = await _gates(conn, close_id)
    assert gate["tier"] == runtime.policy.findings_tier
    assert "finding" in gate["rule"]
    card = certificate_summary(await _summary(conn, gate["gate_id"]))
    assert card is not None
    (hold,) = card.holds
    assert hold.other.startswith(f"{original['id']} line ")
    assert hold.overlap > 0


async def test_hostile_text_escalates_to_the_cfo_and_the_rerun_reaches_a_payment_gate_marked_as_such(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    certificate = support.edited(data_dir, support.make_hostile)
    close_id = await _start(conn, runtime, data_dir, certificate["id"])
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        halted = await advance(conn, close_id, ctx)
        assert halted.status == "halted", halted.steps
        (escalation,) = await _gates(conn, close_id)
        assert (escalation["task"], escalation["kind"], escalation["approver_role"]) == (
            "extraction",
            "escalation",
            "cfo",
        )
        assert (await _summary(conn, escalation["gate_id"]))["escalation"] == "suspected_injection"

        for _ in range(3):  # the escalation, then the re-run's own human gate, then the payment gate appears
            await approve_open_gates(api, conn, close_id, tasks={"extraction"})
            report = await advance(conn, close_id, ctx)
            if any(g["task"] == "payment" for g in await _gates(conn, close_id)):
                break
        assert report.status == "awaiting_approval", report.steps
    payment = next(g for g in await _gates(conn, close_id) if g["task"] == "payment")
    card = certificate_summary(await _summary(conn, payment["gate_id"]))
    assert card is not None
    assert card.escalation == "suspected_injection"
    assert card.amount_to_certify == Decimal(certificate["totals"]["amount_due"])
    (status,) = await payment_run_status(conn, period=certificate["period"])
    assert status["escalation"] == "suspected_injection"


async def test_without_a_clause_corpus_clause_retrieval_escalates_a_missing_parameter(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    certificate = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    close_id = await _start(conn, runtime, data_dir, certificate["id"])
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = EngineContext(runtime.policy, runtime.workflows, client.call, handlers=shipped_handlers())
        assert (await advance(conn, close_id, ctx)).status == "halted"
    (gate,) = await _gates(conn, close_id)
    assert (gate["task"], gate["kind"]) == ("clause_retrieval", "escalation")
    summary = await _summary(conn, gate["gate_id"])
    assert (summary["escalation"], summary["reason"]) == ("missing_parameter", "no clause corpus configured")


async def test_start_payment_runs_starts_one_run_per_certificate_of_the_month_in_submission_order(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    await import_default_principals(conn)
    set_id = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    close_ids = await start_payment_runs(
        conn, set_id=set_id, period="2025-06", policy=runtime.policy, workflow=_workflow(runtime), started_by="t"
    )
    expected = [c.certificate_id for c in await certificates_in_set(conn, set_id, period="2025-06")]
    rows = await payment_run_status(conn, set_id=set_id, period="2025-06")
    assert [r["close_id"] for r in rows] == close_ids
    assert [r["certificate_id"] for r in rows] == expected
    assert {(r["stage"], r["certified"], r["amount_to_certify"]) for r in rows} == {("intake", False, None)}


# --- the database's guarantees -----------------------------------------------------------------------------------


async def _engine_role(runtime: Any) -> AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(runtime.database.engine_url, autocommit=True)


async def test_the_engine_role_cannot_certify_without_the_applied_approved_gate_or_for_another_amount(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    certificate = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    close_id = await _start(conn, runtime, data_dir, certificate["id"])
    async with open_in_process(support.SPECIALISTS) as client:
        await advance(conn, close_id, _context(runtime, client))
    (gate,) = await _gates(conn, close_id)
    amount = Decimal(certificate["totals"]["amount_due"])
    insert = (
        "INSERT INTO payment_certification (certificate_id, set_id, close_id, gate_id, amount, currency)"
        " SELECT %s, (b.manifest->>'construction_set_id')::bigint, r.close_id, %s, %s, 'GBP'"
        " FROM close_run r JOIN book_set b USING (book_set_id) WHERE r.close_id = %s"
    )
    engine = await _engine_role(runtime)
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="no applied, approved payment gate"):
            await engine.execute(insert, (certificate["id"], gate["gate_id"], amount, close_id))
        await approve_open_gates(api, conn, close_id)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="no applied, approved payment gate"):
            await engine.execute(insert, (certificate["id"], gate["gate_id"], amount, close_id))
        async with engine.transaction(force_rollback=True):  # the engine marks the decided gate applied
            await engine.execute("UPDATE gate SET lifecycle = 'applied' WHERE gate_id = %s", (gate["gate_id"],))
            async with engine.transaction(force_rollback=True):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not the amount the approvers saw"):
                    await engine.execute(insert, (certificate["id"], gate["gate_id"], amount + 1, close_id))
            await engine.execute(insert, (certificate["id"], gate["gate_id"], amount, close_id))  # the control
    finally:
        await engine.close()
    assert await count(conn, "SELECT count(*) FROM payment_certification") == 0


async def test_a_certification_names_the_certificate_its_gate_was_opened_for(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    """The reproduced attack: with a controller's approval on one run's payment gate, the engine role changed the
    run's entity to a held duplicate's id, certified it, and changed it back; the same trick certified an id of no
    construction set. The run's entity cannot move now, and the certification must name the gate's own subject."""
    certificates = support.read_certificates(data_dir)
    certificate = support.find(certificates, "CT-0001", 1)
    other = support.find(certificates, "CT-0001", 2)
    close_id = await _start(conn, runtime, data_dir, certificate["id"])
    async with open_in_process(support.SPECIALISTS) as client:
        await advance(conn, close_id, _context(runtime, client))
    (gate,) = await _gates(conn, close_id)
    await approve_open_gates(api, conn, close_id)
    amount = Decimal(certificate["totals"]["amount_due"])
    set_row = (
        "(SELECT (b.manifest->>'construction_set_id')::bigint FROM close_run r JOIN book_set b USING (book_set_id)"
    )
    insert = (
        "INSERT INTO payment_certification (certificate_id, set_id, close_id, gate_id, amount, currency)"
        f" VALUES (%s, {set_row} WHERE r.close_id = %s), %s, %s, %s, 'GBP')"
    )
    engine = await _engine_role(runtime)
    try:
        async with engine.transaction(force_rollback=True):
            await engine.execute("UPDATE gate SET lifecycle = 'applied' WHERE gate_id = %s", (gate["gate_id"],))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                async with engine.transaction():
                    await engine.execute(
                        "UPDATE close_run SET entity = %s WHERE close_id = %s", (other["id"], close_id)
                    )
            for wrong in (other["id"], "IPC-IN-NO-SET", certificate["id"].lower(), certificate["id"] + " "):
                with pytest.raises(
                    (psycopg.errors.InsufficientPrivilege, psycopg.errors.ForeignKeyViolation),
                    match=r"was opened for certificate|not present",
                ):
                    async with engine.transaction():
                        await engine.execute(insert, (wrong, close_id, close_id, gate["gate_id"], amount))
            await engine.execute(insert, (certificate["id"], close_id, close_id, gate["gate_id"], amount))  # control
    finally:
        await engine.close()


async def test_a_look_alike_of_a_certified_id_is_refused_in_canonical_form(conn: Any, data_dir: Path) -> None:
    """Case and white space folded: `ipc-…` or `IPC-… ` is the certificate already certified, not a new one."""
    await load_construction_set(conn, data_dir, loaded_by="test-loader")
    async with conn.cursor() as cur:
        await cur.execute("SELECT set_id, certificate_id FROM construction_certificate ORDER BY 1, 2 LIMIT 1")
        row = await cur.fetchone()
    assert row is not None
    set_id, certificate_id = row
    # Past the admission trigger (as the owner, test set-up): only the canonical unique key is under test here.
    await conn.execute("ALTER TABLE payment_certification DISABLE TRIGGER payment_certification_admitted")
    insert = (
        "INSERT INTO payment_certification (certificate_id, set_id, close_id, gate_id, amount, currency,"
        " certified_by_gate_at) VALUES (%s, %s, gen_random_uuid(), gen_random_uuid(), 1, 'GBP', now())"
    )
    await conn.execute("ALTER TABLE payment_certification DROP CONSTRAINT payment_certification_close_id_fkey")
    await conn.execute("ALTER TABLE payment_certification DROP CONSTRAINT payment_certification_gate_id_fkey")
    await conn.execute("ALTER TABLE payment_certification DROP CONSTRAINT payment_certification_certificate")
    await conn.execute(insert, (certificate_id, set_id))
    for look_alike in (certificate_id.lower(), f" {certificate_id}", certificate_id.replace("-", "- ", 1)):
        with pytest.raises(psycopg.errors.UniqueViolation, match="payment_certification_canonical_id"):
            await conn.execute(insert, (look_alike, set_id))


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE construction_certificate SET doc = '{}'",
        "DELETE FROM construction_certificate",
        "UPDATE construction_contract SET form = 'CSX'",
        "DELETE FROM construction_set",
        "TRUNCATE construction_certificate, payment_certification, payment_notice, certified_accrual,"
        " payee_default_notice",
        "TRUNCATE payment_notice, payee_default_notice",
    ],
)
async def test_loaded_evidence_cannot_be_changed_by_the_engine_role_or_the_owner(
    conn: Any, runtime: Any, data_dir: Path, statement: str
) -> None:
    await load_construction_set(conn, data_dir, loaded_by="test-loader")
    engine = await _engine_role(runtime)
    try:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await engine.execute(statement)
    finally:
        await engine.close()
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
        await conn.execute(statement)  # the owner too: the triggers are enabled ALWAYS
    assert await count(conn, "SELECT count(*) FROM construction_certificate") == support.CONTRACTS * support.MONTHS


# --- the task machine on this workflow's tasks -------------------------------------------------------------------

ILLEGAL = illegal_pairs(Machine.TASK)


@pytest.fixture(scope="module")
def task_rows_in_every_state(pg_server_url: str, template_url: str) -> Iterator[dict[str, Any]]:
    """One close per task state, each holding every stage of the workflow in that state."""
    with cloned_database(pg_server_url, template_url) as database, database.connect(autocommit=True) as owner:
        closes = {}
        for state in TaskState:
            closes[state.value] = new_close(owner)
            for stage in STAGES:
                escalation = "suspected_injection" if state is TaskState.HALTED else None
                put_task(owner, closes[state.value], stage, state, escalation=escalation)
        yield {"database": database, "closes": closes}


@pytest.mark.parametrize("pair", ILLEGAL, ids=[f"{s}->{t}" for s, t in ILLEGAL])
def test_an_illegal_move_of_a_payment_stage_raises(
    task_rows_in_every_state: dict[str, Any], pair: tuple[str, str]
) -> None:
    source, target = pair
    with pytest.raises(IllegalTransition):
        check_transition(Machine.TASK, source, target)
    close_id = task_rows_in_every_state["closes"][source]
    url = task_rows_in_every_state["database"].engine_url

    async def moves() -> None:
        engine = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            for stage in STAGES:
                with pytest.raises(IllegalTransition):
                    await move_task(engine, close_id, stage, TaskState(target), expect=(TaskState(source),))
                with pytest.raises(psycopg.errors.CheckViolation, match=f"cannot go from {source} to {target}"):
                    async with engine.transaction(force_rollback=True):
                        await engine.execute(
                            "UPDATE close_task SET status = %s WHERE close_id = %s AND task = %s",
                            (target, close_id, stage),
                        )
        finally:
            await engine.close()

    asyncio.run(moves())
