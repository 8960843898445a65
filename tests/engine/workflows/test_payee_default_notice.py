"""The payee's default notice (HGCRA 1996 s. 110B): recorded only when the payer's payment notice was not given in
time, once per certificate, for a sum of nothing or more with the claim beside it, and the final date for payment
postponed by the days it came after the payment notice's deadline.

Real PostgreSQL. A "late" set is a copy of the loaded set received 30 days ago (the owner writes it, as a set loaded
then would have been), so its payment notice's deadline has passed. The raw-SQL attacks run as the engine's and the
callbacks' own database roles.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import AsyncConnection

from countersign.cards.model import CardDataError
from countersign.cards.payments import payments_card, slack_payments_message, teams_payments_card
from countersign.certificates.model import PaymentTerms
from countersign.certificates.payment_notices import payment_dates
from countersign.delivery.worker import notice_text
from countersign.engine.orchestrator import advance
from countersign.engine.outbox import OutboxMessage
from countersign.engine.workflows.certificates.runs import payment_run_status
from countersign.services.default_notices import DefaultNoticeRefused, record_default_notice
from countersign.specialists.client import open_in_process
from tests.cards.test_payments_card import teams_text
from tests.engine import payment_run_support as support
from tests.engine.workflow_support import approve_open_gates
from tests.engine.workflows.test_certified_means_certified import CHANNEL, _context, _load, _rows, _start

DAYS_AGO = 30
_RECORD = "SELECT public.record_payee_default_notice(%s, %s, %s, %s, %s)"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return support.generate(tmp_path / "construction")


def _today() -> date:
    return datetime.now(UTC).date()


async def _late_set(conn: AsyncConnection[Any], data_dir: Path) -> int:
    """The loaded set, copied as one received DAYS_AGO days ago (as the owner)."""
    loaded = await _load(conn, data_dir)
    ((set_id,),) = await _rows(
        conn,
        "INSERT INTO construction_set (source, digest, loaded_by, loaded_at)"
        " VALUES ('late copy', %s, 'test-loader', now() - make_interval(days => %s)) RETURNING set_id",
        hashlib.sha256(b"late copy").hexdigest(),
        DAYS_AGO,
    )
    await conn.execute(
        "INSERT INTO construction_contract (set_id, contract_id, form, doc, sha256)"
        " SELECT %s, contract_id, form, doc, sha256 FROM construction_contract WHERE set_id = %s",
        (set_id, loaded),
    )
    await conn.execute(
        "INSERT INTO construction_certificate (set_id, certificate_id, contract_id, number, period, submitted_on, doc,"
        " sha256) SELECT %s, certificate_id, contract_id, number, period, submitted_on, doc, sha256"
        " FROM construction_certificate WHERE set_id = %s",
        (set_id, loaded),
    )
    return int(set_id)


def _first(data_dir: Path) -> dict[str, Any]:
    return support.find(support.read_certificates(data_dir), "CT-0001", 1)


def _dates(certificate: dict[str, Any]) -> Any:
    return payment_dates(
        PaymentTerms(),
        valuation_date=date.fromisoformat(certificate["date"]),
        received_on=_today() - timedelta(days=DAYS_AGO),
    )


async def _certify(conn: Any, runtime: Any, api: Any, set_id: int, certificate_id: str) -> None:
    async with open_in_process(support.SPECIALISTS) as client:
        ctx = _context(runtime, client)
        close_id = await _start(conn, runtime, set_id, certificate_id)
        await advance(conn, close_id, ctx)
        await approve_open_gates(api, conn, close_id)
        assert (await advance(conn, close_id, ctx)).status == "closed"


async def test_with_no_payment_notice_the_payee_states_a_sum_and_the_final_date_moves_by_the_days_late(
    conn: Any, data_dir: Path
) -> None:
    first = _first(data_dir)
    await _late_set(conn, data_dir)
    expected = _dates(first)
    given = _today()
    recorded = await record_default_notice(
        conn,
        certificate_id=first["id"],
        stated_sum=Decimal("1000.00"),
        basis="the work valued at the end of January, as applied for less retention <!channel>",
        given_on=given,
        given_by="qs-for-the-contractor",
        channels=(CHANNEL,),
    )
    notice = recorded.notice
    late = (given - expected.payment_notice_by).days
    assert late == DAYS_AGO - 12  # received 30 days ago, due 7 days after, the payment notice 5 days after that
    assert (notice.kind, notice.currency, notice.stated_sum, notice.claimed_sum) == (
        "payee_default",
        "GBP",
        Decimal("1000.00"),
        Decimal(first["totals"]["amount_due"]),
    )
    assert (notice.payment_notice_deadline, notice.days_late, notice.final_date, notice.postponed_final_date) == (
        expected.payment_notice_by,
        late,
        expected.final_date,
        expected.final_date + timedelta(days=late),
    )
    assert notice.payment_notice_id is None
    assert "GBP 1,000.00 is due" in recorded.words and "was not given" in recorded.words
    assert f"({late} days later)" in recorded.words
    ((payload,),) = await _rows(conn, "SELECT payload FROM trace_event WHERE kind = 'payee_default_notice_recorded'")
    assert (payload["notice_id"], payload["stated_sum"], payload["days_late"]) == (notice.notice_id, "1000.00", late)
    posted = await _rows(
        conn,
        "SELECT message_id, dedupe_key, close_id::text, gate_id::text, platform, channel, kind, payload, attempts,"
        " template FROM outbox_message WHERE template = 'payee_default_notice'",
    )
    assert len(posted) == 1 and posted[0][7] == {"notice_id": notice.notice_id}
    text = await notice_text(conn, OutboxMessage(*posted[0]), "http://localhost:8000")
    assert text.startswith("Payee's default notice for certificate") and "GBP 1,000.00 is due" in text
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text  # the payee's words are inert on Slack


async def test_after_a_late_payment_notice_the_payee_may_still_give_one(
    conn: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    first = _first(data_dir)
    set_id = await _late_set(conn, data_dir)
    await _certify(conn, runtime, api, set_id, first["id"])
    ((payment_id, in_time),) = await _rows(
        conn, "SELECT notice_id, served_in_time FROM payment_notice WHERE kind = 'payment'"
    )
    assert in_time is False
    recorded = await record_default_notice(
        conn,
        certificate_id=first["id"],
        stated_sum=Decimal(first["totals"]["amount_due"]),
        basis="the sum applied for",
        given_on=_today(),
        given_by="qs-for-the-contractor",
    )
    assert recorded.notice.payment_notice_id == payment_id and "was given late" in recorded.words
    assert "the application claimed" not in recorded.words  # the stated sum is the claim


async def test_a_payment_notice_given_in_time_leaves_no_default_notice_to_give(
    conn: Any, database: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    first = _first(data_dir)
    set_id = await _load(conn, data_dir)
    await _certify(conn, runtime, api, set_id, first["id"])
    ((in_time,),) = await _rows(conn, "SELECT served_in_time FROM payment_notice WHERE kind = 'payment'")
    assert in_time is True
    with pytest.raises(DefaultNoticeRefused, match="was given in time"):
        await record_default_notice(
            conn,
            certificate_id=first["id"],
            stated_sum=Decimal("1.00"),
            basis="x",
            given_on=_today(),
            given_by="qs",
        )
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="was given in time"):
            await engine.execute(_RECORD, (first["id"], 1, "x", _today(), "qs"))
    assert await _rows(conn, "SELECT count(*) FROM payee_default_notice") == [(0,)]


async def test_a_payment_notice_given_in_time_refuses_it_even_long_after_the_deadline(
    conn: Any, database: Any, runtime: Any, api: Any, data_dir: Path
) -> None:
    """The deadline has passed, but the payer's notice beat it: the payee has no default notice to give. (The owner
    stamps the late set's notice as served in time, as one served 30 days ago would have been.)"""
    first = _first(data_dir)
    set_id = await _late_set(conn, data_dir)
    await _certify(conn, runtime, api, set_id, first["id"])
    async with conn.transaction():
        await conn.execute("ALTER TABLE payment_notice DISABLE TRIGGER payment_notice_immutable")
        await conn.execute("UPDATE payment_notice SET served_in_time = true WHERE kind = 'payment'")
        await conn.execute("ALTER TABLE payment_notice ENABLE ALWAYS TRIGGER payment_notice_immutable")
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="was given in time"):
            await engine.execute(_RECORD, (first["id"], 1, "x", _today(), "qs"))
    assert await _rows(conn, "SELECT count(*) FROM payee_default_notice") == [(0,)]


async def test_before_the_payment_notice_falls_due_no_default_notice_may_be_given(conn: Any, data_dir: Path) -> None:
    first = _first(data_dir)
    await _load(conn, data_dir)  # received today: the payment notice is due 12 days from now
    with pytest.raises(DefaultNoticeRefused, match="may be given only after it"):
        await record_default_notice(
            conn, certificate_id=first["id"], stated_sum=Decimal("1.00"), basis="x", given_on=_today(), given_by="qs"
        )


async def test_the_engine_role_cannot_record_a_second_a_negative_a_future_or_an_unknown_one_nor_change_it(
    conn: Any, database: Any, data_dir: Path
) -> None:
    first = _first(data_dir)
    await _late_set(conn, data_dir)
    today = _today()
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.CheckViolation, match="nothing or more"):
            await engine.execute(_RECORD, (first["id"], Decimal("-0.01"), "x", today, "qs"))
        with pytest.raises(psycopg.errors.CheckViolation, match="still to come"):
            await engine.execute(_RECORD, (first["id"], 1, "x", today + timedelta(days=1), "qs"))
        with pytest.raises(psycopg.errors.NoDataFound, match="no certificate"):
            await engine.execute(_RECORD, ("NO-SUCH-CERTIFICATE", 1, "x", today, "qs"))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            await engine.execute(
                "INSERT INTO payee_default_notice (set_id, certificate_id, currency, stated_sum, basis, given_on,"
                " given_by, due_date, final_date, payment_notice_deadline, days_late, postponed_final_date)"
                " SELECT set_id, certificate_id, 'GBP', 1, 'x', %s, 'qs', %s, %s, %s, 1, %s"
                " FROM construction_certificate WHERE certificate_id = %s LIMIT 1",
                (today, today, today, today - timedelta(days=1), today, first["id"]),
            )
        await engine.execute(_RECORD, (first["id"], 0, "nothing is due", today, "qs"))  # nothing is a sum
        with pytest.raises(psycopg.errors.UniqueViolation, match="has one already"):
            await engine.execute(_RECORD, (first["id"], 5, "a second go", today, "qs"))
        for statement in (
            "UPDATE payee_default_notice SET stated_sum = 99",
            "UPDATE payee_default_notice SET postponed_final_date = postponed_final_date + 30",
            "DELETE FROM payee_default_notice",
            "TRUNCATE payee_default_notice",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                await engine.execute(statement)
    async with await AsyncConnection.connect(database.callbacks_url, autocommit=True) as callbacks:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            await callbacks.execute(_RECORD, (first["id"], 1, "x", today, "qs"))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            await callbacks.execute("SELECT * FROM payee_default_notice")
    for statement in ("UPDATE payee_default_notice SET stated_sum = 99", "DELETE FROM payee_default_notice"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            await conn.execute(statement)  # not even the owner
    assert await _rows(conn, "SELECT stated_sum, basis FROM payee_default_notice") == [
        (Decimal("0.00"), "nothing is due")
    ]


async def test_the_recording_function_runs_as_the_owner_with_its_path_pinned_and_cannot_be_shadowed(
    conn: Any, database: Any
) -> None:
    ((secdef, config, owner),) = await _rows(
        conn,
        "SELECT p.prosecdef, p.proconfig, pg_get_userbyid(p.proowner) = current_user FROM pg_proc p"
        " WHERE p.proname = 'record_payee_default_notice'",
    )
    assert secdef and owner and config == ["search_path=pg_catalog, public, pg_temp"]
    async with await AsyncConnection.connect(database.engine_url, autocommit=True) as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no temp table may stand in for the notices
            await engine.execute("CREATE TEMP TABLE payment_notice (certificate_id text, served_in_time boolean)")


async def test_the_payment_runs_status_and_its_card_read_the_postponed_final_date(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    """The postponed final date is not only recorded: `payments status` and its card show it beside the one it
    replaced, and a run without a default notice shows its final date as the reconstruction computed it."""
    first = _first(data_dir)
    set_id = await _late_set(conn, data_dir)
    expected = _dates(first)
    recorded = await record_default_notice(
        conn,
        certificate_id=first["id"],
        stated_sum=Decimal("1000.00"),
        basis="as applied for",
        given_on=_today(),
        given_by="qs-for-the-contractor",
        channels=(CHANNEL,),
    )
    async with open_in_process(support.SPECIALISTS) as client:
        close_id = await _start(conn, runtime, set_id, first["id"])
        await advance(conn, close_id, _context(runtime, client))
    (row,) = [r for r in await payment_run_status(conn, set_id=set_id) if r["close_id"] == close_id]
    assert (row["final_date"], row["postponed_final_date"]) == (
        expected.final_date.isoformat(),
        recorded.notice.postponed_final_date.isoformat(),
    )
    words = (
        f"final date {recorded.notice.postponed_final_date.isoformat()} (postponed from"
        f" {expected.final_date.isoformat()} by the payee's default notice)"
    )
    card = payments_card([row])
    assert words in slack_payments_message(card)["blocks"][2]["text"]["text"]
    assert words in teams_text(teams_payments_card(card))
    row["postponed_final_date"] = None  # the same run before any default notice
    assert (
        f"final date {expected.final_date.isoformat()} ·"
        in slack_payments_message(payments_card([row]))["blocks"][2]["text"]["text"]
    )


async def test_a_stored_final_date_that_is_no_date_is_refused_by_the_card_naming_its_row_not_by_the_query(
    conn: Any, runtime: Any, data_dir: Path
) -> None:
    """One run whose stored final date is not a date (an edit in the reconstruction's result, as the owner can make
    before the gate opens) does not fail the status read for every run: the read passes the text on, and the card
    refuses it naming the row and the field."""
    first = _first(data_dir)
    set_id = await _load(conn, data_dir)
    async with open_in_process(support.SPECIALISTS) as client:
        close_id = await _start(conn, runtime, set_id, first["id"])
        await advance(conn, close_id, _context(runtime, client))
    await conn.execute("ALTER TABLE gate DISABLE TRIGGER USER")  # the owner, editing the frozen summary too
    try:
        for table, column, path in (
            ("close_task", "result", "{payment_dates,final_date}"),
            ("gate", "summary", "{certificate,payment_dates,final_date}"),
        ):
            await conn.execute(
                f"UPDATE {table} SET {column} = jsonb_set({column}, %s, '\"the 18th\"')"
                f" WHERE close_id = %s AND {column} #> %s IS NOT NULL",
                (path, close_id, path),
            )
    finally:
        await conn.execute("ALTER TABLE gate ENABLE TRIGGER USER")
    rows = await payment_run_status(conn, set_id=set_id)
    (index,) = [i for i, r in enumerate(rows) if r["close_id"] == close_id]
    assert rows[index]["final_date"] == "the 18th"
    with pytest.raises(CardDataError) as refused:
        payments_card(rows)
    assert refused.value.field == f"runs[{index}].final_date"
