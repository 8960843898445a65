"""A delegation grants nobody anything, and only the database writes one (the delegation migration).

Each attack is raw SQL on a service role's own connection: a delegation for someone else, a back-dated one, a row
changed or deleted, a routing to a person who is away or who prepared the work, a direct message enqueued by hand, a
temporary table standing in for the function's tables.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from countersign.bootstrap.database import Database
from tests.test_database_boundary import _as, _seed

REFUSED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.CheckViolation)
ROLES = ("engine", "callbacks")
NOW = datetime.now(UTC)
TODAY = datetime.combine(NOW.date(), datetime.min.time(), tzinfo=UTC)
SET = "SELECT public.set_delegation(%s, %s, %s, %s, %s, %s)"


def _owners(owner: psycopg.Connection[Any]) -> set[str]:
    return {r for (r,) in owner.execute("SELECT approver_role FROM policy_escalation_owner").fetchall()}


def _delegate(conn: psycopg.Connection[Any], principal: str, delegate: str, by: str, *, days: int = 7) -> int:
    row = conn.execute(SET, (principal, delegate, TODAY, TODAY + timedelta(days=days), by, "leave")).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def gate(owner: psycopg.Connection[Any]) -> str:
    """An open cfo gate (bob and carol may decide it) requested by dana; policy's owners seeded."""
    gate_id = _seed(owner)
    if not _owners(owner):
        owner.execute(
            "INSERT INTO policy_escalation_owner (reason, approver_role) VALUES ('gate_expired', 'controller')"
        )
    return gate_id


@pytest.mark.parametrize("role", ROLES)
def test_a_service_role_cannot_insert_a_delegation_row(database: Database, gate: str, role: str) -> None:
    with _as(database, role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(
            "INSERT INTO delegation (principal_id, delegate_id, starts_at, ends_at, set_by, reason)"
            " VALUES ('carol.main', 'dana.reyes', now(), now() + interval '1 day', 'carol.main', 'x')"
        )


@pytest.mark.parametrize("role", ROLES)
def test_nobody_sets_a_delegation_for_someone_else_without_being_an_owner(
    database: Database, gate: str, role: str
) -> None:
    # dana (accountant) owns no escalation: she may set her own delegation, never carol's
    with _as(database, role) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match=r"neither carol\.main nor an owner"):
            _delegate(conn, "carol.main", "bob.osei", "dana.reyes")
        assert _delegate(conn, "dana.reyes", "alice.chen", "dana.reyes") > 0


@pytest.mark.parametrize("role", ROLES)
def test_an_owner_sets_a_delegation_for_someone_else_but_never_names_themselves_the_delegate(
    database: Database, gate: str, role: str
) -> None:
    # alice holds controller, which owns escalations (risk.yaml): she may set carol's, not make herself the stand-in
    with _as(database, role) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not make themselves the delegate"):
            _delegate(conn, "carol.main", "alice.chen", "alice.chen")
        assert _delegate(conn, "carol.main", "bob.osei", "alice.chen") > 0


@pytest.mark.parametrize("role", ROLES)
def test_a_delegation_is_never_back_dated_nor_backwards_nor_overlapping(
    database: Database, gate: str, role: str
) -> None:
    with _as(database, role) as conn:
        with pytest.raises(psycopg.errors.CheckViolation, match="back-dated"):
            conn.execute(
                SET, ("carol.main", "bob.osei", TODAY - timedelta(days=3), TODAY + timedelta(days=2), "carol.main", "x")
            )
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                SET, ("carol.main", "bob.osei", TODAY + timedelta(days=3), TODAY + timedelta(days=2), "carol.main", "x")
            )
        _delegate(conn, "carol.main", "bob.osei", "carol.main")
        with pytest.raises(psycopg.errors.CheckViolation, match="revoke it first"):
            _delegate(conn, "carol.main", "alice.chen", "carol.main", days=3)


@pytest.mark.parametrize("role", ROLES)
def test_delegations_and_revocations_cannot_be_updated_deleted_or_truncated(
    database: Database, owner: psycopg.Connection[Any], gate: str, role: str
) -> None:
    with _as(database, role) as conn:
        delegation_id = _delegate(conn, "carol.main", "bob.osei", "carol.main")
        assert conn.execute("SELECT public.revoke_delegation(%s, 'carol.main', 'back early')", (delegation_id,))
        for statement in (
            "UPDATE delegation SET ends_at = ends_at + interval '300 days'",
            "UPDATE delegation SET set_by = 'carol.main', starts_at = now() - interval '30 days'",
            "DELETE FROM delegation",
            "DELETE FROM delegation_revocation",
            "UPDATE delegation_revocation SET revoked_by = 'bob.osei'",
            "TRUNCATE delegation_revocation",
            "UPDATE gate_routing SET routed_to = 'dana.reyes'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    # the owner too: the rows are append-only for everyone
    for statement in ("UPDATE delegation SET reason = 'x'", "DELETE FROM delegation_revocation"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            owner.execute(statement)


@pytest.mark.parametrize("role", ROLES)
def test_revoking_needs_the_person_or_an_owner(database: Database, gate: str, role: str) -> None:
    with _as(database, role) as conn:
        delegation_id = _delegate(conn, "carol.main", "bob.osei", "carol.main")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT public.revoke_delegation(%s, 'dana.reyes', 'x')", (delegation_id,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not make themselves"):
            conn.execute("SELECT public.revoke_delegation(%s, 'bob.osei', 'x')", (delegation_id,))


def test_a_delegate_who_may_not_decide_is_never_routed_the_gate(database: Database, gate: str) -> None:
    """Delegating to dana (an accountant, and the gate's requester) gives her no way onto the cfo gate."""
    with _as(database, "engine") as conn:
        delegation_id = _delegate(conn, "carol.main", "dana.reyes", "carol.main")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="lacks role cfo"):
            conn.execute("SELECT public.route_gate_to(%s, 'dana.reyes', %s, 1, '{slack}')", (gate, delegation_id))


def test_a_person_who_is_away_is_not_routed_and_a_delegation_names_its_own_delegate(
    database: Database, gate: str
) -> None:
    with _as(database, "engine") as conn:
        delegation_id = _delegate(conn, "carol.main", "bob.osei", "carol.main")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="away now"):
            conn.execute("SELECT public.route_gate_to(%s, 'carol.main', NULL, 1, '{slack}')", (gate,))
        other = _delegate(conn, "alice.chen", "dana.reyes", "alice.chen")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match=r"not a live delegation to bob\.osei"):
            conn.execute("SELECT public.route_gate_to(%s, 'bob.osei', %s, 1, '{slack}')", (gate, other))
        row = conn.execute(
            "SELECT public.route_gate_to(%s, 'bob.osei', %s, 1, '{slack}')", (gate, delegation_id)
        ).fetchone()
        assert row is not None and row[0] is not None
        again = conn.execute("SELECT public.route_gate_to(%s, 'bob.osei', %s, 1, '{slack}')", (gate, delegation_id))
        assert again.fetchone() == (None,)  # routed once: nothing more is written or sent
        assert conn.execute("SELECT count(*) FROM outbox_message WHERE template = 'gate_routed'").fetchone() == (1,)


def test_the_preparer_is_never_routed_their_own_work(database: Database, owner: psycopg.Connection[Any]) -> None:
    gate_id = _seed(owner, requested_by=("carol.main",))
    with _as(database, "engine") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege, match="prepared"):
        conn.execute("SELECT public.route_gate_to(%s, 'carol.main', NULL, 1, '{slack}')", (gate_id,))


@pytest.mark.parametrize("role", ROLES)
def test_a_service_role_cannot_write_a_routing_or_its_direct_message(database: Database, gate: str, role: str) -> None:
    with _as(database, role) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO gate_routing (gate_id, routed_to, rank, why) VALUES (%s, 'carol.main', 1, 'overdue')",
                (gate,),
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO outbox_message (dedupe_key, gate_id, platform, channel, kind, payload, template)"
                " VALUES ('x', %s, 'slack', 'U0MALLORY', 'notice', %s, 'gate_routed')",
                (gate, Jsonb({"routing_id": 1})),
            )


def test_the_engine_cannot_move_a_direct_message_to_another_recipient(database: Database, gate: str) -> None:
    with _as(database, "engine") as conn:
        conn.execute("SELECT public.route_gate_to(%s, 'bob.osei', NULL, 1, '{slack}')", (gate,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="gate_routed"):
            conn.execute("UPDATE outbox_message SET channel = 'U0MALLORY' WHERE template = 'gate_routed'")


def test_the_callbacks_role_cannot_route_a_gate(database: Database, gate: str) -> None:
    with _as(database, "callbacks") as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT public.route_gate_to(%s, 'bob.osei', NULL, 1, '{slack}')", (gate,))


@pytest.mark.parametrize("role", ROLES)
def test_no_temporary_table_can_stand_in_for_the_functions_tables(database: Database, gate: str, role: str) -> None:
    """A service role may create no temporary table (so `pg_temp.principal` cannot shadow the owner's table the
    function reads), and each function pins its path and names every table by schema (the catalog test)."""
    with _as(database, role) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TEMP TABLE principal (principal_id text, kind text, active boolean, roles text[])")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TEMP TABLE policy_escalation_owner (reason text, approver_role text)")
    with psycopg.connect(database.url, autocommit=True) as owner:
        config = owner.execute(
            "SELECT p.proname, p.proconfig, p.prosecdef FROM pg_proc p WHERE p.proname IN"
            " ('set_delegation', 'revoke_delegation', 'route_gate_to') ORDER BY 1"
        ).fetchall()
    assert [(name, secdef) for name, _, secdef in config] == [
        ("revoke_delegation", True),
        ("route_gate_to", True),
        ("set_delegation", True),
    ]
    assert all("search_path=pg_catalog, public, pg_temp" in cfg for _, cfg, _ in config)


def test_events_of_delegations_are_written_by_the_database(database: Database, gate: str) -> None:
    with _as(database, "engine") as conn:
        delegation_id = _delegate(conn, "carol.main", "bob.osei", "carol.main")
        conn.execute("SELECT public.revoke_delegation(%s, 'alice.chen', 'came back')", (delegation_id,))
        rows = conn.execute(
            "SELECT kind, actor, writer, payload->>'delegation_id' FROM trace_pending"
            " WHERE kind LIKE 'delegation_%%' ORDER BY pending_id"
        ).fetchall()
    assert [(k, a, d) for k, a, _, d in rows] == [
        ("delegation_set", "carol.main", str(delegation_id)),
        ("delegation_revoked", "alice.chen", str(delegation_id)),
    ]
    assert all(w not in ("countersign_engine", "countersign_callbacks") for _, _, w, _ in rows)
