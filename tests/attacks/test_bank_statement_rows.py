"""A bank statement's rows hold whoever writes them (migration 0019).

Each test is an attack written as raw SQL on a service role's own connection, autocommit off, the way a compromised
engine process would try it, bypassing the books loader: a statement whose lines do not add up or are fewer than it
states, a line slipped into a statement after it committed or into another account's statement, a statement outside
its books' period, an edit of a loaded row, a temporary table standing in for a real one. The negative control at the
end shows the balance attack committing once the trigger's balance check is taken out. `owner` (the schema owner's
autocommit connection) comes from tests/attacks/conftest.py.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from countersign.bootstrap.database import Database

REFUSED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.CheckViolation)
NEW_TABLES = ("book_bank_statement", "book_rate", "book_supplier_bank_change")


@pytest.fixture
def engine(database: Database) -> Iterator[psycopg.Connection[Any]]:
    """The engine role's own connection, autocommit off: every attack commits at its end, as a process would."""
    with psycopg.connect(database.engine_url, autocommit=False) as conn:
        yield conn


def book_set(conn: psycopg.Connection[Any], period: str = "2026-10") -> int:
    """A book set with its first bank feed, as the engine role may insert them."""
    row = conn.execute(
        "INSERT INTO public.book_set (entity, period, currency, source, manifest, digest)"
        " VALUES ('ACME-UK', %s, 'GBP', 'attack', '{}', %s) RETURNING book_set_id",
        (period, uuid.uuid4().hex),
    ).fetchone()
    assert row is not None
    conn.execute(
        "INSERT INTO public.bank_feed (book_set_id, feed_version, source, digest, loaded_by)"
        " VALUES (%s, 1, 'bank_lines.csv', 'feed-1', 'attacker')",
        (row[0],),
    )
    return int(row[0])


def statement(
    conn: psycopg.Connection[Any],
    book_set_id: int,
    *,
    statement_id: str = "S-2026-10",
    account: str = "1000",
    currency: str = "GBP",
    from_date: str = "2026-10-01",
    to_date: str = "2026-10-31",
    opening: str = "1000.00",
    closing: str = "1300.00",
    entries: int = 2,
) -> None:
    conn.execute(
        "INSERT INTO public.book_bank_statement (book_set_id, feed_version, statement_id, account, bank_account,"
        " currency, from_date, to_date, opening_balance, closing_balance, opening_stated, entries, format, source,"
        " source_sha256) VALUES (%s, 1, %s, %s, 'GB33BUKB20201555555555', %s, %s, %s, %s, %s, true, %s, 'books',"
        " 'bank_lines.csv', %s)",
        (book_set_id, statement_id, account, currency, from_date, to_date, opening, closing, entries, "ab" * 32),
    )


def lines(
    conn: psycopg.Connection[Any],
    book_set_id: int,
    amounts: Sequence[str],
    *,
    statement_id: str = "S-2026-10",
    account: str = "1000",
    currency: str | None = None,
    table: str = "public.book_bank_line",
) -> None:
    for amount in amounts:
        conn.execute(
            f"INSERT INTO {table} (book_set_id, feed_version, bank_line_id, account, line_date, amount, reference,"
            " description, currency, statement_id) VALUES (%s, 1, %s, %s, '2026-10-15', %s, 'REF', 'line', %s, %s)",
            (book_set_id, uuid.uuid4().hex[:12], account, amount, currency, statement_id),
        )


def rows_in(owner: psycopg.Connection[Any], table: str) -> int:
    row = owner.execute(f"SELECT count(*) FROM public.{table}").fetchone()
    assert row is not None
    return int(row[0])


def nothing_stays(owner: psycopg.Connection[Any]) -> None:
    for table in ("book_set", "bank_feed", "book_bank_statement", "book_bank_line"):
        assert rows_in(owner, table) == 0, table


# --- at commit: a statement holds its lines, as many as it says, opening + lines = closing, in its period --------


def test_a_statement_whose_lines_do_not_add_up_cannot_commit(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=2)
    lines(engine, books, ["100.00", "199.99"])  # 1000.00 + 299.99 is not 1300.00
    with pytest.raises(psycopg.errors.CheckViolation, match=r"opening 1000.00 \+ movements 299.99 is not the closing"):
        engine.commit()
    nothing_stays(owner)


def test_a_statement_whose_lines_add_up_commits(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """The control for the attacks below: the same rows, adding up, commit."""
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=2)
    lines(engine, books, ["100.00", "200.00"])
    engine.commit()
    assert rows_in(owner, "book_bank_statement") == 1
    assert rows_in(owner, "book_bank_line") == 2


def test_a_statement_holding_fewer_lines_than_it_states_cannot_commit(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=3)
    lines(engine, books, ["100.00", "200.00"])  # they add up; one entry is missing
    with pytest.raises(psycopg.errors.CheckViolation, match="holds 2 entries, not the 3 it states"):
        engine.commit()
    nothing_stays(owner)


def test_a_statement_without_its_lines_cannot_commit_alone(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """A statement and its lines commit together: the lines cannot follow in a later transaction."""
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=2)
    with pytest.raises(psycopg.errors.CheckViolation, match="holds 0 entries, not the 2 it states"):
        engine.commit()
    nothing_stays(owner)


@pytest.mark.parametrize(
    ("from_date", "to_date"),
    [("2026-09-28", "2026-10-31"), ("2026-10-01", "2026-11-02"), ("2026-11-01", "2026-11-30")],
)
def test_a_statement_outside_its_books_period_cannot_commit(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], from_date: str, to_date: str
) -> None:
    books = book_set(engine, "2026-10")
    statement(engine, books, from_date=from_date, to_date=to_date)
    lines(engine, books, ["100.00", "200.00"])
    with pytest.raises(psycopg.errors.CheckViolation, match=f"covers {from_date} to {to_date}, outside the period"):
        engine.commit()
    nothing_stays(owner)


# --- at insert: a line joins only a statement of its own feed, account and currency, that has room ---------------


@pytest.mark.parametrize("amount", ["0.00", "50.00"])
def test_no_line_joins_a_statement_after_it_committed(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], amount: str
) -> None:
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=2)
    lines(engine, books, ["100.00", "200.00"])
    engine.commit()
    with pytest.raises(psycopg.errors.CheckViolation, match="states 2 entries and cannot hold 3"):
        lines(engine, books, [amount])
    engine.rollback()
    assert rows_in(owner, "book_bank_line") == 2


def test_checking_a_statement_early_does_not_open_it_to_more_lines(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """The balance check fired early with SET CONSTRAINTS, a line added after it is still refused."""
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=2)
    lines(engine, books, ["100.00", "200.00"])
    engine.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the deferred check runs now, and passes
    with pytest.raises(psycopg.errors.CheckViolation, match="states 2 entries and cannot hold 3"):
        lines(engine, books, ["0.00"])
    engine.rollback()
    nothing_stays(owner)


def test_a_line_of_a_later_feed_cannot_join_an_earlier_feeds_statement(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=2)
    lines(engine, books, ["100.00", "200.00"])
    engine.commit()
    engine.execute(
        "INSERT INTO public.bank_feed (book_set_id, feed_version, source, digest, loaded_by)"
        " VALUES (%s, 2, 'bank_lines.csv', 'feed-2', 'attacker')",
        (books,),
    )
    with pytest.raises(psycopg.errors.CheckViolation, match="names statement S-2026-10, which feed 2 does not hold"):
        engine.execute(
            "INSERT INTO public.book_bank_line (book_set_id, feed_version, bank_line_id, account, line_date, amount,"
            " reference, description, statement_id) VALUES (%s, 2, 'L-2', '1000', '2026-10-15', 1, 'r', 'd',"
            " 'S-2026-10')",
            (books,),
        )
    engine.rollback()
    assert rows_in(owner, "book_bank_line") == 2


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ({"account": "1010"}, "which feed 1 does not hold for its account and currency"),
        ({"currency": "USD"}, "which feed 1 does not hold for its account and currency"),
        ({"statement_id": "S-NOWHERE"}, "names statement S-NOWHERE, which feed 1 does not hold"),
    ],
)
def test_a_line_cannot_name_a_statement_of_another_account_or_currency(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], line: dict[str, str], match: str
) -> None:
    books = book_set(engine)
    statement(engine, books, account="1000", currency="GBP", opening="1000.00", closing="1300.00", entries=2)
    lines(engine, books, ["100.00"])
    with pytest.raises(psycopg.errors.CheckViolation, match=match):
        lines(engine, books, ["200.00"], **line)
    engine.rollback()
    nothing_stays(owner)


def test_two_accounts_may_number_their_statements_alike(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Banks number statements per account (MT940 :28C:): each account's statement holds its own lines."""
    books = book_set(engine)
    statement(engine, books, statement_id="00001/001", account="1000", opening="0.00", closing="300.00", entries=2)
    statement(engine, books, statement_id="00001/001", account="1010", opening="50.00", closing="40.00", entries=1)
    lines(engine, books, ["100.00", "200.00"], statement_id="00001/001", account="1000")
    lines(engine, books, ["-10.00"], statement_id="00001/001", account="1010")
    engine.commit()
    assert rows_in(owner, "book_bank_statement") == 2
    with pytest.raises(psycopg.errors.CheckViolation, match="states 1 entries and cannot hold 2"):
        lines(engine, books, ["0.00"], statement_id="00001/001", account="1010")
    engine.rollback()


# --- loaded rows never change ----------------------------------------------------------------------------------


def _seed_new_tables(conn: psycopg.Connection[Any]) -> None:
    books = book_set(conn)
    statement(conn, books, opening="1000.00", closing="1300.00", entries=2)
    lines(conn, books, ["100.00", "200.00"])
    conn.execute(
        "INSERT INTO public.book_rate (book_set_id, from_currency, to_currency, rate, rate_date, source)"
        " VALUES (%s, 'USD', 'GBP', 0.79, '2026-10-31', 'ECB')",
        (books,),
    )
    conn.execute(
        "INSERT INTO public.book_supplier_bank_change (book_set_id, change_id, vendor, changed_on, old_account,"
        " new_account, changed_by) VALUES (%s, 'CH-1', 'Fenwick Trading LLP', '2026-10-12', 'GB11OLD', 'GB22NEW',"
        " 'erp.user')",
        (books,),
    )
    conn.commit()


CHANGES = {
    "book_bank_statement": "UPDATE {table} SET closing_balance = closing_balance + 1",
    "book_rate": "UPDATE {table} SET rate = 1",
    "book_supplier_bank_change": "UPDATE {table} SET new_account = 'GB99ATTACKER'",
}


@pytest.mark.parametrize("table", NEW_TABLES)
@pytest.mark.parametrize("verb", ["UPDATE", "DELETE", "TRUNCATE"])
def test_the_engine_role_cannot_change_a_loaded_row(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], table: str, verb: str
) -> None:
    _seed_new_tables(engine)
    sql = {"UPDATE": CHANGES[table], "DELETE": "DELETE FROM {table}", "TRUNCATE": "TRUNCATE {table}"}[verb]
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
        engine.execute(sql.format(table=f"public.{table}"))
    engine.rollback()
    assert rows_in(owner, table) == 1


@pytest.mark.parametrize("table", NEW_TABLES)
@pytest.mark.parametrize("verb", ["UPDATE", "DELETE", "TRUNCATE"])
def test_not_even_the_owner_changes_a_loaded_row(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], table: str, verb: str
) -> None:
    _seed_new_tables(engine)
    sql = {"UPDATE": CHANGES[table], "DELETE": "DELETE FROM {table}", "TRUNCATE": "TRUNCATE {table} CASCADE"}[verb]
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="books are immutable"):
        owner.execute(sql.format(table=f"public.{table}"))
    assert rows_in(owner, table) == 1


# --- the callbacks role writes no books ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "insert",
    [
        "INSERT INTO public.book_bank_statement (book_set_id, feed_version, statement_id, account, bank_account,"
        " currency, from_date, to_date, opening_balance, closing_balance, opening_stated, entries, format, source,"
        " source_sha256) VALUES (%(b)s, 1, 'X', '1000', 'GB33', 'GBP', '2026-10-01', '2026-10-31', 0, 0, true, 0,"
        " 'books', 's', repeat('a', 64))",
        "INSERT INTO public.book_bank_line (book_set_id, feed_version, bank_line_id, account, line_date, amount,"
        " reference, description) VALUES (%(b)s, 1, 'X', '1000', '2026-10-01', 1, 'r', 'd')",
        "INSERT INTO public.book_rate (book_set_id, from_currency, to_currency, rate, rate_date, source)"
        " VALUES (%(b)s, 'USD', 'GBP', 2, '2026-10-31', 'callbacks')",
        "INSERT INTO public.book_supplier_bank_change (book_set_id, change_id, vendor, changed_on, old_account,"
        " new_account, changed_by) VALUES (%(b)s, 'CH-X', 'v', '2026-10-01', 'a', 'b', 'c')",
    ],
)
def test_the_callbacks_role_cannot_insert_book_rows(
    database: Database, engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], insert: str
) -> None:
    books = book_set(engine)
    engine.commit()
    with psycopg.connect(database.callbacks_url, autocommit=False) as callbacks:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            callbacks.execute(insert, {"b": books})
        callbacks.rollback()
    for table in ("book_bank_statement", "book_bank_line", "book_rate", "book_supplier_bank_change"):
        assert rows_in(owner, table) == 0


# --- names: a temporary table cannot stand in for a real one ---------------------------------------------------


def _dbname(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT quote_ident(current_database())").fetchone()
    assert row is not None
    return str(row[0])


def test_the_engine_role_cannot_create_a_temporary_book_table(engine: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="temporary"):
        engine.execute("CREATE TEMP TABLE book_bank_line (LIKE public.book_bank_line INCLUDING DEFAULTS)")


@pytest.fixture
def temporary_tables_allowed(owner: psycopg.Connection[Any]) -> None:
    """A deployment where the revoke did not happen (a clone, a restore): the triggers must still read public's."""
    owner.execute(f"GRANT TEMPORARY ON DATABASE {_dbname(owner)} TO countersign_engine")


def _unqualified_sum(conn: psycopg.Connection[Any]) -> Decimal:
    row = conn.execute("SELECT coalesce(sum(amount), 0) FROM book_bank_line").fetchone()
    assert row is not None
    return Decimal(row[0])


@pytest.mark.usefixtures("temporary_tables_allowed")
def test_a_planted_line_table_does_not_make_a_statement_add_up(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=2)
    lines(engine, books, ["100.00", "100.00"])  # public's lines move 200.00
    engine.execute("CREATE TEMP TABLE book_bank_line (LIKE public.book_bank_line INCLUDING DEFAULTS)")
    lines(engine, books, ["100.00", "200.00"], table="pg_temp.book_bank_line")  # the plant moves 300.00
    assert _unqualified_sum(engine) == Decimal("300.00")  # the session's own name now reads the plant
    with pytest.raises(psycopg.errors.CheckViolation, match=r"movements 200.00 is not the closing balance 1300.00"):
        engine.commit()
    nothing_stays(owner)


@pytest.mark.usefixtures("temporary_tables_allowed")
def test_a_planted_book_set_does_not_move_a_statement_into_its_period(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    books = book_set(engine, "2026-10")
    engine.execute("CREATE TEMP TABLE book_set (book_set_id bigint, period text)")
    engine.execute("INSERT INTO pg_temp.book_set VALUES (%s, '2026-09')", (books,))
    statement(engine, books, from_date="2026-09-01", to_date="2026-09-30")
    lines(engine, books, ["100.00", "200.00"])
    with pytest.raises(psycopg.errors.CheckViolation, match="outside the period 2026-10"):
        engine.commit()
    nothing_stays(owner)


@pytest.mark.usefixtures("temporary_tables_allowed")
def test_a_planted_statement_table_does_not_let_a_line_join_a_statement_that_is_not_there(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    books = book_set(engine)
    statement(engine, books, statement_id="S-REAL", opening="0.00", closing="0.00", entries=0)
    engine.commit()
    engine.execute("CREATE TEMP TABLE book_bank_statement (LIKE public.book_bank_statement)")
    engine.execute(
        "INSERT INTO pg_temp.book_bank_statement SELECT * FROM public.book_bank_statement WHERE statement_id = 'S-REAL'"
    )
    engine.execute("UPDATE pg_temp.book_bank_statement SET statement_id = 'S-GHOST', entries = 5")
    with pytest.raises(psycopg.errors.CheckViolation, match="names statement S-GHOST, which feed 1 does not hold"):
        lines(engine, books, ["100.00"], statement_id="S-GHOST")
    engine.rollback()
    with pytest.raises(psycopg.errors.CheckViolation, match="states 0 entries and cannot hold 1"):
        lines(engine, books, ["100.00"], statement_id="S-REAL")  # the real statement, padded in the plant
    engine.rollback()
    assert rows_in(owner, "book_bank_line") == 0


# --- negative control: the attack tests see a trigger that stops checking ----------------------------------------


def test_negative_control_without_the_balance_check_the_attack_commits(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    (definition,) = owner.execute(
        "SELECT pg_get_functiondef('public.check_bank_statement_balances()'::regprocedure)"
    ).fetchone() or ("",)
    weakened, found = re.subn(
        r"IF NEW\.opening_balance \+ v_moved <> NEW\.closing_balance THEN.*?END IF;", "", definition, flags=re.S
    )
    assert found == 1, definition
    owner.execute(weakened)  # CREATE OR REPLACE FUNCTION, as the owner, in this test's own database
    books = book_set(engine)
    statement(engine, books, opening="1000.00", closing="1300.00", entries=2)
    lines(engine, books, ["100.00", "199.99"])
    engine.commit()  # the attack of the first test, now admitted
    assert rows_in(owner, "book_bank_statement") == 1
