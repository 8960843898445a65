"""The database trusts no name it does not own and no row it did not freeze (issue 19, migration 0015).

Each test is an attack reproduced on the schema before 0015, written as raw SQL by a service role's own connection:
a temporary table standing in for a real one, an identity column moved to walk round a rule keyed on it, a gate below
policy, a trace event that claims what its row does not say. The catalog test holds the whole schema to the rule, and
its negative controls show it would see a function or a privilege that breaks it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from countersign.bootstrap import migrate
from countersign.bootstrap.database import Database
from countersign.bootstrap.runtime import load_rules_all
from countersign.bootstrap.settings import PROJECT_ROOT, Settings
from tests.test_database_boundary import PEOPLE, _as, _decide, _pending, _seed

REFUSED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.CheckViolation)
SERVICE_ROLES = ("countersign_engine", "countersign_callbacks")
FIXED_PATH = "search_path=pg_catalog, public, pg_temp"


@pytest.fixture
def owner(database: Database) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database.url, autocommit=True) as conn:
        yield conn


# --- the catalog: every function's path, and nothing a service role could create ------------------------------


def functions_without_fixed_path(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        "SELECT p.oid::regprocedure::text, coalesce(p.proconfig, '{}') FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' ORDER BY 1"
    ).fetchall()
    return [name for name, config in rows if FIXED_PATH not in config]


def functions_naming_tables_bare(conn: psycopg.Connection[Any]) -> list[str]:
    """`function: table` for every table or view of `public` a function's body reads or writes without `public.`.

    It reads the body as PostgreSQL stores it, comments dropped, and looks where a relation is named: after FROM,
    JOIN, UPDATE, INTO and TABLE.
    """
    relations = {
        name
        for (name,) in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p')"
        ).fetchall()
    }
    rows = conn.execute(
        "SELECT p.oid::regprocedure::text, p.prosrc FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' ORDER BY 1"
    ).fetchall()
    found = []
    for name, body in rows:
        code = re.sub(r"--[^\n]*", "", body)
        for match in re.finditer(r"\b(?:FROM|JOIN|UPDATE|INTO|TABLE)\s+([a-z_][a-z0-9_]*)\b(?!\s*[.(])", code, re.I):
            if match.group(1).lower() in relations:
                found.append(f"{name}: {match.group(1)}")
    return sorted(set(found))


def object_creation_rights(conn: psycopg.Connection[Any]) -> list[str]:
    """Every way a service role could create an object in this database (directly or through PUBLIC)."""
    found = []
    for role in SERVICE_ROLES:
        row = conn.execute(
            "SELECT has_database_privilege(%(r)s, current_database(), 'TEMPORARY'),"
            " has_database_privilege(%(r)s, current_database(), 'CREATE'),"
            " (SELECT bool_or(has_schema_privilege(%(r)s, n.oid, 'CREATE')) FROM pg_namespace n"
            "   WHERE n.nspname NOT LIKE 'pg_temp%%' AND n.nspname NOT LIKE 'pg_toast%%')",
            {"r": role},
        ).fetchone()
        assert row is not None
        kinds = ("TEMPORARY on the database", "CREATE on the database", "CREATE on a schema")
        for allowed, what in zip(row, kinds, strict=True):
            if allowed:
                found.append(f"{role}: {what}")
    return found


def test_every_function_in_the_schema_runs_with_a_fixed_search_path(owner: psycopg.Connection[Any]) -> None:
    assert functions_without_fixed_path(owner) == []
    count = owner.execute(
        "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
    ).fetchone()
    assert count is not None and count[0] >= 20  # the check looked at the schema's functions, not at nothing


def test_every_function_names_every_table_it_uses_public_qualified(owner: psycopg.Connection[Any]) -> None:
    assert functions_naming_tables_bare(owner) == []


def test_no_service_role_can_create_an_object(owner: psycopg.Connection[Any]) -> None:
    assert object_creation_rights(owner) == []


def test_negative_control_the_catalog_checks_see_a_function_and_a_privilege_that_break_the_rule(
    owner: psycopg.Connection[Any],
) -> None:
    owner.execute("CREATE FUNCTION planted() RETURNS int LANGUAGE sql AS 'SELECT 1'")
    assert functions_without_fixed_path(owner) == ["planted()"]
    owner.execute(
        "CREATE FUNCTION planted_bare() RETURNS bigint LANGUAGE sql SET search_path = pg_catalog, public, pg_temp"
        " AS 'SELECT count(*) FROM gate_decision'"
    )
    assert functions_naming_tables_bare(owner) == ["planted_bare(): gate_decision"]
    owner.execute("GRANT TEMPORARY ON DATABASE " + _dbname(owner) + " TO PUBLIC")
    owner.execute("GRANT CREATE ON SCHEMA public TO countersign_callbacks")
    assert object_creation_rights(owner) == [
        "countersign_engine: TEMPORARY on the database",
        "countersign_callbacks: TEMPORARY on the database",
        "countersign_callbacks: CREATE on a schema",
    ]


def _dbname(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT quote_ident(current_database())").fetchone()
    assert row is not None
    return str(row[0])


def test_a_service_that_finds_object_creation_allowed_refuses_to_start(
    database: Database, owner: psycopg.Connection[Any], tmp_path: Any
) -> None:
    policy, workflows = load_rules_all(Settings(database_url=None, state_dir=tmp_path))
    migrate.require_enforced(database.engine_url, policy, workflows)  # the control: as migrated, it starts
    owner.execute("GRANT TEMPORARY ON DATABASE " + _dbname(owner) + " TO PUBLIC")
    with pytest.raises(migrate.ObjectCreationAllowed, match="countersign_callbacks may create temporary tables"):
        migrate.require_enforced(database.engine_url, policy, workflows)
    migrate.harden_database(database)  # what `db upgrade` does
    migrate.require_enforced(database.engine_url, policy, workflows)


# --- names: a temporary table cannot stand in for a real one ---------------------------------------------------


@pytest.mark.parametrize("role", ["engine", "callbacks"])
def test_a_service_role_cannot_create_a_temporary_table(database: Database, role: str) -> None:
    with _as(database, role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege, match="temporary"):
        conn.execute("CREATE TEMP TABLE gate_decision (gate_id uuid, principal_id text, decision text)")


@pytest.fixture
def temporary_tables_allowed(owner: psycopg.Connection[Any]) -> None:
    """A deployment where the revoke did not happen (a clone, a restore): the functions must still hold."""
    owner.execute("GRANT TEMPORARY ON DATABASE " + _dbname(owner) + " TO countersign_engine, countersign_callbacks")


@pytest.mark.usefixtures("temporary_tables_allowed")
def test_a_planted_principal_table_does_not_make_a_person_a_machine(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    _seed(owner)
    with _as(database, "engine") as engine:
        engine.execute("CREATE TEMP TABLE principal (principal_id text, kind text)")
        engine.execute("INSERT INTO principal VALUES ('carol.main', 'machine')")
        with pytest.raises(REFUSED, match="only as a machine principal"):
            _pending(engine, "carol.main", "close_status", {"status": "closed"})


@pytest.mark.usefixtures("temporary_tables_allowed")
def test_a_planted_decision_table_does_not_vouch_for_a_decision_event(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    gate_id = _seed(owner)
    with _as(database, "callbacks") as callbacks:
        callbacks.execute("CREATE TEMP TABLE gate_decision (gate_id uuid, principal_id text, decision text)")
        callbacks.execute("INSERT INTO gate_decision VALUES (%s, 'carol.main', 'approve')", (gate_id,))
        callbacks.execute("INSERT INTO gate_decision VALUES (%s, 'bob.osei', 'approve')", (gate_id,))
        with pytest.raises(REFUSED, match="written by the database from the decision row"):
            _pending(callbacks, "carol.main", "gate_decided", {"gate_id": gate_id, "decision": "approve"})
    assert owner.execute("SELECT count(*) FROM trace_pending WHERE kind = 'gate_decided'").fetchone() == (0,)


@pytest.mark.usefixtures("temporary_tables_allowed")
@pytest.mark.parametrize("period_status", ["open", "closed"])
def test_planted_ledger_tables_do_not_let_an_unbalanced_journal_or_a_closed_period_through(
    database: Database, owner: psycopg.Connection[Any], period_status: str
) -> None:
    owner.execute(
        "INSERT INTO accounting_period (entity, period, status) VALUES ('ACME', '2026-10', %s)", (period_status,)
    )
    with _as(database, "engine") as engine:
        engine.execute("CREATE TEMP TABLE journal_line (journal_id bigint, amount numeric)")
        engine.execute("CREATE TEMP TABLE accounting_period (entity text, period text, status text)")
        engine.execute("INSERT INTO pg_temp.accounting_period VALUES ('ACME', '2026-10', 'open')")
        with pytest.raises(REFUSED), engine.transaction():
            journal = engine.execute(
                "INSERT INTO journal (idempotency_key, request_hash, entity, period, journal_date, memo, posted_by)"
                " VALUES (%s, 'h', 'ACME', '2026-10', '2026-10-31', 'one line', 'orchestrator') RETURNING journal_id",
                (uuid.uuid4().hex,),
            ).fetchone()
            assert journal is not None
            engine.execute(
                "INSERT INTO public.journal_line (journal_id, line_no, account, amount, description)"
                " VALUES (%s, 1, '6400', 500.00, 'one side only')",
                (journal[0],),
            )
            engine.execute("INSERT INTO pg_temp.journal_line VALUES (%s, -500.00)", (journal[0],))
    assert owner.execute("SELECT count(*) FROM journal").fetchone() == (0,)


# --- rows: identity never changes, nothing re-parents a row ---------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE close_run SET entity = 'IPC-HELD-DUPLICATE'",
        "UPDATE close_run SET period = '2026-11'",
        "UPDATE close_run SET workflow = 'certificates'",
        "UPDATE close_run SET book_set_id = book_set_id",
        "UPDATE close_task SET close_id = (SELECT close_id FROM close_run LIMIT 1 OFFSET 1)",
        "UPDATE close_task SET task = 'close_signoff_old'",
        "UPDATE gate SET close_id = close_id",
        "UPDATE gate SET subject = 'IPC-HELD-DUPLICATE'",
        "UPDATE accounting_period SET entity = 'OTHER'",
    ],
)
def test_the_engine_role_cannot_re_parent_or_rename_a_row(
    database: Database, owner: psycopg.Connection[Any], statement: str
) -> None:
    _seed(owner)
    _second_run(owner)
    owner.execute("INSERT INTO accounting_period (entity, period) VALUES ('ACME', '2026-10')")
    with _as(database, "engine") as engine, pytest.raises(psycopg.errors.InsufficientPrivilege):
        engine.execute(statement)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("UPDATE close_run SET entity = 'IPC-HELD-DUPLICATE'", "identity"),
        (
            "UPDATE close_task SET close_id = (SELECT close_id FROM close_run ORDER BY created_at DESC LIMIT 1)",
            "never change",
        ),
        ("UPDATE gate SET subject = 'IPC-HELD-DUPLICATE'", "cannot change once it is open"),
        ("UPDATE close_task SET attempt = 5", "counts up by one"),
        ("UPDATE accounting_period SET period = '2026-11'", "never change"),
    ],
)
def test_not_even_the_owner_moves_an_identity_column(
    owner: psycopg.Connection[Any], statement: str, message: str
) -> None:
    _seed(owner)
    _second_run(owner)
    owner.execute("INSERT INTO accounting_period (entity, period) VALUES ('ACME', '2026-10')")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match=message):
        owner.execute(statement)


def test_an_escalated_task_keeps_its_history_and_no_row_replaces_it(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    """The reproduced attack: the escalated row moved to a run the engine inserted, and a fresh row took its place."""
    gate_id = _seed(owner)
    close_id = _close_of(owner, gate_id)
    owner.execute(
        "UPDATE close_task SET status = 'running' WHERE close_id = %s AND task = 'variance_analysis'", (close_id,)
    )
    owner.execute(
        "UPDATE close_task SET status = 'halted', escalation = 'suspected_injection'"
        " WHERE close_id = %s AND task = 'variance_analysis'",
        (close_id,),
    )
    other = _second_run(owner)
    with _as(database, "engine") as engine:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            engine.execute(
                "UPDATE close_task SET close_id = %s WHERE close_id = %s AND task = 'variance_analysis'",
                (other, close_id),
            )
        with pytest.raises(psycopg.errors.UniqueViolation):
            engine.execute("INSERT INTO close_task (close_id, task) VALUES (%s, 'variance_analysis')", (close_id,))
    row = owner.execute(
        "SELECT status, escalation FROM close_task WHERE close_id = %s AND task = 'variance_analysis'", (close_id,)
    ).fetchone()
    assert row == ("halted", "suspected_injection")


def test_an_attempt_counts_up_by_one_into_a_re_run_and_no_other_way(owner: psycopg.Connection[Any]) -> None:
    gate_id = _seed(owner)
    close_id = _close_of(owner, gate_id)
    where = "WHERE close_id = %s AND task = 'variance_analysis'"
    owner.execute(f"UPDATE close_task SET status = 'running' {where}", (close_id,))
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="counts up by one"):
        owner.execute(f"UPDATE close_task SET attempt = 2 {where}", (close_id,))  # no re-run
    owner.execute(f"UPDATE close_task SET status = 'pending', attempt = 2 {where}", (close_id,))  # the control
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="counts up by one"):
        owner.execute(f"UPDATE close_task SET status = 'running', attempt = 1 {where}", (close_id,))


def _close_of(owner: psycopg.Connection[Any], gate_id: str) -> str:
    row = owner.execute("SELECT close_id::text FROM gate WHERE gate_id = %s", (gate_id,)).fetchone()
    assert row is not None
    return str(row[0])


def _second_run(owner: psycopg.Connection[Any]) -> str:
    book = owner.execute(
        "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
        " VALUES ('OTHER', '2026-10', 'GBP', 'test', '{}', 'd2') RETURNING book_set_id"
    ).fetchone()
    assert book is not None
    close_id = str(uuid.uuid4())
    owner.execute(
        "INSERT INTO close_run (close_id, entity, period, book_set_id, policy_digest, checklist_digest, started_by)"
        " VALUES (%s, 'OTHER', '2026-10', %s, 'p', 'c', 'dana.reyes')",
        (close_id, book[0]),
    )
    return close_id


# --- policy: the minimums live in the database --------------------------------------------------------------


def _open_gate(conn: psycopg.Connection[Any], close_id: str, task: str, **columns: Any) -> str:
    values = {"kind": "approval", "tier": "critical", "quorum": 2, "approver_role": "cfo", "amount": None, **columns}
    gate_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO gate (gate_id, close_id, task, attempt, kind, tier, quorum, approver_role, rule, summary,"
        " prepared_by, due_at, expires_at, amount) VALUES (%s, %s, %s, 1, %s, %s, %s, %s, 'r', %s, 'orchestrator',"
        " now() + interval '1 day', now() + interval '2 days', %s)",
        (
            gate_id,
            close_id,
            task,
            values["kind"],
            values["tier"],
            values["quorum"],
            values["approver_role"],
            Jsonb(values.get("summary", {})),
            values["amount"],
        ),
    )
    return gate_id


@pytest.mark.parametrize(
    ("task", "columns", "message"),
    [
        # The reproduced attack: a sign-off gate opened at one controller instead of two CFOs.
        ("close_signoff", {"tier": "high", "quorum": 1, "approver_role": "controller"}, "below the minimum"),
        ("close_signoff", {"quorum": 1}, "quorum of at least 2"),
        ("close_signoff", {"approver_role": "controller"}, "decided by role cfo"),
        ("variance_analysis", {"tier": "low", "quorum": 1, "approver_role": "controller"}, "not a gated tier"),
        (
            "variance_analysis",
            {"tier": "medium", "quorum": 1, "approver_role": "controller", "amount": "-1000000.00"},
            "below the minimum",
        ),
        (
            "variance_analysis",
            {"tier": "high", "quorum": 1, "approver_role": "controller", "amount": "1000000.00"},
            "below the minimum",
        ),
        ("bank_reconciliation", {"tier": "high", "quorum": 1, "approver_role": "controller"}, "has no task"),
        (
            "variance_analysis",
            {"kind": "escalation", "tier": "high", "quorum": 1, "approver_role": "controller"},
            "no escalation reason",
        ),
    ],
)
def test_the_engine_role_cannot_open_a_gate_below_policy(
    database: Database, owner: psycopg.Connection[Any], task: str, columns: dict[str, Any], message: str
) -> None:
    close_id = _close_of(owner, _seed(owner))
    if task == "bank_reconciliation":
        owner.execute("DELETE FROM policy_task WHERE task = 'bank_reconciliation'")  # a task the policy never named
        owner.execute("INSERT INTO close_task (close_id, task) VALUES (%s, %s)", (close_id, task))
    with _as(database, "engine") as engine, pytest.raises(psycopg.errors.InsufficientPrivilege, match=message):
        _open_gate(engine, close_id, task, **columns)


def test_a_gate_at_the_minimums_opens_and_carries_its_subject_and_the_enforced_policy(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    """The control for the test above: the same gates at what policy asks are admitted."""
    close_id = _close_of(owner, _seed(owner))
    with _as(database, "engine") as engine:
        engine.execute("UPDATE gate SET lifecycle = 'cancelled' WHERE close_id = %s", (close_id,))
        high = _open_gate(engine, close_id, "variance_analysis", tier="high", quorum=1, approver_role="controller")
    row = owner.execute(
        "SELECT g.subject, g.enforced_policy = e.digest FROM gate g CROSS JOIN policy_enforced e WHERE g.gate_id = %s",
        (high,),
    ).fetchone()
    assert row == ("ACME", True)


def test_a_gated_task_cannot_complete_without_its_gate(database: Database, owner: psycopg.Connection[Any]) -> None:
    close_id = _close_of(owner, _seed(owner))
    where = "WHERE close_id = %s AND task = %s"
    with _as(database, "engine") as engine:
        for task, refused in (("close_signoff", True), ("ap_reconciliation", False)):
            if not refused:
                engine.execute("INSERT INTO close_task (close_id, task) VALUES (%s, %s)", (close_id, task))
            engine.execute(f"UPDATE close_task SET status = 'running' {where}", (close_id, task))
            if refused:
                with pytest.raises(psycopg.errors.CheckViolation, match="the enforced policy gates it"):
                    engine.execute(f"UPDATE close_task SET status = 'done' {where}", (close_id, task))
            else:  # the control: a low-tier task completes without a gate
                engine.execute(f"UPDATE close_task SET status = 'done' {where}", (close_id, task))


@pytest.mark.parametrize("role", ["engine", "callbacks"])
def test_no_service_role_changes_the_enforced_policy(database: Database, role: str) -> None:
    with _as(database, role) as conn:
        for statement in (
            "UPDATE policy_tier SET quorum = 1",
            "DELETE FROM policy_task",
            "INSERT INTO policy_amount_threshold VALUES (1, 'low')",
            "UPDATE policy_enforced SET digest = repeat('0', 64)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_a_changed_policy_takes_effect_only_through_db_upgrade(
    database: Database, owner: psycopg.Connection[Any], tmp_path: Any
) -> None:
    policy, workflows = load_rules_all(Settings(database_url=None, state_dir=tmp_path))
    migrate.require_enforced(database.engine_url, policy, workflows)
    looser = {**workflows}
    changed = type(policy)(**{**policy.__dict__, "digest": "f" * 64})  # risk.yaml edited after the last upgrade
    with pytest.raises(migrate.PolicyNotEnforced, match="run `countersign db upgrade`"):
        migrate.require_enforced(database.engine_url, changed, looser)
    migrate.seed_policy(database, changed, looser)  # the owner's db upgrade
    migrate.require_enforced(database.engine_url, changed, looser)


# --- the trace: events bound to their facts --------------------------------------------------------------------


def test_the_database_writes_gate_decided_from_the_decision_row(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    gate_id = _seed(owner)
    close_id = _close_of(owner, gate_id)
    with _as(database, "callbacks") as callbacks:
        _decide(callbacks, gate_id, "carol.main")
        _decide(callbacks, gate_id, "bob.osei")
    rows = owner.execute(
        "SELECT close_id::text, actor, payload->>'decision', (payload->>'approvals')::int, (payload->>'quorum')::int,"
        " payload->>'gate_status' FROM trace_pending WHERE kind = 'gate_decided' ORDER BY pending_id"
    ).fetchall()
    assert rows == [
        (close_id, "carol.main", "approve", 1, 2, "open"),
        (close_id, "bob.osei", "approve", 2, 2, "approved"),
    ]


def test_a_decision_of_one_close_cannot_be_traced_into_another(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    gate_id = _seed(owner)
    other = _second_run(owner)
    refusal = {"gate_id": gate_id, "principal": "carol.main", "decision": "approve", "code": "already_voted",
               "reason": "r", "channel": "signed_callback"}  # fmt: skip
    with _as(database, "callbacks") as callbacks:
        with pytest.raises(REFUSED, match=r"of close .* not close"):
            _pending(callbacks, "callbacks", "decision_refused", refusal, close_id=other)
        _pending(callbacks, "callbacks", "decision_refused", refusal, close_id=_close_of(owner, gate_id))  # control
    with _as(database, "engine") as engine, pytest.raises(REFUSED, match=r"of close .* not close"):
        _pending(engine, "orchestrator", "gate_passed", {"gate_id": gate_id, "task": "close_signoff"}, close_id=other)
    with _as(database, "engine") as engine, pytest.raises(REFUSED, match=r"which close .* does not have"):
        _pending(engine, "orchestrator", "task_done", {"task": "close_signoff"}, close_id=other)


@pytest.mark.parametrize(
    ("kind", "actor", "payload", "with_close"),
    [
        ("trace_exported", "carol.main", {"close_id": "X", "format": "csv"}, True),  # missing the digest and size
        ("trace_exported", "nobody.real", {"format": "csv", "sha256": "a" * 64, "bytes": 1, "platform": "cli"}, True),
        ("trace_exported", "carol.main", {"format": "pdf", "sha256": "a" * 64, "bytes": 1, "platform": "cli"}, True),
        ("command_refused", "carol.main", {"platform": "slack", "tenant": "T", "user": "U", "command": "c",
                                           "reason": "r"}, False),
        ("command_refused", "callbacks", {"platform": "slack", "tenant": "T", "user": "U", "command": "c",
                                          "reason": "r", "approved": True}, False),
        ("decision_refused", "carol.main", {"gate_id": None, "principal": "p", "decision": "approve", "code": "x",
                                            "reason": "r", "channel": "slack"}, False),
    ],
)  # fmt: skip
def test_a_doors_events_have_a_fixed_shape(
    database: Database,
    owner: psycopg.Connection[Any],
    kind: str,
    actor: str,
    payload: dict[str, Any],
    with_close: bool,
) -> None:
    close_id = _close_of(owner, _seed(owner)) if with_close else None
    if with_close and "close_id" not in payload:
        payload = {**payload, "close_id": close_id}
    with _as(database, "callbacks") as callbacks, pytest.raises(REFUSED, match=f"{kind} events carry"):
        _pending(callbacks, actor, kind, payload, close_id=close_id)


def test_a_well_formed_export_event_is_admitted_and_read_as_the_doors_assertion(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    from countersign.audit.trace import TraceEvent
    from countersign.bootstrap.timeline import describe

    close_id = _close_of(owner, _seed(owner))
    payload = {"close_id": close_id, "format": "csv", "sha256": "a" * 64, "bytes": 10, "platform": "slack"}
    with _as(database, "callbacks") as callbacks:
        _pending(callbacks, "carol.main", "trace_exported", payload, close_id=close_id)
    event = TraceEvent(1, "t", close_id, "carol.main", "trace_exported", payload, {}, b"", b"", "countersign_callbacks")
    assert describe(event).startswith("the callbacks door reports")
    assert set(PEOPLE) >= {"carol.main"}


_FUNCTION_HEADER = re.compile(r"CREATE (?:OR REPLACE )?FUNCTION\s+([\w.]+)\((.*?)\bAS\s+\$", re.S)


def functions_without_a_fixed_path(sql_text: str) -> list[str]:
    """The functions a migration's text creates without `SET search_path` in their own definition."""
    return [m.group(1) for m in _FUNCTION_HEADER.finditer(sql_text) if "search_path" not in m.group(2)]


def test_every_function_written_since_0015_fixes_its_path_in_its_own_definition() -> None:
    """Migrations 0001-0014 created thirteen functions without a fixed path; 0015 sets it on every function in the
    schema (and the catalog test above holds the live database to it). Every migration since writes it into each
    definition, so a function is never, even between two statements, resolvable through a caller's path."""
    versions = sorted((PROJECT_ROOT / "countersign" / "migrations" / "versions").glob("00*.py"))
    later = [path for path in versions if int(path.name[:4]) >= 15]
    assert later, "no migrations from 0015 on were found"
    offenders = {path.name: functions_without_a_fixed_path(path.read_text()) for path in later}
    assert {name: found for name, found in offenders.items() if found} == {}
    planted = "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;"  # the negative control
    assert functions_without_a_fixed_path(planted) == ["public.f"]
