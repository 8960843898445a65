"""A sign-off is voided when what it approved changes (migration sign_off_voided, docs/adr/0046).

The first half drives a real close: the accruals gate is approved and applied, then a journal posts to one of its
accounts as the engine's role; the database records the void, the engine reopens the task, traces the change and the
card says it in words. The second half attacks the rule with raw SQL as each service role on a close put together by
the owner.
"""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from countersign.audit.timeline import describe
from countersign.audit.trace import iter_events
from countersign.bootstrap.database import Database
from countersign.bot.queries import gate_card
from countersign.cards import slack as slack_cards
from countersign.cards import teams as teams_cards
from countersign.engine.orchestrator import advance
from countersign.engine.postings import JournalLine, JournalRequest, post_journal
from countersign.engine.runs import close_status
from countersign.store.gates import read_gate
from tests.board.pages_support import Board, board_fixture  # noqa: F401  (the `board` fixture)
from tests.engine.lifecycle_support import decide, new_close, put_gate, put_task, seed_approver
from tests.support import count, post_decision, start_default_close

REFUSED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.CheckViolation)


async def _approved_accruals(conn: Any, runtime: Any, engine_ctx: Any, api: Any, books: Any) -> tuple[str, str]:
    close_id = await start_default_close(conn, runtime, books)
    await advance(conn, close_id, engine_ctx)
    gate = next(g for g in (await close_status(conn, close_id))["gates"] if g["task"] == "accruals")
    response = await post_decision(api, gate["gate_id"], "alice.chen")
    assert response.status_code == 200, response.text
    await advance(conn, close_id, engine_ctx)
    return close_id, gate["gate_id"]


async def _post_as_engine(database: Database, close_id: str, account: str, amount: str) -> int:
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        row = await (
            await engine.execute("SELECT entity, period FROM close_run WHERE close_id = %s", (close_id,))
        ).fetchone()
        assert row is not None
        entity, period = row
        posted = await post_journal(
            engine,
            JournalRequest(
                idempotency_key=f"late:{uuid.uuid4()}",
                entity=entity,
                period=period,
                journal_date=date.fromisoformat(f"{period}-28"),
                memo="late supplier invoice",
                lines=[
                    JournalLine(account, Decimal(amount), "late invoice"),
                    JournalLine("9999", -Decimal(amount), "suspense"),
                ],
            ),
            posted_by="orchestrator",
        )
        return posted.journal_id


async def test_a_journal_on_an_approved_accrual_account_voids_its_sign_off_and_the_task_runs_again(
    conn: Any, database: Database, runtime: Any, engine_ctx: Any, api: Any, default_books: Any
) -> None:
    close_id, gate_id = await _approved_accruals(conn, runtime, engine_ctx, api, default_books)
    status = await close_status(conn, close_id)
    assert next(t for t in status["tasks"] if t["task"] == "accruals")["status"] == "done"
    gate = await read_gate(conn, gate_id)
    assert gate is not None and gate.status == "approved" and gate.voids == ()
    accounts = await (await conn.execute("SELECT accounts FROM gate WHERE gate_id = %s", (gate_id,))).fetchone()
    assert accounts is not None and accounts[0], "the accruals gate names the accounts its journal posts to"
    # the close's own accrual journal, posted from this gate, voided nothing
    assert await count(conn, "SELECT count(*) FROM sign_off_void") == 0

    account = accounts[0][0]
    journal_id = await _post_as_engine(database, close_id, account, "1250.00")

    voids = await (
        await conn.execute(
            "SELECT change_table, change_ref, account, amount, currency, changed_by FROM sign_off_void"
            " WHERE gate_id = %s",
            (gate_id,),
        )
    ).fetchall()
    assert voids == [("journal_line", str(journal_id), account, Decimal("1250.00"), "GBP", "orchestrator")]
    gate = await read_gate(conn, gate_id)
    assert gate is not None and gate.status == "voided"

    report = await advance(conn, close_id, engine_ctx)
    assert any("Sign-off voided" in step for step in report.steps), report.steps
    task = await (
        await conn.execute(
            "SELECT status, attempt FROM close_task WHERE close_id = %s AND task = 'accruals'", (close_id,)
        )
    ).fetchone()
    assert task is not None and task[1] == 2 and task[0] != "done"
    traced = await (
        await conn.execute(
            "SELECT payload FROM trace_event WHERE close_id = %s AND kind = 'sign_off_voided'", (close_id,)
        )
    ).fetchall()
    assert len(traced) == 1
    payload = traced[0][0]
    assert payload["gate_id"] == gate_id and payload["next_attempt"] == 2
    assert payload["changes"][0]["change_ref"] == str(journal_id) and payload["changes"][0]["amount"] == "1250.00"
    assert "GBP 1,250.00" in payload["said"][0] and account in payload["said"][0]
    timeline = [describe(e) async for e in iter_events(conn, close_id=close_id) if e.kind == "sign_off_voided"]
    assert timeline == [f"accruals: {payload['said'][0]} Attempt 2 runs."]

    # the card says it in words, on both platforms
    card = gate_card(gate, "https://board.test")
    assert card.status == "voided" and card.voided and card.voided[0].startswith("Sign-off voided: ledger journal")
    assert "GBP 1,250.00" in card.voided[0] and "after approval" in card.voided[0]
    slack_text = str(slack_cards.decided_message(card))
    teams_text = str(teams_cards.decided_message(card))
    assert "Sign-off voided" in slack_text and "GBP 1,250.00" in slack_text
    assert "Sign-off voided" in teams_text and "GBP 1,250.00" in teams_text

    # a fresh gate, a fresh decision: the void is answered
    new_gate = await (
        await conn.execute(
            "SELECT gate_id::text FROM gate WHERE close_id = %s AND task = 'accruals' AND attempt = 2", (close_id,)
        )
    ).fetchone()
    assert new_gate is not None
    assert await count(conn, "SELECT public.standing_sign_off_voids(%s)", close_id) == 1
    assert (await post_decision(api, new_gate[0], "alice.chen")).status_code == 200
    await advance(conn, close_id, engine_ctx)
    assert await count(conn, "SELECT public.standing_sign_off_voids(%s)", close_id) == 0
    # the first attempt's accrual journal is reversed once; the new approval's journal replaces it
    memos = await (
        await conn.execute(
            "SELECT idempotency_key, memo FROM journal WHERE source_close = %s AND source_task = 'accruals'"
            " ORDER BY journal_id",
            (close_id,),
        )
    ).fetchall()
    assert [key.rsplit(":", 2)[-2:] for key, _ in memos] == [["attempt", "1"], ["1", "reversed"], ["attempt", "2"]]
    assert "its sign-off was voided" in memos[1][1]
    netted = (
        "SELECT count(*) FROM (SELECT l.account FROM journal_line l JOIN journal j USING (journal_id)"
        " WHERE j.idempotency_key IN (%s, %s) GROUP BY l.account HAVING sum(l.amount) <> 0) x"
    )
    assert await count(conn, netted, memos[0][0], memos[1][0]) == 0  # every account of attempt 1 nets to zero
    assert await count(conn, netted, memos[0][0], memos[2][0]) > 0  # the control: attempt 2 does not undo attempt 1


async def test_the_board_gate_page_and_close_page_say_the_sign_off_was_voided(
    board: Board, conn: Any, database: Database, runtime: Any, engine_ctx: Any, default_books: Any
) -> None:
    close_id, gate_id = await _approved_accruals(conn, runtime, engine_ctx, board.client, default_books)
    accounts = await (await conn.execute("SELECT accounts FROM gate WHERE gate_id = %s", (gate_id,))).fetchone()
    assert accounts is not None
    await board.look_as("carol.main")
    before = (await board.client.get(f"/board/gates/{gate_id}")).text
    assert "Sign-off voided" not in before

    await _post_as_engine(database, close_id, accounts[0][0], "310.55")
    page = (await board.client.get(f"/board/gates/{gate_id}")).text
    assert "Sign-off voided: ledger journal" in page and "GBP 310.55" in page and "after approval" in page
    assert "The approval no longer counts" in page
    await advance(conn, close_id, engine_ctx)
    close_page = (await board.client.get(f"/board/closes/{close_id}")).text
    assert "voided" in close_page


# --- the rule in the database, attacked as each role -----------------------------------------------------------


@pytest.fixture
def approved(database: Database) -> dict[str, str]:
    """A close whose task `recon` is done through an applied, approved gate covering account 1510, its period open."""
    with psycopg.connect(database.url, autocommit=True) as owner:
        seed_approver(owner)
        close_id = new_close(owner)
        entity = owner.execute("SELECT entity FROM close_run WHERE close_id = %s", (close_id,)).fetchone()
        assert entity is not None
        owner.execute("INSERT INTO accounting_period (entity, period) VALUES (%s, '2026-10')", (entity[0],))
        owner.execute(
            "INSERT INTO book_account (book_set_id, account, name, type, subtype)"
            " SELECT book_set_id, '1510', 'Bank', 'asset', 'cash' FROM close_run WHERE close_id = %s",
            (close_id,),
        )
        put_task(owner, close_id, "recon", "awaiting_gate")
        gate_id = put_gate(owner, close_id, "recon")
        owner.execute("ALTER TABLE gate DISABLE TRIGGER gate_requirements_fixed")
        owner.execute("UPDATE gate SET accounts = '{1510}' WHERE gate_id = %s", (gate_id,))
        owner.execute("ALTER TABLE gate ENABLE ALWAYS TRIGGER gate_requirements_fixed")
        decide(owner, gate_id)
        owner.execute("UPDATE gate SET lifecycle = 'applied' WHERE gate_id = %s", (gate_id,))
        owner.execute("UPDATE close_task SET status = 'done' WHERE close_id = %s AND task = 'recon'", (close_id,))
    return {"close_id": close_id, "gate_id": gate_id, "entity": entity[0]}


def _as(database: Database, role: str) -> psycopg.Connection[Any]:
    return psycopg.connect(database.engine_url if role == "engine" else database.callbacks_url, autocommit=True)


def _journal(conn: psycopg.Connection[Any], entity: str, account: str, amount: str, **source: str) -> int:
    with conn.transaction():
        row = conn.execute(
            "INSERT INTO journal (idempotency_key, request_hash, entity, period, journal_date, memo, posted_by,"
            " source_close, source_task)"
            " VALUES (%s, 'h', %s, '2026-10', '2026-10-30', 'JE-0042', 'orchestrator', %s, %s)"
            " RETURNING journal_id",
            (uuid.uuid4().hex, entity, source.get("close"), source.get("task")),
        ).fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO journal_line (journal_id, line_no, account, amount, description) VALUES"
            " (%s, 1, %s, %s, 'x'), (%s, 2, '4000', %s, 'y')",
            (row[0], account, Decimal(amount), row[0], -Decimal(amount)),
        )
    return int(row[0])


def _voids(database: Database, gate_id: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database.url, autocommit=True) as owner:
        return owner.execute(
            "SELECT change_table, change_ref, account, amount, currency FROM sign_off_void WHERE gate_id = %s",
            (gate_id,),
        ).fetchall()


def test_a_raw_journal_line_on_a_covered_account_is_recorded_as_a_void(
    database: Database, approved: dict[str, str]
) -> None:
    with _as(database, "engine") as engine:
        _journal(engine, approved["entity"], "4000", "10.00")  # only 4000 and... 4000: not covered
        assert _voids(database, approved["gate_id"]) == []
        journal_id = _journal(engine, approved["entity"], "1510", "1250.00")
        status = engine.execute("SELECT status FROM gate_state WHERE gate_id = %s", (approved["gate_id"],)).fetchone()
    assert _voids(database, approved["gate_id"]) == [
        ("journal_line", str(journal_id), "1510", Decimal("1250.00"), "GBP")
    ]
    assert status == ("voided",)


def test_the_run_and_the_period_do_not_close_over_a_standing_void(database: Database, approved: dict[str, str]) -> None:
    with _as(database, "engine") as engine:
        # before the change the engine role may close the run (every task is done)
        with engine.transaction():
            engine.execute(
                "UPDATE close_run SET status = 'awaiting_approval' WHERE close_id = %s", (approved["close_id"],)
            )
        _journal(engine, approved["entity"], "1510", "5.00")
        with pytest.raises(psycopg.errors.CheckViolation, match="sign-off was voided"):
            engine.execute("UPDATE close_run SET status = 'closed' WHERE close_id = %s", (approved["close_id"],))
        with pytest.raises(psycopg.errors.CheckViolation, match="sign-off of close"):
            engine.execute(
                "UPDATE accounting_period SET status = 'closed' WHERE entity = %s AND period = '2026-10'",
                (approved["entity"],),
            )


def test_without_a_void_the_same_close_closes(database: Database, approved: dict[str, str]) -> None:
    """The control for the test above: the run closes when nothing changed after approval."""
    with _as(database, "engine") as engine:
        engine.execute("UPDATE close_run SET status = 'closed' WHERE close_id = %s", (approved["close_id"],))
        row = engine.execute("SELECT status FROM close_run WHERE close_id = %s", (approved["close_id"],)).fetchone()
    assert row == ("closed",)


def test_a_done_task_reopens_only_over_a_void_of_its_attempt(database: Database, approved: dict[str, str]) -> None:
    reopen = "UPDATE close_task SET status = 'pending', attempt = 2 WHERE close_id = %s AND task = 'recon'"
    with _as(database, "engine") as engine:
        with pytest.raises(psycopg.errors.CheckViolation, match="done work reopens only when a change voids"):
            engine.execute(reopen, (approved["close_id"],))
        _journal(engine, approved["entity"], "1510", "5.00")
        engine.execute(reopen, (approved["close_id"],))


def test_the_tasks_own_posting_does_not_void_its_gate(database: Database, approved: dict[str, str]) -> None:
    with _as(database, "engine") as engine:
        _journal(engine, approved["entity"], "1510", "7.00", close=approved["close_id"], task="recon")
    assert _voids(database, approved["gate_id"]) == []


@pytest.mark.parametrize("table", ["book_bank_line", "book_gl_line"])
def test_a_bank_line_of_a_new_feed_or_a_gl_line_on_a_covered_account_voids_the_sign_off(
    database: Database, approved: dict[str, str], table: str
) -> None:
    with _as(database, "engine") as engine:
        book = engine.execute(
            "SELECT book_set_id FROM close_run WHERE close_id = %s", (approved["close_id"],)
        ).fetchone()
        assert book is not None
        if table == "book_bank_line":
            engine.execute(
                "INSERT INTO bank_feed (book_set_id, feed_version, source, digest, loaded_by)"
                " VALUES (%s, 2, 'late.csv', 'd2', 'dana.reyes')",
                (book[0],),
            )
            engine.execute(
                "INSERT INTO book_bank_line (book_set_id, feed_version, bank_line_id, account, line_date, amount,"
                " reference, description) VALUES (%s, 2, 'B-77', '1510', '2026-10-30', 99.10, 'R', 'late'),"
                " (%s, 2, 'B-78', '4000', '2026-10-30', 1.00, 'R', 'elsewhere')",
                (book[0], book[0]),
            )
            expected = ("book_bank_line", "B-77", "1510", Decimal("99.10"), "GBP")
        else:
            engine.execute(
                "INSERT INTO book_gl_line (book_set_id, line_id, journal_id, line_date, account, amount, reference,"
                " description) VALUES (%s, 'L-1', 'JE-0042', '2026-10-30', '1510', 12.00, 'R', 'late')",
                (book[0],),
            )
            expected = ("book_gl_line", "JE-0042", "1510", Decimal("12.00"), "GBP")
        # a second change meets a voided gate and adds nothing
        _journal(engine, approved["entity"], "1510", "3.00")
    assert _voids(database, approved["gate_id"]) == [expected]


@pytest.mark.parametrize("role", ["engine", "callbacks"])
def test_no_service_role_writes_changes_or_removes_a_void(
    database: Database, approved: dict[str, str], role: str
) -> None:
    with _as(database, "engine") as engine:
        _journal(engine, approved["entity"], "1510", "5.00")
    attacks = [
        "UPDATE sign_off_void SET amount = 0",
        "DELETE FROM sign_off_void",
        "TRUNCATE sign_off_void",
        "INSERT INTO sign_off_void (gate_id, close_id, task, attempt, change_table, change_ref, change_line, account,"
        " description, amount, currency, changed_by) SELECT gate_id, close_id, task, attempt, change_table,"
        " change_ref, change_line, account, description, amount, currency, changed_by FROM sign_off_void",
        "ALTER TABLE sign_off_void DISABLE TRIGGER sign_off_void_append_only",
        "ALTER TABLE journal_line DISABLE TRIGGER journal_line_voids_sign_offs",
        "DROP TRIGGER journal_line_voids_sign_offs ON journal_line",
        "UPDATE gate SET accounts = '{}'",
        "CREATE TEMPORARY TABLE sign_off_void (gate_id uuid)",
    ]
    with _as(database, role) as attacker:
        for sql in attacks:
            with pytest.raises(REFUSED):
                attacker.execute(sql)
    assert len(_voids(database, approved["gate_id"])) == 1


def test_a_line_cannot_be_posted_elsewhere_and_moved_onto_the_account(
    database: Database, approved: dict[str, str]
) -> None:
    with _as(database, "engine") as engine:
        journal_id = _journal(engine, approved["entity"], "4100", "5.00")
        with pytest.raises(REFUSED):
            engine.execute("UPDATE journal_line SET account = '1510' WHERE journal_id = %s", (journal_id,))
        with pytest.raises(REFUSED):
            engine.execute("UPDATE journal SET period = '2026-10' WHERE journal_id = %s", (journal_id,))
    assert _voids(database, approved["gate_id"]) == []


@pytest.mark.parametrize("supersedes", [False, True], ids=["same-id-new-set", "supersedes"])
def test_a_new_version_of_a_certified_certificate_voids_its_payment_sign_off(
    database: Database, supersedes: bool
) -> None:
    """The certificates workflow: the run's entity is its certificate; the same certificate in a new set (or one that
    says it supersedes it) voids the approved payment gate, naming the contract and the sum the new version claims."""
    certificate = f"CERT-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database.url, autocommit=True) as owner:
        seed_approver(owner)
        book = owner.execute(
            "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
            " VALUES (%s, '2026-10', 'GBP', 'test', '{}', 'd') RETURNING book_set_id",
            (certificate,),
        ).fetchone()
        assert book is not None
        close_id = str(uuid.uuid4())
        owner.execute(
            "INSERT INTO close_run (close_id, entity, period, book_set_id, policy_digest, checklist_digest,"
            " started_by, workflow) VALUES (%s, %s, '2026-10', %s, 'p', 'c', 'test-starter', 'certificates')",
            (close_id, certificate, book[0]),
        )
        put_task(owner, close_id, "payment", "awaiting_gate")
        gate_id = put_gate(owner, close_id, "payment")
        decide(owner, gate_id)
    with _as(database, "engine") as engine:
        set_id = engine.execute(
            "INSERT INTO construction_set (source, digest, loaded_by) VALUES ('late.json', %s, 'dana.reyes')"
            " RETURNING set_id",
            (uuid.uuid4().hex * 2,),
        ).fetchone()
        assert set_id is not None
        engine.execute(
            "INSERT INTO construction_contract (set_id, contract_id, form, doc, sha256)"
            " VALUES (%s, 'K-1', 'JCT', '{}', %s)",
            (set_id[0], "0" * 64),
        )
        doc = {"totals": {"amount_due": "48200.00"}, **({"supersedes": certificate} if supersedes else {})}
        engine.execute(
            "INSERT INTO construction_certificate (set_id, certificate_id, contract_id, number, period,"
            " submitted_on, doc, sha256) VALUES (%s, %s, 'K-1', 3, '2026-10', '2026-10-25', %s, %s)",
            (set_id[0], f"{certificate}-R" if supersedes else certificate, Jsonb(doc), "1" * 64),
        )
    reference = f"{certificate}-R" if supersedes else certificate
    assert _voids(database, gate_id) == [("construction_certificate", reference, "K-1", Decimal("48200.00"), "GBP")]


async def test_work_downstream_of_a_voided_sign_off_is_held_until_it_is_approved_again(
    database: Database, approved: dict[str, str]
) -> None:
    from types import SimpleNamespace

    from countersign.engine.sign_off_voids import held_by_voids

    workflow: Any = SimpleNamespace(
        tasks=[
            SimpleNamespace(id="recon", depends_on=()),
            SimpleNamespace(id="after", depends_on=("recon",)),
            SimpleNamespace(id="later", depends_on=("after",)),
            SimpleNamespace(id="other", depends_on=()),
        ]
    )
    close: Any = SimpleNamespace(close_id=approved["close_id"])
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        assert await held_by_voids(engine, close, workflow) == set()
        with _as(database, "engine") as raw:
            _journal(raw, approved["entity"], "1510", "5.00")
        assert await held_by_voids(engine, close, workflow) == {"after", "later"}


def test_not_even_the_owner_changes_or_removes_a_void(database: Database, approved: dict[str, str]) -> None:
    with _as(database, "engine") as engine:
        _journal(engine, approved["entity"], "1510", "5.00")
    with psycopg.connect(database.url, autocommit=True) as owner:
        for sql in ("UPDATE sign_off_void SET amount = 0", "DELETE FROM sign_off_void", "TRUNCATE sign_off_void"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                owner.execute(sql)
    assert len(_voids(database, approved["gate_id"])) == 1


async def test_a_new_bank_feed_after_the_bank_reconciliation_was_approved_voids_it_and_it_runs_again(
    conn: Any, runtime: Any, engine_ctx: Any, api: Any, default_books: Any, tmp_path: Any
) -> None:
    """The importer's path: a corrected feed loaded after the reconciliation's approval reopens it."""
    from countersign.engine.books import load_bank_feed
    from tests.engine.workflow_support import approve_open_gates

    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)  # account 1000 halts the bank reconciliation
    book_set = await count(conn, "SELECT book_set_id FROM close_run WHERE close_id = %s", close_id)
    corrected = default_books / "corrected" / "bank_lines.csv"
    await load_bank_feed(conn, book_set, corrected, loaded_by="alice.chen", close_id=close_id)
    bank_gate = None
    for _ in range(6):
        await approve_open_gates(api, conn, close_id, tasks={"bank_reconciliation"})
        await advance(conn, close_id, engine_ctx)
        bank_gate = await (
            await conn.execute(
                "SELECT g.gate_id::text, g.accounts FROM gate g JOIN gate_state s USING (gate_id)"
                " JOIN close_task t ON t.close_id = g.close_id AND t.task = g.task"
                " WHERE g.close_id = %s AND g.task = 'bank_reconciliation' AND g.kind = 'approval'"
                " AND s.status = 'approved' AND t.status = 'done'",
                (close_id,),
            )
        ).fetchone()
        if bank_gate is not None:
            break
    assert bank_gate is not None, "the bank reconciliation passed its approval gate"
    gate_id, accounts = bank_gate
    assert "1000" in accounts

    lines = corrected.read_text(encoding="utf-8").splitlines()
    late = tmp_path / "bank_lines.csv"
    late.write_text("\n".join([*lines, "BNK-1000-9999999,1000,2026-10-30,-77.15,PAY-LATE,Late card payment"]) + "\n")
    await load_bank_feed(conn, book_set, late, loaded_by="alice.chen", close_id=close_id)

    assert await count(conn, "SELECT count(*) FROM sign_off_void WHERE gate_id = %s", gate_id) >= 1
    late_line = await (
        await conn.execute(
            "SELECT account, amount, currency, changed_by FROM sign_off_void"
            " WHERE gate_id = %s AND change_ref = 'BNK-1000-9999999'",
            (gate_id,),
        )
    ).fetchone()
    assert late_line == ("1000", Decimal("-77.15"), "GBP", "alice.chen")
    await advance(conn, close_id, engine_ctx)
    task = await (
        await conn.execute(
            "SELECT attempt FROM close_task WHERE close_id = %s AND task = 'bank_reconciliation'", (close_id,)
        )
    ).fetchone()
    traced = await count(
        conn, "SELECT count(*) FROM trace_event WHERE close_id = %s AND kind = 'sign_off_voided'", close_id
    )
    assert traced == 1 and task is not None and task[0] >= 3
