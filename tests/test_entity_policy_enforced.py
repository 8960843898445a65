"""Per-entity materiality, converted amounts and always-human accounts, held by the database (migration 0020).

Each test is an attack written as raw SQL by a service role's own connection, the way a compromised engine would try
it: a gate opened below an entity's own materiality, or below the global thresholds once its foreign-currency amount
is converted at the close's rate, or for a foreign-currency amount its books hold no rate for; a journal line on an
always-human account with no person's approval behind it; a temporary table named like a policy table or `book_rate`
planted in front of the real one; a write to the policy itself. Each has its control: the same row at what policy
asks is admitted.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from datetime import date
from decimal import Decimal
from typing import Any

import psycopg
import pytest
import yaml

from countersign.bootstrap import migrate
from countersign.bootstrap.database import Database
from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.engine.postings import JournalLine, JournalRequest, PostingRefused, post_journal
from countersign.policy import FxRate, Policy, convert, load_workflows, materiality, parse_policy
from tests.test_database_boundary import _as, _decide, _seed

REFUSED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.CheckViolation)
CONFIG = PROJECT_ROOT / "config"
PERIOD = "2026-11"
ECB = "ECB euro reference rates"


@pytest.fixture
def owner(database: Database) -> Iterator[psycopg.Connection[Any]]:
    assert database.url is not None
    with psycopg.connect(database.url, autocommit=True) as conn:
        yield conn


def entity_policy_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CONFIG / "risk.yaml").read_text())
    data["always_human"] = {
        "tier": "high",
        "accounts": ["1000", "1010", "1300", "2300"],
        "events": ["supplier_bank_details_changed"],
    }
    data["entities"] = {
        "ACME-US": {
            "currency": "USD",
            "amount_thresholds": [
                {"min_amount": "100000.00", "tier": "high"},
                {"min_amount": "750000.00", "tier": "critical"},
            ],
            "always_human_accounts": ["1050"],
        },
        "ACME-NL": {"currency": "EUR"},
    }
    return data


def _seeded(database: Database, data: dict[str, Any]) -> Policy:
    """The owner's `db upgrade` with these rules."""
    policy = parse_policy(data, "risk.yaml")
    migrate.seed_policy(database, policy, load_workflows(CONFIG / "workflows", policy))
    return policy


@pytest.fixture
def entity_policy(database: Database, owner: psycopg.Connection[Any]) -> Policy:
    _seed(owner)  # the people who decide (and one close of ACME, in GBP)
    return _seeded(database, entity_policy_data())


def _close(
    owner: psycopg.Connection[Any], entity: str, currency: str, rate: str | None = None, period: str = PERIOD
) -> str:
    """A close of `entity` on books in `currency` (holding a `currency`->GBP `rate` when given), its period open."""
    book = owner.execute(
        "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
        " VALUES (%s, %s, %s, 'test', '{}', %s) RETURNING book_set_id",
        (entity, period, currency, uuid.uuid4().hex),
    ).fetchone()
    assert book is not None
    if rate is not None:
        owner.execute(
            "INSERT INTO book_rate (book_set_id, from_currency, to_currency, rate, rate_date, source)"
            " VALUES (%s, %s, 'GBP', %s, '2026-11-30', %s)",
            (book[0], currency, rate, ECB),
        )
    close_id = str(uuid.uuid4())
    owner.execute(
        "INSERT INTO close_run (close_id, entity, period, book_set_id, policy_digest, checklist_digest, started_by)"
        " VALUES (%s, %s, %s, %s, 'p', 'c', 'dana.reyes')",
        (close_id, entity, period, book[0]),
    )
    for task in ("variance_analysis", "accruals", "bank_reconciliation"):
        owner.execute("INSERT INTO close_task (close_id, task) VALUES (%s, %s)", (close_id, task))
    owner.execute(
        "INSERT INTO accounting_period (entity, period) VALUES (%s, %s) ON CONFLICT DO NOTHING", (entity, period)
    )
    return close_id


_ROLES = {"medium": (1, "controller"), "high": (1, "controller"), "critical": (2, "cfo")}


def _gate(conn: psycopg.Connection[Any], close_id: str, task: str, tier: str, amount: str | None = None) -> str:
    quorum, role = _ROLES[tier]
    gate_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO gate (gate_id, close_id, task, attempt, kind, tier, quorum, approver_role, rule, summary,"
        " prepared_by, due_at, expires_at, amount) VALUES (%s, %s, %s, 1, 'approval', %s, %s, %s, 'r', '{}',"
        " 'orchestrator', now() + interval '1 day', now() + interval '2 days', %s)",
        (gate_id, close_id, task, tier, quorum, role, amount),
    )
    return gate_id


def _post(
    conn: psycopg.Connection[Any],
    entity: str,
    lines: Sequence[tuple[str, str]],
    *,
    source_close: str | None = None,
    source_task: str | None = None,
) -> None:
    with conn.transaction():
        journal = conn.execute(
            "INSERT INTO journal (idempotency_key, request_hash, entity, period, journal_date, memo, source_close,"
            " source_task, posted_by) VALUES (%s, 'h', %s, %s, '2026-11-30', 'm', %s, %s, 'orchestrator')"
            " RETURNING journal_id",
            (uuid.uuid4().hex, entity, PERIOD, source_close, source_task),
        ).fetchone()
        assert journal is not None
        for line_no, (account, amount) in enumerate(lines, start=1):
            conn.execute(
                "INSERT INTO journal_line (journal_id, line_no, account, amount, description)"
                " VALUES (%s, %s, %s, %s, 'd')",
                (journal[0], line_no, account, amount),
            )


def _approve_and_apply(database: Database, gate_id: str, *, apply: bool = True) -> None:
    with _as(database, "callbacks") as callbacks:
        _decide(callbacks, gate_id, "alice.chen")
    if apply:
        with _as(database, "engine") as engine:
            engine.execute("UPDATE gate SET lifecycle = 'applied', applied_at = now() WHERE gate_id = %s", (gate_id,))


CASH_OUT = (("1000", "-5000.00"), ("6400", "5000.00"))
NO_CASH = (("2100", "-5000.00"), ("6400", "5000.00"))


# --- the seed ------------------------------------------------------------------------------------------------------


def test_db_upgrade_seeds_entities_their_thresholds_the_always_human_accounts_and_the_currency(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    shipped = owner.execute("SELECT entity, account FROM policy_always_human_account ORDER BY 1, 2").fetchall()
    assert shipped == [("*", "1000"), ("*", "1010"), ("*", "1300"), ("*", "2300")]
    assert owner.execute("SELECT currency, always_human_tier FROM policy_enforced").fetchone() == ("GBP", "medium")
    assert owner.execute("SELECT count(*) FROM policy_entity").fetchone() == (0,)
    _seeded(database, entity_policy_data())
    assert owner.execute("SELECT entity, currency FROM policy_entity ORDER BY 1").fetchall() == [
        ("ACME-NL", "EUR"),
        ("ACME-US", "USD"),
    ]
    assert owner.execute("SELECT entity, min_amount, tier FROM policy_entity_threshold ORDER BY 2").fetchall() == [
        ("ACME-US", Decimal("100000.00"), "high"),
        ("ACME-US", Decimal("750000.00"), "critical"),
    ]
    accounts = owner.execute("SELECT entity, account FROM policy_always_human_account ORDER BY 1, 2").fetchall()
    assert accounts == [*shipped, ("ACME-US", "1050")]
    assert owner.execute("SELECT currency, always_human_tier FROM policy_enforced").fetchone() == ("GBP", "high")


def test_a_policy_without_the_new_sections_seeds_none_of_them(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    data = entity_policy_data()
    del data["always_human"], data["entities"]
    _seeded(database, data)
    assert owner.execute("SELECT count(*) FROM policy_always_human_account").fetchone() == (0,)
    assert owner.execute("SELECT currency, always_human_tier FROM policy_enforced").fetchone() == ("GBP", None)
    owner.execute("INSERT INTO accounting_period (entity, period) VALUES ('ACME', %s)", (PERIOD,))
    with _as(database, "engine") as engine:
        _post(engine, "ACME", CASH_OUT)  # nothing is always-human now: cash posts like any account
    assert owner.execute("SELECT count(*) FROM journal_line WHERE account = '1000'").fetchone() == (1,)


# --- an entity's own materiality --------------------------------------------------------------------------------


@pytest.mark.usefixtures("entity_policy")
@pytest.mark.parametrize(
    ("tier", "amount", "admitted"),
    [
        ("medium", "99999.99", True),
        ("medium", "100000.00", False),  # ACME-US's own materiality: USD 100,000.00 needs high
        ("medium", "-120000.00", False),
        ("high", "120000.00", True),
        ("high", "750000.00", False),
        ("critical", "750000.00", True),
    ],
)
def test_a_gate_below_the_entitys_own_threshold_is_refused(
    database: Database, owner: psycopg.Connection[Any], tier: str, amount: str, admitted: bool
) -> None:
    close_id = _close(owner, "ACME-US", "USD")
    with _as(database, "engine") as engine:
        if admitted:
            _gate(engine, close_id, "variance_analysis", tier, amount)
        else:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="below the minimum"):
                _gate(engine, close_id, "variance_analysis", tier, amount)


@pytest.mark.usefixtures("entity_policy")
def test_an_entity_on_the_global_thresholds_is_not_held_to_another_entitys(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    close_id = _close(owner, "ACME-GB", "GBP")  # not in risk.yaml: GBP, the global GBP 250,000.00
    with _as(database, "engine") as engine:
        _gate(engine, close_id, "variance_analysis", "medium", "120000.00")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="below the minimum"):
            _gate(engine, close_id, "accruals", "high", "1000000.00")


# --- amounts compared after conversion at the close's rate ---------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "least"),
    [
        ("290000.00", "medium"),  # EUR 290,000.00 = GBP 229,100.00 at 0.79: unconverted it would need high
        ("316455.68", "medium"),  # = GBP 249,999.9872 -> 249,999.99
        ("316455.69", "high"),  # = GBP 249,999.9951 -> 250,000.00
        ("-400000.00", "high"),
        ("1265822.77", "high"),  # = GBP 999,999.9883 -> 999,999.99
        ("1265822.78", "critical"),  # = GBP 999,999.9962 -> 1,000,000.00
    ],
)
def test_a_foreign_currency_gate_is_held_to_the_global_thresholds_after_conversion(
    database: Database, owner: psycopg.Connection[Any], entity_policy: Policy, amount: str, least: str
) -> None:
    close_id = _close(owner, "ACME-NL", "EUR", rate="0.79")
    fx = FxRate("EUR", "GBP", Decimal("0.79"), date(2026, 11, 30), ECB)
    judged = materiality(entity_policy, Decimal(amount), entity="ACME-NL", fx=fx)  # what Python derives
    tiers = ["medium", "high", "critical"]
    with _as(database, "engine") as engine:
        for tier in tiers[: tiers.index(least)]:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="below the minimum"):
                _gate(engine, close_id, "variance_analysis", tier, amount)
        _gate(engine, close_id, "variance_analysis", least, amount)
    python_least = max(
        (t.tier for t in judged.thresholds if judged.compared >= t.min_amount),
        key=lambda name: entity_policy.tier(name).rank,
        default="medium",
    )
    assert python_least == least  # the database and countersign/policy/gates.py raise the tier at the same cent


@pytest.mark.usefixtures("entity_policy")
def test_a_foreign_currency_gate_with_an_amount_and_no_rate_is_refused(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    close_id = _close(owner, "ACME-NL", "EUR")
    _close(owner, "ACME-NL", "EUR", rate="0.0001", period="2026-10")  # another close's rate is not this close's
    with _as(database, "engine") as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match=r"hold no EUR->GBP rate"):
            _gate(engine, close_id, "variance_analysis", "critical", "10.00")
        _gate(engine, close_id, "variance_analysis", "medium")  # the control: no amount, nothing to convert


def test_the_database_rounds_a_conversion_as_policy_does(owner: psycopg.Connection[Any]) -> None:
    generator = random.Random(2026)
    cases = [(Decimal(a), Decimal(r)) for a, r in (("0.01", "0.5"), ("0.03", "0.5"), ("-0.03", "0.5"),
                                                    ("400000.00", "0.79"), ("316455.69", "0.79"))]  # fmt: skip
    cases += [
        (Decimal(generator.randint(-(10**16), 10**16)).scaleb(-2), Decimal(generator.randint(1, 10**12)).scaleb(-10))
        for _ in range(300)
    ]
    # Ties: an odd number of cents times one half.
    cases += [(Decimal(2 * generator.randint(0, 10**8) + 1).scaleb(-2), Decimal("0.5")) for _ in range(50)]
    rows = owner.execute(
        "SELECT a, r, public.convert_to_cent(a, r) FROM unnest(%s::numeric[], %s::numeric[]) AS c(a, r)",
        ([a for a, _ in cases], [r for _, r in cases]),
    ).fetchall()
    mismatches = [
        (a, r, got) for a, r, got in rows if got != convert(a, FxRate("EUR", "GBP", r, date(2026, 11, 30), ECB))
    ]
    assert mismatches == []
    assert len(rows) == 355


# --- always-human accounts ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("entity_policy")
def test_a_journal_line_on_an_always_human_account_without_a_person_is_refused(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    owner.execute("INSERT INTO accounting_period (entity, period) VALUES ('ACME', %s)", (PERIOD,))
    with _as(database, "engine") as engine:
        with pytest.raises(psycopg.errors.CheckViolation, match="account 1000 always needs a person for ACME"):
            _post(engine, "ACME", CASH_OUT)
        _post(engine, "ACME", NO_CASH)  # the control: an account nobody listed posts
    assert owner.execute("SELECT count(*) FROM journal_line WHERE account = '1000'").fetchone() == (0,)


@pytest.mark.usefixtures("entity_policy")
def test_cash_posts_only_once_its_tasks_gate_is_approved_and_applied(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    close_id = _close(owner, "ACME-GB", "GBP")
    source = {"source_close": close_id, "source_task": "accruals"}
    with _as(database, "engine") as engine:
        gate_id = _gate(engine, close_id, "accruals", "high")
        with pytest.raises(psycopg.errors.CheckViolation, match="always needs a person"):
            _post(engine, "ACME-GB", CASH_OUT, **source)  # the gate is open
    _approve_and_apply(database, gate_id, apply=False)
    with _as(database, "engine") as engine, pytest.raises(psycopg.errors.CheckViolation, match="applied, approved"):
        _post(engine, "ACME-GB", CASH_OUT, **source)  # approved, but the engine has not applied it
    with _as(database, "engine") as engine:
        engine.execute("UPDATE gate SET lifecycle = 'applied', applied_at = now() WHERE gate_id = %s", (gate_id,))
        _post(engine, "ACME-GB", CASH_OUT, **source)  # the control: a person approved the work
        with pytest.raises(psycopg.errors.CheckViolation, match="always needs a person"):
            _post(engine, "ACME-GB", CASH_OUT, source_close=close_id, source_task="bank_reconciliation")
    assert owner.execute("SELECT count(*) FROM journal_line WHERE account = '1000'").fetchone() == (1,)


@pytest.mark.usefixtures("entity_policy")
def test_an_approved_gate_below_the_always_human_tier_does_not_post_cash(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    close_id = _close(owner, "ACME-GB", "GBP")
    with _as(database, "engine") as engine:
        gate_id = _gate(engine, close_id, "variance_analysis", "medium")
    _approve_and_apply(database, gate_id)
    with _as(database, "engine") as engine, pytest.raises(psycopg.errors.CheckViolation, match="at tier high"):
        _post(engine, "ACME-GB", CASH_OUT, source_close=close_id, source_task="variance_analysis")


@pytest.mark.usefixtures("entity_policy")
def test_another_entitys_approval_or_an_earlier_attempts_does_not_post_cash(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    us_close = _close(owner, "ACME-US", "USD")
    gb_close = _close(owner, "ACME-GB", "GBP")
    with _as(database, "engine") as engine:
        us_gate = _gate(engine, us_close, "accruals", "high")
        gb_gate = _gate(engine, gb_close, "accruals", "high")
    _approve_and_apply(database, us_gate)
    _approve_and_apply(database, gb_gate)
    with _as(database, "engine") as engine:
        with pytest.raises(psycopg.errors.CheckViolation, match="always needs a person for ACME-GB"):
            _post(engine, "ACME-GB", CASH_OUT, source_close=us_close, source_task="accruals")
        where = "WHERE close_id = %s AND task = 'accruals'"
        engine.execute(f"UPDATE close_task SET status = 'running' {where}", (gb_close,))
        engine.execute(f"UPDATE close_task SET status = 'pending', attempt = 2 {where}", (gb_close,))
        with pytest.raises(psycopg.errors.CheckViolation, match="current attempt"):
            _post(engine, "ACME-GB", CASH_OUT, source_close=gb_close, source_task="accruals")
        _post(engine, "ACME-US", CASH_OUT, source_close=us_close, source_task="accruals")  # the control


@pytest.mark.usefixtures("entity_policy")
def test_an_entitys_own_always_human_account_is_always_human_for_it_alone(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    _close(owner, "ACME-US", "USD")
    _close(owner, "ACME-GB", "GBP")
    usd_cash = (("1050", "-10.00"), ("6400", "10.00"))
    with _as(database, "engine") as engine:
        with pytest.raises(psycopg.errors.CheckViolation, match="account 1050 always needs a person for ACME-US"):
            _post(engine, "ACME-US", usd_cash)
        _post(engine, "ACME-GB", usd_cash)  # the control: 1050 is ACME-US's alone


@pytest.mark.usefixtures("entity_policy")
async def test_the_engines_posting_path_reports_the_refusal_and_posts_behind_an_applied_gate(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    close_id = _close(owner, "ACME-GB", "GBP")
    request = JournalRequest(
        idempotency_key=f"close:{close_id}:accruals:attempt:1",
        entity="ACME-GB",
        period=PERIOD,
        journal_date=date(2026, 11, 30),
        memo="cash accrual",
        lines=[JournalLine("1000", Decimal("-75.00"), "cash"), JournalLine("6400", Decimal("75.00"), "fees")],
        source_close=close_id,
        source_task="accruals",
    )
    with _as(database, "engine") as engine:
        gate_id = _gate(engine, close_id, "accruals", "high")
    assert database.engine_url is not None
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as conn:
        with pytest.raises(PostingRefused, match="account 1000 always needs a person"):
            await post_journal(conn, request, posted_by="orchestrator")
        _approve_and_apply(database, gate_id)
        posted = await post_journal(conn, request, posted_by="orchestrator")
    assert posted.created


# --- names: a planted table changes nothing ------------------------------------------------------------------------


def _dbname(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT quote_ident(current_database())").fetchone()
    assert row is not None
    return str(row[0])


@pytest.fixture
def temporary_tables_allowed(owner: psycopg.Connection[Any]) -> None:
    """A deployment where the revoke did not happen (a clone, a restore): the functions must still hold."""
    owner.execute("GRANT TEMPORARY ON DATABASE " + _dbname(owner) + " TO countersign_engine, countersign_callbacks")


@pytest.mark.usefixtures("entity_policy", "temporary_tables_allowed")
def test_planted_policy_and_rate_tables_do_not_lower_a_gate_or_post_cash(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    us_close = _close(owner, "ACME-US", "USD")
    nl_close = _close(owner, "ACME-NL", "EUR", rate="0.79")
    nl_bare = _close(owner, "ACME-NL", "EUR", period="2026-12")
    with _as(database, "engine") as engine:
        book_set = engine.execute("SELECT book_set_id FROM close_run WHERE close_id = %s", (nl_close,)).fetchone()
        assert book_set is not None
        engine.execute("CREATE TEMP TABLE policy_entity (entity text, currency text)")
        engine.execute("INSERT INTO policy_entity VALUES ('ACME-NL', 'GBP')")
        engine.execute("CREATE TEMP TABLE policy_entity_threshold (entity text, min_amount numeric, tier text)")
        engine.execute("INSERT INTO policy_entity_threshold VALUES ('ACME-US', 999999999, 'high')")
        engine.execute("CREATE TEMP TABLE book_rate (book_set_id bigint, from_currency text, to_currency text,"
                       " rate numeric, rate_date date, source text)")  # fmt: skip
        engine.execute("INSERT INTO book_rate VALUES (%s, 'EUR', 'GBP', 0.0001, '2026-11-30', 'planted')", book_set)
        engine.execute("CREATE TEMP TABLE policy_always_human_account (entity text, account text)")
        engine.execute("CREATE TEMP TABLE gate_state (close_id uuid, task text, attempt int, kind text, tier text,"
                       " lifecycle text, status text)")  # fmt: skip
        engine.execute("INSERT INTO gate_state VALUES (%s, 'accruals', 1, 'approval', 'critical', 'applied',"
                       " 'approved')", (us_close,))  # fmt: skip
        # The planted tables are what the engine's own session reads ...
        assert engine.execute("SELECT count(*) FROM policy_entity_threshold").fetchone() == (1,)
        # ... and none of them is what the database judges with.
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="below the minimum"):
            _gate(engine, us_close, "variance_analysis", "medium", "120000.00")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="below the minimum"):
            _gate(engine, nl_close, "variance_analysis", "medium", "400000.00")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="hold no EUR->GBP rate"):
            _gate(engine, nl_bare, "variance_analysis", "critical", "10.00")
        with pytest.raises(psycopg.errors.CheckViolation, match="always needs a person"):
            _post(engine, "ACME-US", CASH_OUT, source_close=us_close, source_task="accruals")
    assert owner.execute("SELECT count(*) FROM gate WHERE close_id IN (%s, %s)", (us_close, nl_close)).fetchone() == (
        0,
    )


# --- nobody but the owner changes the policy -------------------------------------------------------------------


@pytest.mark.parametrize("role", ["engine", "callbacks"])
@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO policy_entity VALUES ('ACME-FR', 'EUR')",
        "UPDATE policy_entity SET currency = 'GBP'",
        "DELETE FROM policy_entity",
        "INSERT INTO policy_entity_threshold VALUES ('ACME-US', 1000000000, 'high')",
        "UPDATE policy_entity_threshold SET min_amount = min_amount * 100",
        "DELETE FROM policy_entity_threshold",
        "INSERT INTO policy_always_human_account VALUES ('*', '9999')",
        "UPDATE policy_always_human_account SET account = 'none'",
        "DELETE FROM policy_always_human_account",
        "UPDATE policy_enforced SET currency = 'EUR'",
        "UPDATE policy_enforced SET always_human_tier = NULL",
        "TRUNCATE policy_entity_threshold",
    ],
)
@pytest.mark.usefixtures("entity_policy")
def test_no_service_role_changes_the_entity_policy(
    database: Database, owner: psycopg.Connection[Any], role: str, statement: str
) -> None:
    with _as(database, role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement)
    assert owner.execute("SELECT count(*) FROM policy_entity_threshold").fetchone() == (2,)
    assert owner.execute("SELECT count(*) FROM policy_always_human_account").fetchone() == (5,)


@pytest.mark.parametrize("role", ["engine", "callbacks"])
@pytest.mark.usefixtures("entity_policy")
def test_the_service_roles_may_read_the_entity_policy(database: Database, role: str) -> None:
    with _as(database, role) as conn:
        assert conn.execute("SELECT count(*) FROM policy_entity").fetchone() == (2,)
        assert conn.execute("SELECT currency, always_human_tier FROM policy_enforced").fetchone() == ("GBP", "high")


# --- what a close judges by is what its books held when it started -------------------------------------------------


@pytest.mark.usefixtures("entity_policy")
def test_a_rate_or_a_supplier_change_cannot_join_books_a_close_already_runs_on(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    close_id = _close(owner, "ACME-GB", "GBP")
    book_set = owner.execute("SELECT book_set_id FROM close_run WHERE close_id = %s", (close_id,)).fetchone()
    assert book_set is not None
    with (
        _as(database, "engine") as engine,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="a close already runs on book set"),
    ):
        engine.execute(
            "INSERT INTO book_rate (book_set_id, from_currency, to_currency, rate, rate_date, source)"
            " VALUES (%s, 'USD', 'GBP', 0.0001, '2026-11-30', 'planted after the start')",
            (book_set[0],),
        )
    with (
        _as(database, "engine") as engine,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="a close already runs on book set"),
    ):
        engine.execute(
            "INSERT INTO book_supplier_bank_change (book_set_id, change_id, vendor, changed_on, old_account,"
            " new_account, changed_by) VALUES (%s, 'X', 'v', '2026-11-01', 'a', 'b', 'c')",
            (book_set[0],),
        )
    fresh = owner.execute(
        "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
        " VALUES ('ACME-GB', %s, 'GBP', 'test', '{}', %s) RETURNING book_set_id",
        (PERIOD, uuid.uuid4().hex),
    ).fetchone()
    assert fresh is not None
    with _as(database, "engine") as engine:  # control: before any close, the books take their rate
        engine.execute(
            "INSERT INTO book_rate (book_set_id, from_currency, to_currency, rate, rate_date, source)"
            " VALUES (%s, 'USD', 'GBP', 0.79, '2026-11-30', %s)",
            (fresh[0], ECB),
        )


@pytest.mark.usefixtures("entity_policy")
def test_a_gate_on_books_in_another_currency_than_the_entitys_is_refused(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    mislabelled = _close(owner, "ACME-US", "GBP")  # policy gives ACME-US dollars; these books say sterling
    with (
        _as(database, "engine") as engine,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="are not in USD"),
    ):
        _gate(engine, mislabelled, "variance_analysis", "critical", "1.00")
    right = _close(owner, "ACME-US", "USD", period="2026-12")
    with _as(database, "engine") as engine:  # control
        _gate(engine, right, "variance_analysis", "critical", "1.00")
