"""Certified means certified: "previously certified" is what people certified, a QS may certify the reconstructed sum,
and a rejection or a reduced certification serves the pay-less notice the law requires, before its deadline.

Real PostgreSQL, the shipped engine and workflow, stand-in specialists over A2A, decisions over the signed callback.
The raw-SQL attacks at the end run as the engine's own database role.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection

from countersign.cards.certificates import certificate_summary
from countersign.certificates.model import PaymentTerms
from countersign.certificates.payment_notices import payment_dates
from countersign.delivery.worker import notice_text
from countersign.engine.construction import load_construction_set
from countersign.engine.orchestrator import EngineContext, advance
from countersign.engine.outbox import ChannelTarget, OutboxMessage
from countersign.engine.runs import close_status
from countersign.engine.workflows import shipped_handlers
from countersign.engine.workflows.certificates.runs import start_payment_run
from countersign.specialists.client import open_in_process
from tests.engine import payment_run_support as support
from tests.engine.workflow_support import approve_open_gates
from tests.support import APPROVERS, count, import_default_principals, post_decision

CHANNEL = ChannelTarget("slack", "C0PAYMENTS")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return support.generate(tmp_path / "construction")


def _context(runtime: Any, client: Any) -> EngineContext:
    return EngineContext(
        runtime.policy,
        runtime.workflows,
        client.call,
        handlers=shipped_handlers(support.retriever()),
        channels=(CHANNEL,),
    )


async def _load(conn: AsyncConnection[Any], data_dir: Path) -> int:
    await import_default_principals(conn)
    return await load_construction_set(conn, data_dir, loaded_by="test-loader")


async def _start(conn: AsyncConnection[Any], runtime: Any, set_id: int, certificate_id: str) -> str:
    return await start_payment_run(
        conn,
        set_id=set_id,
        certificate_id=certificate_id,
        policy=runtime.policy,
        workflow=runtime.workflows["certificates"],
        started_by="test-starter",
    )


async def _payment_gate(conn: AsyncConnection[Any], close_id: str) -> dict[str, Any]:
    (gate,) = [g for g in (await close_status(conn, close_id))["gates"] if g["task"] == "payment"]
    return gate


async def _card(conn: AsyncConnection[Any], gate_id: str) -> Any:
    async with conn.cursor() as cur:
        await cur.execute("SELECT summary FROM gate WHERE gate_id = %s", (gate_id,))
        row = await cur.fetchone()
    assert row is not None
    card = certificate_summary(row[0])
    assert card is not None
    return card


async def _reject(api: Any, gate: dict[str, Any]) -> None:
    response = await post_decision(api, gate["gate_id"], APPROVERS[gate["approver_role"]][0], "reject")
    assert response.status_code == 200, response.text


async def _rows(conn: AsyncConnection[Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    async with conn.cursor() as cur:
        await cur.execute(sql, args)
        return await cur.fetchall()


def _inflate_first(certificates: list[dict[str, Any]]) -> dict[str, Any]:
    """Certificate 1 of CT-0001 claims 1,000.00 more than its statement adds up to."""
    chosen = support.find(certificates, "CT-0001", 1)
    chosen["totals"]["amount_due"] = f"{Decimal(chosen['totals']['amount_due']) + 1000:.2f}"
    return chosen


# --- previously certified is what was certified --------------------------------------------------------------------


async def test_a_certificate_rejected_at_its_gate_does_not_count_as_previously_certified(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    certificates = support.read_certificates(data_dir)
    first, second = support.find(certificates, "CT-0001", 1), support.find(certificates, "CT-0001", 2)
    assert not {first["id"], second["id"]} & support.faulted_ids(data_dir)
    set_id = await _load(conn, data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        rejected = await _start(conn, runtime, set_id, first["id"])
        await advance(conn, rejected, ctx)
        await _reject(api, await _payment_gate(conn, rejected))
        assert (await advance(conn, rejected, ctx)).status == "blocked"

        later = await _start(conn, runtime, set_id, second["id"])
        assert (await advance(conn, later, ctx)).status == "awaiting_approval"
    card = await _card(conn, (await _payment_gate(conn, later))["gate_id"])
    assert card.previously_certified == 0  # nothing was certified before it
    assert card.previously_certified_reconstructed == Decimal(first["totals"]["net_to_date"])  # shown beside it
    assert "previously_certified_carried_forward" in {v.invariant for v in card.violations}


async def test_the_reconstructed_sum_is_certified_recorded_as_chosen_and_carried_into_the_next_certificate(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    first = support.edited(data_dir, _inflate_first)
    second = support.find(support.read_certificates(data_dir), "CT-0001", 2)
    claimed = Decimal(first["totals"]["amount_due"])
    set_id = await _load(conn, data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        close_id = await _start(conn, runtime, set_id, first["id"])
        assert (await advance(conn, close_id, ctx)).status == "awaiting_approval"
        gate = await _payment_gate(conn, close_id)
        card = await _card(conn, gate["gate_id"])
        assert (card.claimed_amount, card.amount_to_certify, card.basis) == (claimed, claimed - 1000, "reconstructed")
        assert card.corrections and sum(c.amount for c in card.corrections) == 1000
        await approve_open_gates(api, conn, close_id)
        final = await advance(conn, close_id, ctx)
        assert final.status == "closed", final.steps

        rows = await _rows(
            conn,
            "SELECT amount, claimed_amount, basis, difference FROM payment_certification WHERE close_id = %s",
            close_id,
        )
        assert rows == [(claimed - 1000, claimed, "reconstructed", Decimal("1000.00"))]

        later = await _start(conn, runtime, set_id, second["id"])
        assert (await advance(conn, later, ctx)).status == "awaiting_approval"
    card = await _card(conn, (await _payment_gate(conn, later))["gate_id"])
    assert card.previously_certified == claimed - 1000
    assert "previously_certified_carried_forward" not in {v.invariant for v in card.violations}


# --- pay-less notices ----------------------------------------------------------------------------------------------


async def test_a_reduced_certification_serves_a_pay_less_notice_before_its_deadline_and_posts_it(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    first = support.edited(data_dir, _inflate_first)
    claimed = Decimal(first["totals"]["amount_due"])
    set_id = await _load(conn, data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        close_id = await _start(conn, runtime, set_id, first["id"])
        await advance(conn, close_id, ctx)
        await approve_open_gates(api, conn, close_id)
        await advance(conn, close_id, ctx)

    (notice,) = await _rows(
        conn,
        "SELECT notice_id, notified_sum, sum_to_pay, deadline, served_in_time, document, sha256 FROM payment_notice"
        " WHERE kind = 'pay_less'",
    )
    notice_id, notified, to_pay, deadline, in_time, document, sha = notice
    today = datetime.now(UTC).date()
    expected = payment_dates(PaymentTerms(), valuation_date=date.fromisoformat(first["date"]), received_on=today)
    assert (notified, to_pay, deadline, in_time) == (claimed, claimed - 1000, expected.pay_less_notice_by, True)
    assert sha == hashlib.sha256(document.encode("utf-8")).hexdigest()
    assert "PAY LESS NOTICE" in document and "GBP" in document and "Statement foots" in document

    (event,) = [
        row[0] for row in await _rows(conn, "SELECT payload FROM trace_event WHERE kind = 'pay_less_notice_served'")
    ]
    assert (event["notice_id"], event["sha256"], event["served_in_time"]) == (notice_id, sha, True)

    posted = await _rows(
        conn,
        "SELECT message_id, dedupe_key, close_id::text, gate_id::text, platform, channel, kind, payload, attempts,"
        " template FROM outbox_message WHERE template = 'pay_less_notice'",
    )
    assert len(posted) == 1
    message = OutboxMessage(*posted[0])
    assert (message.platform, message.channel, message.payload) == ("slack", "C0PAYMENTS", {"notice_id": notice_id})
    text = await notice_text(conn, message, "http://localhost:8000")
    assert "Pay-less notice for certificate" in text and "given in time" in text and "PAY LESS NOTICE" in text

    # The payment notice (s. 110A) beside it: the sum certified, its basis, due five days after the due date.
    ((pay_due, pay_deadline, pay_document),) = await _rows(
        conn, "SELECT sum_to_pay, deadline, document FROM payment_notice WHERE kind = 'payment'"
    )
    assert (pay_due, pay_deadline) == (claimed - 1000, expected.payment_notice_by)
    assert "PAYMENT NOTICE" in pay_document and "s. 110A" in pay_document and "Statement foots" in pay_document


async def test_a_rejection_serves_a_pay_less_notice_for_nothing_naming_each_finding(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    first = support.edited(data_dir, _inflate_first)
    set_id = await _load(conn, data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        close_id = await _start(conn, runtime, set_id, first["id"])
        await advance(conn, close_id, ctx)
        await _reject(api, await _payment_gate(conn, close_id))
        report = await advance(conn, close_id, ctx)
    assert report.status == "blocked"
    assert any("pay-less notice" in step for step in report.steps), report.steps
    notices = await _rows(conn, "SELECT kind, sum_to_pay, notified_sum, document FROM payment_notice ORDER BY kind")
    assert [(kind, to_pay, notified) for kind, to_pay, notified, _ in notices] == [
        ("pay_less", 0, Decimal(first["totals"]["amount_due"])),
        ("payment", 0, Decimal(first["totals"]["amount_due"])),  # s. 110A: nothing is due, and why
    ]
    for *_, document in notices:
        assert "Statement foots" in document and "Amount due" in document
    assert await count(conn, "SELECT count(*) FROM payment_certification") == 0


async def test_a_clean_certificate_certified_at_its_claim_serves_its_payment_notice_and_no_pay_less_notice(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    first = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    set_id = await _load(conn, data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        close_id = await _start(conn, runtime, set_id, first["id"])
        await advance(conn, close_id, ctx)
        await approve_open_gates(api, conn, close_id)
        assert (await advance(conn, close_id, ctx)).status == "closed"
    rows = await _rows(conn, "SELECT basis, difference FROM payment_certification")
    assert rows == [("claimed", Decimal("0.00"))]
    ((kind, notified, to_pay, deadline, in_time, document, notice_id),) = await _rows(
        conn,
        "SELECT kind, notified_sum, sum_to_pay, deadline, served_in_time, document, notice_id FROM payment_notice",
    )
    claim = Decimal(first["totals"]["amount_due"])
    expected = payment_dates(
        PaymentTerms(), valuation_date=date.fromisoformat(first["date"]), received_on=datetime.now(UTC).date()
    )
    assert (kind, notified, to_pay, deadline, in_time) == ("payment", claim, claim, expected.payment_notice_by, True)
    assert "PAYMENT NOTICE" in document and "No deduction: the sum applied for is the sum due." in document
    ((event,),) = await _rows(conn, "SELECT payload FROM trace_event WHERE kind = 'payment_notice_served'")
    assert (event["notice_id"], event["sum_to_pay"]) == (notice_id, f"{claim:.2f}")
    posted = await _rows(
        conn,
        "SELECT message_id, dedupe_key, close_id::text, gate_id::text, platform, channel, kind, payload, attempts,"
        " template FROM outbox_message WHERE template = 'payment_notice'",
    )
    text = await notice_text(conn, OutboxMessage(*posted[0]), "http://localhost:8000")
    assert len(posted) == 1 and "Payment notice for certificate" in text and "PAYMENT NOTICE" in text


# --- the database admits notices only against the gate's outcome (attacks as the engine role) --------------------


async def _decided(
    conn: AsyncConnection[Any], runtime: Any, api: Any, data_dir: Path, *, reject: bool
) -> tuple[str, str, dict[str, Any]]:
    """(close id, payment gate id, certificate) of a run whose payment gate is decided, not yet applied."""
    first = support.edited(data_dir, _inflate_first)
    set_id = await _load(conn, data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        close_id = await _start(conn, runtime, set_id, first["id"])
        await advance(conn, close_id, _context(runtime, client))
    gate = await _payment_gate(conn, close_id)
    if reject:
        await _reject(api, gate)
    return close_id, gate["gate_id"], first


_NOTICE = (
    "INSERT INTO payment_notice (kind, set_id, certificate_id, close_id, gate_id, currency, notified_sum, sum_to_pay,"
    " basis, document, sha256, due_date, final_date, deadline, served_in_time)"
    " SELECT 'pay_less', set_id, %(cert)s, %(close)s, %(gate)s, 'GBP', %(notified)s, %(pay)s, '[]', %(doc)s,"
    " %(sha)s, '2099-01-01', '2099-01-01', '2099-01-01', true"
    " FROM construction_certificate WHERE certificate_id = %(cert)s"
)


def _notice_args(
    close_id: str, gate_id: str, certificate: dict[str, Any], pay: str, doc: str = "notice"
) -> dict[str, Any]:
    return {
        "cert": certificate["id"],
        "close": close_id,
        "gate": gate_id,
        "notified": certificate["totals"]["amount_due"],
        "pay": pay,
        "doc": doc,
        "sha": hashlib.sha256(doc.encode()).hexdigest(),
    }


async def test_the_engine_role_cannot_serve_a_notice_on_an_undecided_gate(
    conn: Any, database: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    close_id, gate_id, certificate = await _decided(conn, runtime, api, data_dir, reject=False)
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not decided"):
            await engine.execute(_NOTICE, _notice_args(close_id, gate_id, certificate, "0"))


async def test_the_engine_role_cannot_pay_anything_on_a_rejected_gate_nor_forge_the_digest_or_the_deadline(
    conn: Any, database: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    close_id, gate_id, certificate = await _decided(conn, runtime, api, data_dir, reject=True)
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="sum to be paid is nothing"):
            await engine.execute(_NOTICE, _notice_args(close_id, gate_id, certificate, "10.00"))
        forged = _notice_args(close_id, gate_id, certificate, "0") | {"sha": "0" * 64}
        with pytest.raises(psycopg.errors.CheckViolation, match="digest"):
            await engine.execute(_NOTICE, forged)
        await engine.execute(_NOTICE, _notice_args(close_id, gate_id, certificate, "0"))
        ((deadline, final),) = await _rows(engine, "SELECT deadline, final_date FROM payment_notice")
        assert deadline < date(2099, 1, 1) and final < date(2099, 1, 1)  # computed from the rows, not supplied
        for statement in ("UPDATE payment_notice SET sum_to_pay = 1", "DELETE FROM payment_notice"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                await engine.execute(statement)


async def test_the_engine_role_cannot_serve_a_payment_notice_for_another_sum_than_the_gate_decided(
    conn: Any, database: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    """s. 110A's notice states the sum decided: nothing on a rejected gate; the database takes its deadline itself."""
    close_id, gate_id, certificate = await _decided(conn, runtime, api, data_dir, reject=True)
    payment = _NOTICE.replace("SELECT 'pay_less'", "SELECT 'payment'")
    async with await AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            await callbacks.execute(payment, _notice_args(close_id, gate_id, certificate, "0"))  # the doors' role
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="sum to be paid is nothing"):
            await engine.execute(payment, _notice_args(close_id, gate_id, certificate, "10.00"))
        await engine.execute(payment, _notice_args(close_id, gate_id, certificate, "0"))
        ((due, deadline),) = await _rows(engine, "SELECT due_date, deadline FROM payment_notice WHERE kind = 'payment'")
        assert deadline == due + timedelta(days=5)  # the Scheme's five days after the due date, not the caller's
        with pytest.raises(psycopg.errors.UniqueViolation):
            await engine.execute(payment, _notice_args(close_id, gate_id, certificate, "0"))  # one per certificate
        with pytest.raises(psycopg.errors.CheckViolation):
            await engine.execute(
                _NOTICE.replace("SELECT 'pay_less'", "SELECT 'default'"),
                _notice_args(close_id, gate_id, certificate, "0"),
            )


async def test_negative_control_the_owner_sees_the_forged_deadline_replaced_too(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    """The triggers are ENABLE ALWAYS: even the owner's insert gets the computed deadline, and the owner cannot change
    or delete a notice (the role's refusals above are grants; these are the table's own rules)."""
    close_id, gate_id, certificate = await _decided(conn, runtime, api, data_dir, reject=True)
    await conn.execute(_NOTICE, _notice_args(close_id, gate_id, certificate, "0"))
    ((deadline,),) = await _rows(conn, "SELECT deadline FROM payment_notice")
    assert deadline < date(2099, 1, 1)
    for statement in ("UPDATE payment_notice SET sum_to_pay = 1", "DELETE FROM payment_notice"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            await conn.execute(statement)


def _every_contract_pays_on(data_dir: Path, terms: dict[str, int]) -> None:
    path = data_dir / "contracts.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    for contract in document["contracts"]:
        contract["payment_terms"] = terms
    path.write_text(json.dumps(document), encoding="utf-8")


def _tight_terms(data_dir: Path) -> None:
    """Every contract pays on the day it is valued, with the pay-less notice due the next day."""
    _every_contract_pays_on(data_dir, {"due_date_days": 0, "final_date_days": 2, "pay_less_notice_days": 1})


async def _first_payment_gate(
    conn: Any, runtime: Any, data_dir: Path, ctx: EngineContext
) -> tuple[str, dict[str, Any]]:
    """The first certificate's run, advanced to its payment gate: (close id, the gate as the status shows it)."""
    first = support.find(support.read_certificates(data_dir), "CT-0001", 1)
    set_id = await _load(conn, data_dir)
    close_id = await _start(conn, runtime, set_id, first["id"])
    await advance(conn, close_id, ctx)
    return close_id, await _payment_gate(conn, close_id)


async def test_a_payment_gate_falls_due_before_its_pay_less_deadline_and_is_escalated(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    _tight_terms(data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        close_id, gate = await _first_payment_gate(conn, runtime, data_dir, ctx)
        ((due_at, opened_at),) = await _rows(
            conn, "SELECT due_at, opened_at FROM gate WHERE gate_id = %s", gate["gate_id"]
        )
        deadline = datetime.now(UTC).date() + timedelta(days=1)  # received today: due today, final in 2, notice by 1
        assert due_at == datetime.combine(deadline - timedelta(days=2), time(12), tzinfo=UTC)
        assert due_at < opened_at  # the deadline is nearer than any policy due time: due at once
        await advance(conn, close_id, ctx)
    overdue = await _rows(
        conn, "SELECT payload FROM trace_event WHERE kind = 'gate_overdue' AND close_id = %s", close_id
    )
    assert [row[0]["gate_id"] for row in overdue] == [gate["gate_id"]]


def _early_payment_notice_terms(data_dir: Path) -> None:
    """Every contract due on the day it is valued, with the payment notice by the next day, the final date on day 17
    and a pay-less notice by day 10 (the Scheme's periods, but a payment notice within 1 day of the due date, not 5)."""
    _every_contract_pays_on(
        data_dir, {"due_date_days": 0, "final_date_days": 17, "payment_notice_days": 1, "pay_less_notice_days": 7}
    )


async def test_a_payment_gate_falls_due_before_its_payment_notice_deadline_when_that_comes_first(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    """Deciding the gate serves the payment notice (s. 110A), whose deadline (here day 1) comes before the pay-less
    notice's (day 10), as under the Scheme (day 5 against day 10): the gate falls due two days before the payment
    notice deadline, which is before any policy due time, so at once. Escalating two days before the pay-less
    deadline instead would leave it due on the policy's clock, after the payment notice was already late."""
    _early_payment_notice_terms(data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        _, gate = await _first_payment_gate(conn, runtime, data_dir, _context(runtime, client))
    ((due_at, opened_at, summary),) = await _rows(
        conn, "SELECT due_at, opened_at, summary FROM gate WHERE gate_id = %s", gate["gate_id"]
    )
    dates = summary["certificate"]["payment_dates"]
    payment_notice_by = date.fromisoformat(dates["payment_notice_by"])
    assert payment_notice_by < date.fromisoformat(dates["pay_less_notice_by"])  # the case this test is about
    assert due_at == datetime.combine(payment_notice_by - timedelta(days=2), time(12), tzinfo=UTC)
    assert due_at < opened_at  # due at once: the overdue reminder goes out on the next advance
