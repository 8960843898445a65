"""Approve with edits: a quantity surveyor certifies another sum than proposed, between zero and the claim, line by
line with a reason, signed with their own key; the certification and both notices follow the amended sum and state
the approver's basis. The database admits the amendment only through the payment gate, by that person.

Real PostgreSQL, the shipped engine and workflow, stand-in specialists over A2A, decisions over the signed callback.
The raw-SQL attacks run as the doors' (callbacks) and the engine's database roles.
"""

from __future__ import annotations

import json
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from countersign.audit.person_proof import decision_message
from countersign.audit.person_proof import sign as person_sign
from countersign.bot.queries import load_gate_card
from countersign.callbacks.principals import upsert_principals
from countersign.cards import slack, teams
from countersign.certificates.amendment import AMENDING_ROLE, Amendment, LineAdjustment
from countersign.engine.orchestrator import advance
from countersign.money.formatting import format_money
from countersign.money.units import MINOR_UNITS
from countersign.specialists.client import open_in_process
from countersign.states import PrincipalKind
from countersign.store.principals import Principal
from tests.engine import payment_run_support as support
from tests.engine.workflows.test_certified_means_certified import (
    _context,
    _inflate_first,
    _load,
    _payment_gate,
    _rows,
    _start,
)
from tests.support import (
    gate_digest,
    person_key,
    person_public_key,
    post_decision,
    rewrite_gate_as_owner,
    signed_headers,
)
from tests.test_database_boundary import _as, _seed

QS = "quinn.surveyor"
REASON = "Measured on site: the groundworks are 75% complete, not 100%"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return support.generate(tmp_path / "construction")


async def _add_surveyor(
    conn: AsyncConnection[Any], *, roles: tuple[str, ...] = ("controller", "cfo", AMENDING_ROLE)
) -> None:
    await upsert_principals(
        conn,
        [Principal(QS, PrincipalKind.HUMAN, "Quinn Surveyor (QS)", roles, public_key=person_public_key(QS))],
    )


async def _open_payment_gate(
    conn: AsyncConnection[Any], runtime: Any, data_dir: Path
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(close id, payment gate as `close status` shows it, certificate) of a run waiting at its payment gate; the
    certificate claims 1,000.00 more than its statement adds up to, so the gate proposes the claim less 1,000."""
    first = support.edited(data_dir, _inflate_first)
    set_id = await _load(conn, data_dir)
    await _add_surveyor(conn)
    async with open_in_process(support.SPECIALISTS) as client:
        close_id = await _start(conn, runtime, set_id, first["id"])
        assert (await advance(conn, close_id, _context(runtime, client))).status == "awaiting_approval"
    return close_id, await _payment_gate(conn, close_id), first


def _amendment(claimed: Decimal, *, certified_off: Decimal = Decimal("1500.00")) -> Amendment:
    """Certifies the claim less `certified_off` where the gate proposes the claim less 1,000: two lines adjusted."""
    proposed, certified = int((claimed - 1000) * 100), int((claimed - certified_off) * 100)
    first = (certified - proposed) // 2
    return Amendment(
        "GBP",
        proposed,
        certified,
        (
            LineAdjustment("L1 groundworks", 2_000_000, 2_000_000 + first, REASON),
            LineAdjustment("L2 drainage", 500_000, 500_000 + (certified - proposed - first), "Two manholes not done"),
        ),
    )


def _body(
    gate_id: str,
    amendment: Amendment,
    *,
    principal: str = QS,
    reason: str = REASON,
    sign_amendment: bool = True,
    wire: dict[str, Any] | None = None,
) -> bytes:
    """A signed-callback body approving with `amendment`, signed by `principal`'s own key over the amendment's digest
    (unless `sign_amendment` is False: a plain approval's signature); `wire` replaces the amendment as sent."""
    nonce, stamp = uuid.uuid4().hex, int(time.time())
    message = decision_message(
        gate_id=gate_id,
        principal=principal,
        decision="approve",
        reason=reason,
        nonce=nonce,
        signed_at=stamp,
        summary_digest=gate_digest(gate_id),
        amendment_digest=amendment.digest() if sign_amendment else None,
    )
    sent = wire or {
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
    return json.dumps(
        {
            "principal": principal,
            "decision": "approve",
            "reason": reason,
            "nonce": nonce,
            "signed_at": stamp,
            "signature": person_sign(person_key(principal), message),
            "amendment": sent,
        }
    ).encode()


async def _post(api: Any, gate_id: str, body: bytes) -> Any:
    return await api.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=signed_headers(body))


# --- the amended sum is certified, and both notices state the approver's basis -----------------------------------


async def test_a_quantity_surveyor_certifies_another_sum_and_the_certification_and_notices_follow_it(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    close_id, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    claimed = Decimal(certificate["totals"]["amount_due"])
    amendment = _amendment(claimed)
    response = await _post(api, gate["gate_id"], _body(gate["gate_id"], amendment))
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "approved"
    ((digest, proof_digest, certified, proposed),) = await _rows(
        conn,
        "SELECT amendment_digest, proof->>'amendment_digest', certified_minor, proposed_minor FROM gate_decision",
    )
    assert digest == proof_digest == amendment.digest()
    assert (certified, proposed) == (amendment.certified_minor, amendment.proposed_minor)

    card = await load_gate_card(conn, gate["gate_id"], "http://localhost:8000")  # the card the doors update
    words = f"Certified {format_money(claimed - 1500, 'GBP')} (proposed {format_money(claimed - 1000, 'GBP')})"
    assert words in json.dumps(slack.decided_message(card), ensure_ascii=False)
    assert REASON in json.dumps(teams.decided_message(card), ensure_ascii=False)

    async with open_in_process(support.SPECIALISTS) as client:
        report = await advance(conn, close_id, _context(runtime, client))
    assert report.status == "closed", report.steps
    assert any("amended by Quinn Surveyor (QS)" in step for step in report.steps), report.steps
    rows = await _rows(conn, "SELECT amount, claimed_amount, basis FROM payment_certification")
    assert rows == [(claimed - 1500, claimed, "amended")]
    notices = await _rows(conn, "SELECT kind, sum_to_pay, document, basis FROM payment_notice ORDER BY kind")
    assert [(kind, to_pay) for kind, to_pay, *_ in notices] == [
        ("pay_less", claimed - 1500),
        ("payment", claimed - 1500),
    ]
    for _, _, document, basis in notices:
        assert REASON in document and "Quinn Surveyor (QS) (quantity surveyor) certified" in document
        assert "L1 groundworks" in document and "Two manholes not done" in document
        assert any(ground["title"] == "Line L2 drainage amended by the quantity surveyor" for ground in basis)
    ((event,),) = await _rows(conn, "SELECT payload FROM trace_event WHERE kind = 'certificate_certified'")
    assert (event["basis"], event["amended_by"], event["amendment_reason"]) == ("amended", QS, REASON)
    assert event["proposed_amount"] == f"{claimed - 1000:.2f}" and event["amount"] != event["proposed_amount"]


async def test_the_signed_callback_refuses_an_amendment_the_gate_cannot_take_with_one_clear_error(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    _, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    gate_id = gate["gate_id"]
    claimed = Decimal(certificate["totals"]["amount_due"])
    good = _amendment(claimed)

    above = _amendment(claimed, certified_off=Decimal("-0.01"))  # one penny above the claim
    response = await _post(api, gate_id, _body(gate_id, above))
    assert (response.status_code, response.json()["error"]) == (422, "amendment_invalid"), response.text
    assert "between 0 and the sum applied for" in response.json()["detail"]

    negative = _amendment(claimed, certified_off=claimed + 1)
    response = await _post(api, gate_id, _body(gate_id, negative))
    assert (response.status_code, response.json()["error"]) == (422, "amendment_invalid"), response.text

    unbalanced = _body(gate_id, good)
    sent = json.loads(unbalanced)
    sent["amendment"]["lines"][0]["certified"] = "1.00"
    response = await _post(api, gate_id, json.dumps(sent).encode())
    assert (response.status_code, response.json()["field"]) == (422, "amendment.lines"), response.text
    assert "add up to" in response.json()["detail"]

    sent = json.loads(_body(gate_id, good))
    sent["amendment"]["lines"][1]["reason"] = "  "
    response = await _post(api, gate_id, json.dumps(sent).encode())
    assert (response.status_code, response.json()["field"]) == (422, "amendment.lines[1].reason")

    # Signed over the plain approval (no amendment digest), sent with an amendment: the signature does not cover it.
    plain = _body(gate_id, good, sign_amendment=False)
    response = await _post(api, gate_id, plain)
    assert (response.status_code, response.json()["error"]) == (401, "person_signature_rejected"), response.text

    # An approver without the QS role may approve, never amend.
    response = await _post(api, gate_id, _body(gate_id, good, principal="bob.osei"))
    assert (response.status_code, response.json()["error"]) == (403, "missing_role"), response.text
    assert AMENDING_ROLE in response.json()["detail"]

    assert await _rows(conn, "SELECT count(*) FROM gate_decision") == [(0,)]
    response = await _post(api, gate_id, _body(gate_id, good))
    assert response.status_code == 200, response.text


# --- the database admits an amendment only through that gate, by that person (raw SQL) ----------------------------

_INSERT = (
    "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel, proof,"
    " certified_minor, proposed_minor, amend_currency, adjustments, amendment_digest)"
    " VALUES (%(gate)s, %(who)s, %(decision)s, %(reason)s, %(nonce)s, 'x', %(channel)s, %(proof)s, %(certified)s,"
    " %(proposed)s, %(currency)s, %(adjustments)s, %(digest)s)"
)


def _row(gate_id: str, amendment: Amendment, **override: Any) -> dict[str, Any]:
    """A row as a raw writer would insert it: shaped like an Ed25519 decision (the signature itself is not the
    database's to verify: the engine re-verifies it before the decision counts)."""
    digest = override.pop("digest", amendment.digest())
    row = {
        "gate": gate_id,
        "who": QS,
        "decision": "approve",
        "reason": REASON,
        "nonce": uuid.uuid4().hex,
        "channel": "signed_callback",
        "proof": Jsonb(
            {"kind": "ed25519", "signature": "A" * 88, "signed_at": int(time.time()), "amendment_digest": digest}
        ),
        "certified": amendment.certified_minor,
        "proposed": amendment.proposed_minor,
        "currency": amendment.currency,
        "adjustments": Jsonb(amendment.adjustments_json()),
        "digest": digest,
    }
    return row | override


def _with_lines(amendment: Amendment, *lines: LineAdjustment, certified: int | None = None) -> Amendment:
    return Amendment(
        amendment.currency,
        amendment.proposed_minor,
        amendment.certified_minor if certified is None else certified,
        lines,
    )


async def test_the_doors_role_cannot_write_an_amendment_the_gate_does_not_admit(
    conn: Any, database: Any, runtime: Any, data_dir: Path
) -> None:
    _, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    gate_id = gate["gate_id"]
    claimed = Decimal(certificate["totals"]["amount_due"])
    good = _amendment(claimed)
    claim_minor = int(claimed * 100)
    over = _with_lines(
        good, LineAdjustment("L1", 0, claim_minor + 1 - good.proposed_minor, "more"), certified=claim_minor + 1
    )
    below = _with_lines(good, LineAdjustment("L1", 0, -1 - good.proposed_minor, "less"), certified=-1)
    slack_proof = Jsonb({"kind": "slack", "tenant": "T01", "external_id": "U0QS", "amendment_digest": good.digest()})
    attacks: list[tuple[dict[str, Any], type[Exception], str]] = [
        (_row(gate_id, good, proof=Jsonb({})), psycopg.errors.InsufficientPrivilege, "Ed25519 signature as proof"),
        (_row(gate_id, over, certified=claim_minor + 1), psycopg.errors.CheckViolation, "between zero and the claim"),
        (_row(gate_id, below, certified=-1), psycopg.errors.CheckViolation, "between zero and the claim"),
        (_row(gate_id, good, reason="   "), psycopg.errors.CheckViolation, "approver's reason"),
        (
            _row(gate_id, good, adjustments=Jsonb(good.adjustments_json()[:1])),
            psycopg.errors.CheckViolation,
            "add up to",
        ),
        (_row(gate_id, good, adjustments=Jsonb([])), psycopg.errors.CheckViolation, "between 1 and 200"),
        (_row(gate_id, good, digest="0" * 64), psycopg.errors.InsufficientPrivilege, "amendment digest"),
        (
            _row(gate_id, good, proof=Jsonb({"kind": "ed25519", "signature": "A", "signed_at": 1})),
            psycopg.errors.InsufficientPrivilege,
            "amendment digest",
        ),
        (_row(gate_id, good, proposed=good.proposed_minor + 100), psycopg.errors.CheckViolation, "not the one gate"),
        (_row(gate_id, good, currency="EUR"), psycopg.errors.CheckViolation, "certificate in GBP"),
        (_row(gate_id, good, decision="reject"), psycopg.errors.CheckViolation, "only an approval"),
        (_row(gate_id, good, channel="slack", proof=slack_proof), psycopg.errors.InsufficientPrivilege, "proof"),
        (_row(gate_id, good, who="bob.osei"), psycopg.errors.InsufficientPrivilege, AMENDING_ROLE),
        (_row(gate_id, good, certified=None), psycopg.errors.InsufficientPrivilege, "names an amendment"),
        (
            _row(gate_id, good, certified=None, proof=Jsonb({"kind": "ed25519", "signature": "A", "signed_at": 1})),
            psycopg.errors.CheckViolation,
            "amendment_whole",
        ),
    ]
    async with await AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        for row, error, words in attacks:
            with pytest.raises(error, match=words):
                await callbacks.execute(_INSERT, row)
        assert await _rows(callbacks, "SELECT count(*) FROM gate_decision") == [(0,)]
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            await engine.execute(_INSERT, _row(gate_id, good))  # the engine never decides


async def test_the_slack_door_cannot_carry_an_amendment_even_on_a_gate_that_takes_platform_identities(
    conn: Any, database: Any, runtime: Any, data_dir: Path
) -> None:
    """A shared secret authenticates a system, never a person: a platform identity cannot certify another sum, even
    where the gate's tier accepts platform identities for a plain decision."""
    _, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    gate_id, good = gate["gate_id"], _amendment(Decimal(certificate["totals"]["amount_due"]))
    await conn.execute(
        "INSERT INTO principal_identity (principal_id, channel, tenant, external_id)"
        " VALUES (%s, 'slack', 't01', 'u0qs')",
        (QS,),
    )
    await rewrite_gate_as_owner(conn, gate_id, "accepted_proofs = '{platform_identity,ed25519,passkey}'")
    proof = Jsonb({"kind": "slack", "tenant": "t01", "external_id": "u0qs", "amendment_digest": good.digest()})
    async with await AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="needs the person's own key"):
            await callbacks.execute(_INSERT, _row(gate_id, good, channel="slack", proof=proof))


async def test_an_amendment_once_recorded_never_changes_nor_moves_and_every_approval_certifies_one_sum(
    conn: Any, database: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    _, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    gate_id, good = gate["gate_id"], _amendment(Decimal(certificate["totals"]["amount_due"]))
    await rewrite_gate_as_owner(conn, gate_id, "quorum = 2, approver_role = 'cfo'")
    assert (await _post(api, gate_id, _body(gate_id, good))).status_code == 200
    plain = await post_decision(api, gate_id, "carol.main")  # a second approver, certifying the proposed sum
    assert (plain.status_code, plain.json()["error"]) == (403, "refused_by_database"), plain.text
    assert "already certifies an amended sum" in plain.json()["detail"]
    other_gate = str(uuid.uuid4())
    async with await AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        for change in (
            "certified_minor = certified_minor + 1",
            "adjustments = '[]'",
            "amendment_digest = 'x'",
            f"gate_id = '{other_gate}'",
            "reason = 'changed'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await callbacks.execute(f"UPDATE gate_decision SET {change}")  # type: ignore[arg-type]
    for change in ("certified_minor = certified_minor + 1", f"gate_id = '{other_gate}'"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="immutable"):
            await conn.execute(f"UPDATE gate_decision SET {change}")  # the owner too: the table's own rule
    ((certified,),) = await _rows(conn, "SELECT certified_minor FROM gate_decision")
    assert certified == good.certified_minor


async def test_the_engine_role_cannot_certify_the_proposed_sum_once_a_surveyor_amended_it(
    conn: Any, database: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    close_id, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    gate_id = gate["gate_id"]
    claimed = Decimal(certificate["totals"]["amount_due"])
    assert (await _post(api, gate_id, _body(gate_id, _amendment(claimed)))).status_code == 200
    await conn.execute("UPDATE gate SET lifecycle = 'applied' WHERE gate_id = %s", (gate_id,))
    insert = (
        "INSERT INTO payment_certification (certificate_id, set_id, close_id, gate_id, amount, currency)"
        " SELECT %s, set_id, %s, %s, %s, 'GBP' FROM construction_certificate WHERE certificate_id = %s"
    )
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not the sum the approver certified"):
            await engine.execute(insert, (certificate["id"], close_id, gate_id, claimed - 1000, certificate["id"]))
        await engine.execute(insert, (certificate["id"], close_id, gate_id, claimed - 1500, certificate["id"]))
        assert await _rows(engine, "SELECT basis FROM payment_certification") == [("amended",)]


async def test_a_forged_amended_approval_is_admitted_by_shape_but_never_counts(
    conn: Any, database: Any, runtime: Any, data_dir: Path
) -> None:
    """The database checks the proof's shape and that it names the row's digest; the signature is checked by the
    writer and again by the engine, which blocks a gate whose decision its person did not sign."""
    close_id, gate, certificate = await _open_payment_gate(conn, runtime, data_dir)
    good = _amendment(Decimal(certificate["totals"]["amount_due"]))
    async with await AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        await callbacks.execute(_INSERT, _row(gate["gate_id"], good))
    async with open_in_process(support.SPECIALISTS) as client:
        report = await advance(conn, close_id, _context(runtime, client))
    assert report.status != "closed"
    assert await _rows(conn, "SELECT count(*) FROM payment_certification") == [(0,)]
    assert await _rows(conn, "SELECT count(*) FROM trace_event WHERE kind = 'decision_proof_invalid'") == [(1,)]


# --- the database and the domain agree ----------------------------------------------------------------------------


async def test_the_database_digests_an_amendment_as_the_domain_does(conn: Any) -> None:
    amendment = Amendment(
        "gbp".upper(),
        4_500_000,
        4_125_000,
        (
            LineAdjustment("L1; 3:x;", 2_000_000, 1_700_000, "naïve reason: 3:a;b\nnext line"),
            LineAdjustment("L2", -50_000, -100_000, "contra charge"),
        ),
    )
    ((digest,),) = await _rows(
        conn,
        "SELECT amendment_digest(%s, %s, %s, %s)",
        amendment.currency,
        amendment.proposed_minor,
        amendment.certified_minor,
        Jsonb(amendment.adjustments_json()),
    )
    assert digest == amendment.digest()
    ((role,),) = await _rows(conn, "SELECT certificate_amending_role()")
    assert role == AMENDING_ROLE
    for currency, places in [*MINOR_UNITS.items(), ("GBP", 2), ("EUR", 2)]:
        assert await _rows(conn, "SELECT currency_minor_units(%s)", currency) == [(places,)], currency


def test_the_doors_role_cannot_amend_a_sum_on_a_close_gate(database: Any) -> None:
    """A month-end close's sign-off gate certifies no sum: an amendment there is refused, however well formed."""
    with psycopg.connect(database.url, autocommit=True) as owner:
        gate_id = _seed(owner)  # a critical sign-off gate for two CFOs
        owner.execute(
            "INSERT INTO principal (principal_id, kind, display_name, roles, public_key)"
            " VALUES (%s, 'human', %s, %s, %s)",
            (QS, QS, ["cfo", AMENDING_ROLE], person_public_key(QS)),
        )
        amendment = Amendment("GBP", 100_000, 90_000, (LineAdjustment("L1", 100_000, 90_000, "not done"),))
        with (
            _as(database, "callbacks") as callbacks,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="only at a certificate's payment gate"),
        ):
            callbacks.execute(_INSERT, _row(gate_id, amendment))
        assert owner.execute("SELECT count(*) FROM gate_decision").fetchone() == (0,)
