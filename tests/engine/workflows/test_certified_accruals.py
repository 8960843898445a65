"""Certified payments feed the month's close (issue 36, migration 0028, ADR 0050).

A certification records, in its own statement, an accrual proposal for the close of the entity that carries the
contract and the certificate's period; that close's accruals task accrues it in words; and nobody approves both a
certificate's payment gate and the accruals gate of the close carrying it. Real PostgreSQL, the shipped engine and
workflows, the real accruals specialist over A2A, the payment workflow's stand-in specialists
(tests/engine/payment_run_support.py) and decisions through the signed callback. Each rule is attacked in raw SQL as
the engine and the doors' (callbacks) roles.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.cards import slack as slack_cards
from countersign.cards import teams as teams_cards
from countersign.cards.refusals import REFUSAL_WORDING, refusal_wording
from countersign.cards.voids import void_sentence
from countersign.engine.construction import load_construction_set
from countersign.engine.orchestrator import EngineContext, advance
from countersign.engine.runs import close_status
from countersign.engine.workflows import shipped_handlers
from countersign.engine.workflows.certificates.runs import start_payment_run
from countersign.engine.workflows.close.inputs import accruals_input
from countersign.money.formatting import format_money
from countersign.specialists.client import open_in_process
from countersign.states import RefusalCode
from countersign.store.certified_accruals import certified_accruals
from countersign.store.gates import read_gate
from countersign.synthetic.construction import generate_construction
from countersign.synthetic.construction_profile import load_construction_profile
from tests.engine import payment_run_support as support
from tests.engine.workflow_support import approve_open_gates
from tests.support import count, import_default_principals, post_decision, start_default_close

ENTITY = "ACME-UK"  # the default books' entity, which the shipped risk.yaml maps every contract to (`*`)
PERIOD = "2026-10"  # the default books' period: the certificates are generated to start in it
CERTIFIER = "alice.chen"  # the first controller: approve_open_gates would pick her for both gates
OTHER = "bob.osei"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    profile = load_construction_profile(PROJECT_ROOT / "config" / "profiles" / "construction.yaml")
    corpus = json.loads(support.CORPUS_PATH.read_text(encoding="utf-8"))
    out = tmp_path / "construction"
    generate_construction(
        dataclasses.replace(profile, start_period=PERIOD),
        support.SEED,
        out,
        contracts=support.CONTRACTS,
        months=support.MONTHS,
        clause_corpus=corpus,
    )
    return out


def _clean_certificate(data_dir: Path, period: str = PERIOD) -> dict[str, Any]:
    faulted = support.faulted_ids(data_dir)
    return next(c for c in support.read_certificates(data_dir) if c["period"] == period and c["id"] not in faulted)


async def _rows(conn: AsyncConnection[Any], sql: str, *params: Any) -> list[tuple[Any, ...]]:
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


async def _open_gate(conn: AsyncConnection[Any], close_id: str, task: str) -> dict[str, Any]:
    (gate,) = [g for g in (await close_status(conn, close_id))["gates"] if g["task"] == task and g["status"] == "open"]
    return gate


async def _payment_run_to_gate(
    conn: AsyncConnection[Any], runtime: Any, data_dir: Path, client: Any, period: str = PERIOD
) -> tuple[dict[str, Any], str, EngineContext, dict[str, Any]]:
    """Load the set, start the clean certificate's run (of `period`) and advance it to its open payment gate."""
    certificate = _clean_certificate(data_dir, period)
    set_id = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    close_id = await start_payment_run(
        conn,
        set_id=set_id,
        certificate_id=certificate["id"],
        policy=runtime.policy,
        workflow=runtime.workflows["certificates"],
        started_by="test-starter",
    )
    ctx = EngineContext(runtime.policy, runtime.workflows, client.call, handlers=shipped_handlers(support.retriever()))
    assert (await advance(conn, close_id, ctx)).status == "awaiting_approval"
    return certificate, close_id, ctx, await _open_gate(conn, close_id, "payment")


async def _certify(
    conn: AsyncConnection[Any], runtime: Any, api: Any, data_dir: Path, by: str, period: str = PERIOD
) -> dict[str, Any]:
    """The clean certificate of `period` certified through its payment gate, approved by `by`."""
    async with open_in_process(support.SPECIALISTS) as client:
        certificate, close_id, ctx, gate = await _payment_run_to_gate(conn, runtime, data_dir, client, period)
        response = await post_decision(api, gate["gate_id"], by)
        assert response.status_code == 200, response.text
        assert (await advance(conn, close_id, ctx)).status == "closed"
    return certificate | {"run": close_id, "payment_gate": gate["gate_id"]}


async def _accruals_result(conn: AsyncConnection[Any], close_id: str) -> dict[str, Any]:
    query = "SELECT result FROM close_task WHERE close_id = %s AND task = 'accruals'"
    ((result,),) = await _rows(conn, query, close_id)
    assert result is not None
    found: dict[str, Any] = result
    return found


async def _refusals(conn: AsyncConnection[Any], gate_id: str) -> list[str]:
    rows = await _rows(
        conn,
        "SELECT payload->>'code' FROM trace_event WHERE kind = 'decision_refused' AND payload->>'gate_id' = %s",
        gate_id,
    )
    return [code for (code,) in rows]


# --- the proposal, and the close that accrues it --------------------------------------------------------------


async def test_a_certification_posts_its_accrual_to_the_close_of_its_entity_and_period(
    conn: Any, runtime: Any, api: Any, engine_ctx: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    certified = await _certify(conn, runtime, api, data_dir, CERTIFIER)
    amount = Decimal(certified["totals"]["amount_due"])
    rows = await _rows(
        conn,
        "SELECT certificate_id, entity, period, amount, currency, contract_id, certificate_no, cost_account,"
        " accrual_account, certified_by, gate_id::text, payee FROM certified_accrual",
    )
    contract = next(
        c
        for c in json.loads((data_dir / "contracts.json").read_text(encoding="utf-8"))["contracts"]
        if c["id"] == certified["contract"]
    )
    assert rows == [
        (
            certified["id"],
            ENTITY,
            PERIOD,
            amount,
            "GBP",
            certified["contract"],
            certified["number"],
            "1500",
            "2100",
            [CERTIFIER],
            certified["payment_gate"],
            contract["contractor"]["name"],
        )
    ]

    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    result = await _accruals_result(conn, close_id)
    words = (
        f"Accrue {format_money(amount, 'GBP')} certified on {contract['title']}, certificate {certified['number']},"
        f" not yet invoiced ({certified['id']})"
    )
    lines = result["journal"]["lines"]
    assert {"account": "1500", "amount": f"{amount:.2f}", "description": words} in lines
    assert sum(Decimal(line["amount"]) for line in lines) == 0  # balanced
    assert result["certified"] == 1
    gate = await _open_gate(conn, close_id, "accruals")
    ((summary,),) = await _rows(conn, "SELECT summary::text FROM gate WHERE gate_id = %s", gate["gate_id"])
    assert words in summary  # the approver sees it on the card


async def test_a_certified_sum_invoiced_in_the_books_is_no_longer_accrued(
    conn: Any, runtime: Any, api: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    certified = await _certify(conn, runtime, api, data_dir, CERTIFIER)
    close_id = await start_default_close(conn, runtime, default_books)
    ((book_set_id,),) = await _rows(conn, "SELECT book_set_id FROM close_run WHERE close_id = %s", close_id)
    await conn.execute(  # the contractor's invoice, in the close's books, under the certificate's id
        "INSERT INTO book_ap_item (book_set_id, invoice_id, vendor, invoice_date, due_date, amount)"
        " VALUES (%s, %s, 'contractor', '2026-10-30', '2026-11-30', %s)",
        (book_set_id, certified["id"], certified["totals"]["amount_due"]),
    )
    # What the accruals task sends its specialist (the AP subledger no longer reconciles here: the test's own invoice)
    payload = await accruals_input(conn, book_set_id, PERIOD, runtime.policy, entity=ENTITY)
    assert "certified" not in payload
    (seen,) = await certified_accruals(conn, entity=ENTITY, period=PERIOD, book_set_id=book_set_id)
    (elsewhere,) = await certified_accruals(conn, entity=ENTITY, period=PERIOD, book_set_id=book_set_id + 1000)
    assert (seen.certificate_id, seen.invoiced, elsewhere.invoiced) == (certified["id"], True, False)  # the control


async def test_a_certification_of_a_contract_no_entity_carries_is_refused_and_nothing_is_certified(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    await import_default_principals(conn)
    await conn.execute("DELETE FROM policy_certified_accrual")  # the owner's seed, as a risk.yaml without a mapping
    async with open_in_process(support.SPECIALISTS) as client:
        _, close_id, ctx, gate = await _payment_run_to_gate(conn, runtime, data_dir, client)
        assert (await post_decision(api, gate["gate_id"], CERTIFIER)).status_code == 200
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="no entity carries contract"):
            await advance(conn, close_id, ctx)
    assert await count(conn, "SELECT count(*) FROM payment_certification") == 0
    assert await count(conn, "SELECT count(*) FROM certified_accrual") == 0


# --- a certification after the accruals were approved (issue 36, migration certified_accrual_voids) -------------


async def _approved_accruals(conn: AsyncConnection[Any], api: Any, engine_ctx: Any, close_id: str) -> str:
    """The close's accruals gate approved (by the certifier-to-be's colleague) and the task done on it."""
    await advance(conn, close_id, engine_ctx)
    gate = await _open_gate(conn, close_id, "accruals")
    assert (await post_decision(api, gate["gate_id"], CERTIFIER)).status_code == 200
    await advance(conn, close_id, engine_ctx)
    task = await _rows(
        conn, "SELECT status, attempt FROM close_task WHERE close_id = %s AND task = 'accruals'", close_id
    )
    assert task == [("done", 1)]
    return str(gate["gate_id"])


async def test_a_certification_after_the_accruals_were_approved_voids_them_and_the_new_attempt_accrues_it(
    conn: Any, runtime: Any, api: Any, engine_ctx: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    close_id = await start_default_close(conn, runtime, default_books)
    gate_id = await _approved_accruals(conn, api, engine_ctx, close_id)
    ((accounts,),) = await _rows(conn, "SELECT accounts FROM gate WHERE gate_id = %s", gate_id)
    assert "2100" in accounts, accounts  # the approved journal credits the accrual account a certified sum credits
    assert await count(conn, "SELECT count(*) FROM sign_off_void") == 0
    enabled = "SELECT tgenabled::text FROM pg_trigger WHERE tgname = 'certified_accrual_voids_sign_offs'"
    assert await _rows(conn, enabled) == [("A",)]  # fires under session_replication_role = replica too

    certified = await _certify(conn, runtime, api, data_dir, OTHER)  # she approved the accruals: he certifies
    amount = Decimal(certified["totals"]["amount_due"])
    account = "1500" if "1500" in accounts else "2100"
    voids = await _rows(
        conn,
        "SELECT change_table, change_ref, account, amount, currency, changed_by FROM sign_off_void WHERE gate_id = %s",
        gate_id,
    )
    assert voids == [("certified_accrual", certified["id"], account, amount, "GBP", OTHER)]
    gate = await read_gate(conn, gate_id)
    assert gate is not None and gate.status == "voided"
    (said,) = [void_sentence(void) for void in gate.voids]
    assert said.startswith(f"Sign-off voided: certificate {certified['id']} (")
    assert f"certified {format_money(amount, 'GBP')} to accrue on {account} " in said and "after approval" in said

    report = await advance(conn, close_id, engine_ctx)
    assert any("Sign-off voided: certificate" in step for step in report.steps), report.steps
    ((attempt,),) = await _rows(
        conn, "SELECT attempt FROM close_task WHERE close_id = %s AND task = 'accruals'", close_id
    )
    assert attempt == 2
    result = await _accruals_result(conn, close_id)
    assert result["certified"] == 1
    assert any(certified["id"] in line["description"] for line in result["journal"]["lines"])
    assert {"account": "1500", "amount": f"{amount:.2f}"}.items() <= next(
        line for line in result["journal"]["lines"] if certified["id"] in line["description"]
    ).items()


async def test_a_certification_for_another_period_voids_nothing(
    conn: Any, runtime: Any, api: Any, engine_ctx: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    close_id = await start_default_close(conn, runtime, default_books)
    gate_id = await _approved_accruals(conn, api, engine_ctx, close_id)
    async with open_in_process(support.SPECIALISTS) as client:  # a clean certificate of the next month, certified
        certificate, run_id, ctx, _ = await _payment_run_to_gate(conn, runtime, data_dir, client, period="2026-11")
        for _ in range(6):
            if not await approve_open_gates(api, conn, run_id):
                break
            await advance(conn, run_id, ctx)
    rows = await _rows(conn, "SELECT period FROM certified_accrual WHERE certificate_id = %s", certificate["id"])
    assert rows == [("2026-11",)]
    assert await count(conn, "SELECT count(*) FROM sign_off_void") == 0
    gate = await read_gate(conn, gate_id)
    assert gate is not None and gate.status == "approved"


# --- segregation of duties --------------------------------------------------------------------------------------


async def test_the_certifier_cannot_approve_the_accruals_that_carry_the_certified_sum(
    conn: Any, runtime: Any, api: Any, engine_ctx: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    certified = await _certify(conn, runtime, api, data_dir, CERTIFIER)
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    gate = await _open_gate(conn, close_id, "accruals")

    refused = await post_decision(api, gate["gate_id"], CERTIFIER)
    assert refused.status_code == 403, refused.text
    body = refused.json()
    assert body["error"] == "duties_segregated"
    assert certified["id"] in body["detail"] and "someone else must approve these accruals" in body["detail"]
    assert await _refusals(conn, gate["gate_id"]) == ["duties_segregated"]
    rejected = await post_decision(api, gate["gate_id"], CERTIFIER, "reject", reason="the WIP account is wrong")
    assert rejected.status_code == 200, rejected.text  # a rejection approves nothing: not barred


async def test_another_controller_approves_the_accruals_the_certifier_may_not(
    conn: Any, runtime: Any, api: Any, engine_ctx: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    await _certify(conn, runtime, api, data_dir, CERTIFIER)
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    gate = await _open_gate(conn, close_id, "accruals")
    assert (await post_decision(api, gate["gate_id"], CERTIFIER)).status_code == 403
    approved = await post_decision(api, gate["gate_id"], OTHER)
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "approved"


async def test_whoever_approved_the_periods_accruals_cannot_certify_a_payment_accruing_into_them(
    conn: Any, runtime: Any, api: Any, engine_ctx: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    accruals = await _open_gate(conn, close_id, "accruals")
    assert (await post_decision(api, accruals["gate_id"], CERTIFIER)).status_code == 200

    async with open_in_process(support.SPECIALISTS) as client:
        certificate, run_id, ctx, gate = await _payment_run_to_gate(conn, runtime, data_dir, client)
        refused = await post_decision(api, gate["gate_id"], CERTIFIER)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"] == "duties_segregated"
        assert f"approved the accruals of {ENTITY} {PERIOD}" in refused.json()["detail"]
        assert (await post_decision(api, gate["gate_id"], OTHER)).status_code == 200
        assert (await advance(conn, run_id, ctx)).status == "closed"
    rows = await _rows(conn, "SELECT certificate_id, certified_by FROM certified_accrual")
    assert rows == [(certificate["id"], [OTHER])]


async def test_a_certifier_of_another_period_or_entity_is_not_barred(
    conn: Any, runtime: Any, api: Any, engine_ctx: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    await conn.execute("UPDATE policy_certified_accrual SET entity = 'ACME-US'")  # the owner maps it elsewhere
    await _certify(conn, runtime, api, data_dir, CERTIFIER)
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    gate = await _open_gate(conn, close_id, "accruals")
    assert "certified" not in await _accruals_result(conn, close_id)
    assert (await post_decision(api, gate["gate_id"], CERTIFIER)).status_code == 200


def test_the_refusal_is_worded_on_the_cards_not_as_an_unknown_code() -> None:
    text = slack_cards.refusal_text(RefusalCode.DUTIES_SEGREGATED, "")
    assert text == REFUSAL_WORDING[RefusalCode.DUTIES_SEGREGATED] != refusal_wording("no_such_code")
    assert "two different people" in text
    assert text in json.dumps(teams_cards.refusal_card(RefusalCode.DUTIES_SEGREGATED, ""))


# --- attacks in raw SQL -------------------------------------------------------------------------------------------

_INSERT = (
    "INSERT INTO certified_accrual (certificate_id, set_id, contract_id, contract_title, certificate_no, payee,"
    " entity, period, amount, currency, cost_account, accrual_account, gate_id, certified_by)"
    " SELECT certificate_id, set_id, contract_id, contract_title, certificate_no, payee, 'EVIL-CO', '2026-09',"
    " 1.00, currency, cost_account, accrual_account, gate_id, '{}' FROM certified_accrual"
)
_CHANGES = (
    "UPDATE certified_accrual SET amount = 1.00",
    "UPDATE certified_accrual SET entity = 'EVIL-CO', period = '2026-09'",  # re-parented to another close
    "UPDATE certified_accrual SET certified_by = '{}'",
    "DELETE FROM certified_accrual",
    "TRUNCATE certified_accrual",
    "UPDATE policy_certified_accrual SET entity = 'EVIL-CO'",
    "INSERT INTO policy_certified_accrual VALUES ('CT-9', 'EVIL-CO', '1500', '2100')",
)


@pytest.mark.parametrize("role", ["engine", "callbacks"])
async def test_no_service_role_writes_moves_or_removes_a_proposal(
    conn: Any, database: Any, runtime: Any, api: Any, data_dir: Path, role: str
) -> None:
    await import_default_principals(conn)
    await _certify(conn, runtime, api, data_dir, CERTIFIER)
    before = await _rows(conn, "SELECT * FROM certified_accrual")
    url = database.engine_url if role == "engine" else database.callbacks_url
    async with await AsyncConnection.connect(url, autocommit=True) as attacker:
        for statement in (_INSERT, *_CHANGES):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                await attacker.execute(statement)
        for statement in (  # the void a late certification writes (migration certified_accrual_voids) stays on
            "ALTER TABLE certified_accrual DISABLE TRIGGER certified_accrual_voids_sign_offs",
            "DROP TRIGGER certified_accrual_voids_sign_offs ON certified_accrual",
            "CREATE OR REPLACE FUNCTION public.void_on_certified_accruals() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN NULL; END $$",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await attacker.execute(statement)
        for shadow in ("certified_accrual", "policy_certified_accrual", "gate_decision"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await attacker.execute(f"CREATE TEMP TABLE {shadow} (certificate_id text)")
    assert await _rows(conn, "SELECT * FROM certified_accrual") == before


async def test_not_even_the_owner_changes_a_proposal_or_writes_one_of_its_own_words(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    await import_default_principals(conn)
    certified = await _certify(conn, runtime, api, data_dir, CERTIFIER)
    for statement in _CHANGES[:5]:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            await conn.execute(statement)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="is not certified"):
        await conn.execute(
            "INSERT INTO certified_accrual (certificate_id, entity, period, amount)"
            " VALUES ('CERT-NONE', 'X', '2026-09', 1)"
        )
    ((entity, period, amount),) = await _rows(conn, "SELECT entity, period, amount FROM certified_accrual")
    assert (entity, period, amount) == (ENTITY, PERIOD, Decimal(certified["totals"]["amount_due"]))


def _raw_decision(gate_id: str, principal: str) -> tuple[str, tuple[Any, ...]]:
    """A signed-callback decision row as the doors' role could write it: the database checks the proof's shape and
    the person's registered key, the decision writer the signature itself."""
    proof = {"kind": "ed25519", "signature": "AA", "signed_at": 1}
    return (
        "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel, proof)"
        " VALUES (%s, %s, 'approve', 'looks right', %s, %s, 'signed_callback', %s)",
        (gate_id, principal, uuid.uuid4().hex, "0" * 64, Jsonb(proof)),
    )


async def test_the_doors_role_cannot_record_the_certifiers_approval_of_the_accruals_even_with_shadow_names(
    conn: Any, database: Any, runtime: Any, api: Any, engine_ctx: Any, default_books: Path, data_dir: Path
) -> None:
    await import_default_principals(conn)
    await _certify(conn, runtime, api, data_dir, CERTIFIER)
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    gate = await _open_gate(conn, close_id, "accruals")
    async with await AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        paid = "approved the payment of certificate"
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match=paid) as refused:
            await callbacks.execute(*_raw_decision(gate["gate_id"], CERTIFIER))
        assert refused.value.diag.message_detail == "duties_segregated"
    # The owner's own session, with empty look-alikes of every table the rule reads ahead of `public` on its path.
    async with conn.transaction():
        for shadow in ("certified_accrual", "policy_certified_accrual", "construction_certificate", "close_run"):
            await conn.execute(f"CREATE TEMP TABLE {shadow} (LIKE public.{shadow}) ON COMMIT DROP")
        await conn.execute("SET LOCAL search_path = pg_temp, public")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="approved the payment of certificate"):
            await conn.execute(*_raw_decision(gate["gate_id"], CERTIFIER))
    assert await count(conn, "SELECT count(*) FROM gate_decision WHERE gate_id = %s", gate["gate_id"]) == 0
