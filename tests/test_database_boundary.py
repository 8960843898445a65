"""The database refuses what policy forbids, whoever connects (migration 0006).

Every test here is an attack written as raw SQL by one of the service roles, the way a compromised engine or
callbacks process would try it, bypassing every line of Python. Each was reproduced against the schema before 0006.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from countersign.audit.canonical import canonical_bytes
from countersign.audit.trace import chain_hash, event_body, seal_pending, verify_chain
from countersign.bootstrap.database import Database

REFUSED = (psycopg.errors.InsufficientPrivilege,)


@pytest.fixture
def owner(database: Database) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database.url, autocommit=True) as conn:
        yield conn


def _as(database: Database, role: str) -> psycopg.Connection[Any]:
    url = database.engine_url if role == "engine" else database.callbacks_url
    return psycopg.connect(url, autocommit=True)


PEOPLE = {
    # principal: (roles, slack user)
    "dana.reyes": (["accountant"], "U0DANA"),
    "alice.chen": (["controller"], "U0ALICE"),
    "bob.osei": (["cfo", "controller"], "U0BOB"),
    "carol.main": (["cfo"], "U0CAROL"),
    "frank.gone": (["cfo"], "U0FRANK"),
}
KEY = base64.b64encode(bytes(range(32))).decode()


def _seed(
    owner: psycopg.Connection[Any],
    *,
    quorum: int = 2,
    role: str = "cfo",
    expires_in_h: float = 120,
    requested_by: tuple[str, ...] = ("dana.reyes",),
) -> str:
    """One close with one open sign-off gate prepared by the engine and requested by dana; returns the gate id."""
    for pid, (roles, slack) in PEOPLE.items():
        owner.execute(
            "INSERT INTO principal (principal_id, kind, display_name, roles, public_key, active)"
            " VALUES (%s, 'human', %s, %s, %s, %s)",
            (pid, pid, roles, bytes(range(32)), pid != "frank.gone"),
        )
        owner.execute(
            "INSERT INTO principal_identity (principal_id, channel, tenant, external_id)"
            " VALUES (%s, 'slack', 'T01', %s)",
            (pid, slack),
        )
    book = owner.execute(
        "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
        " VALUES ('ACME', '2026-10', 'GBP', 'test', '{}', 'd') RETURNING book_set_id"
    ).fetchone()
    assert book is not None
    close_id = str(uuid.uuid4())
    owner.execute(
        "INSERT INTO close_run (close_id, entity, period, book_set_id, policy_digest, checklist_digest, started_by)"
        " VALUES (%s, 'ACME', '2026-10', %s, 'p', 'c', 'dana.reyes')",
        (close_id, book[0]),
    )
    for task in ("close_signoff", "variance_analysis"):
        owner.execute("INSERT INTO close_task (close_id, task) VALUES (%s, %s)", (close_id, task))
    gate_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    owner.execute(
        "INSERT INTO gate (gate_id, close_id, task, attempt, kind, tier, quorum, approver_role, rule, summary,"
        " prepared_by, due_at, expires_at, requested_by)"
        " VALUES (%s, %s, 'close_signoff', 1, 'approval', 'critical', %s, %s, 'tier critical', '{}', 'orchestrator',"
        " %s, %s, %s)",
        (
            gate_id,
            close_id,
            quorum,
            role,
            now + timedelta(hours=min(24, expires_in_h / 2)) if expires_in_h > 0 else now - timedelta(hours=2),
            now + timedelta(hours=expires_in_h),
            list(requested_by),
        ),
    )
    return gate_id


def _signed_proof() -> Jsonb:
    return Jsonb({"kind": "ed25519", "signature": base64.b64encode(bytes(64)).decode(), "signed_at": 1_800_000_000})


def _decide(
    conn: psycopg.Connection[Any],
    gate_id: str,
    principal: str,
    *,
    decision: str = "approve",
    channel: str = "signed_callback",
    proof: Any = None,
    decided_at: str | None = None,
) -> None:
    columns = "gate_id, principal_id, decision, reason, nonce, request_digest, channel, proof"
    values: list[Any] = [gate_id, principal, decision, "ok", uuid.uuid4().hex, "x", channel, proof or _signed_proof()]
    if decided_at is not None:
        columns += ", decided_at"
        values.append(decided_at)
    conn.execute(f"INSERT INTO gate_decision ({columns}) VALUES ({', '.join(['%s'] * len(values))})", values)


# --- a gate's requirements never change once it is open --------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        "quorum = 1",
        "approver_role = 'accountant'",
        "tier = 'low'",
        "prepared_by = 'someone-else'",
        "requested_by = '{}'",
        "expires_at = now() + interval '100 days'",
        "due_at = now() + interval '50 days'",
        "rule = 'none'",
    ],
)
def test_the_engine_role_cannot_change_an_open_gates_requirements(
    database: Database, owner: psycopg.Connection[Any], change: str
) -> None:
    gate_id = _seed(owner)
    # Refused twice over since 0015: the engine role holds no UPDATE grant on these columns, and the trigger refuses
    # the change for any role (the owner too: test_not_even_the_owner_moves_an_identity_column).
    with _as(database, "engine") as engine, pytest.raises(REFUSED, match=r"cannot change once it is open|permission"):
        engine.execute(f"UPDATE gate SET {change} WHERE gate_id = %s", (gate_id,))


def test_lowering_quorum_after_one_cfo_approved_cannot_pass_the_gate(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    """The reproduced attack: one CFO approves, the engine lowers quorum to 1, the gate would read approved."""
    gate_id = _seed(owner)
    with _as(database, "callbacks") as callbacks:
        _decide(callbacks, gate_id, "carol.main")
    with _as(database, "engine") as engine:
        with pytest.raises(REFUSED):
            engine.execute("UPDATE gate SET quorum = 1 WHERE gate_id = %s", (gate_id,))
        state = engine.execute("SELECT status, approvals FROM gate_state WHERE gate_id = %s", (gate_id,)).fetchone()
    assert state == ("open", 1)


def test_the_engine_role_may_still_move_a_gates_lifecycle_forward_but_never_back(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    gate_id = _seed(owner)
    with _as(database, "engine") as engine:
        engine.execute("UPDATE gate SET lifecycle = 'applied', applied_at = now() WHERE gate_id = %s", (gate_id,))
        with pytest.raises(REFUSED, match="is applied and cannot become open"):
            engine.execute("UPDATE gate SET lifecycle = 'open' WHERE gate_id = %s", (gate_id,))


def test_not_even_the_owner_deletes_a_gate(owner: psycopg.Connection[Any]) -> None:
    gate_id = _seed(owner)
    with pytest.raises(REFUSED, match="never deleted"):
        owner.execute("DELETE FROM gate WHERE gate_id = %s", (gate_id,))


# --- a decision row is admitted only for an entitled human with proof ------------------------------------------


@pytest.mark.parametrize(
    ("principal", "reason"),
    [
        ("orchestrator", "not an active human"),
        ("reconciliation-agent", "not an active human"),
        ("frank.gone", "not an active human"),
        ("alice.chen", "lacks role cfo"),
        ("dana.reyes", "lacks role cfo"),
    ],
)
def test_the_callbacks_role_cannot_record_a_decision_for_someone_not_entitled(
    database: Database, owner: psycopg.Connection[Any], principal: str, reason: str
) -> None:
    gate_id = _seed(owner)
    with _as(database, "callbacks") as callbacks, pytest.raises(REFUSED, match=reason):
        _decide(callbacks, gate_id, principal)
    assert owner.execute("SELECT count(*) FROM gate_decision").fetchone() == (0,)


def test_a_requester_cannot_decide_even_holding_the_role(database: Database, owner: psycopg.Connection[Any]) -> None:
    gate_id = _seed(owner, requested_by=("carol.main",))  # carol holds cfo and requested the work
    with _as(database, "callbacks") as callbacks, pytest.raises(REFUSED, match="prepared or requested"):
        _decide(callbacks, gate_id, "carol.main")


def test_the_same_person_cannot_vote_twice(database: Database, owner: psycopg.Connection[Any]) -> None:
    gate_id = _seed(owner)
    with _as(database, "callbacks") as callbacks:
        _decide(callbacks, gate_id, "carol.main")
        with pytest.raises(REFUSED, match="already decided"):
            _decide(callbacks, gate_id, "carol.main", decision="reject")


def test_no_decision_lands_on_an_expired_or_decided_gate(database: Database, owner: psycopg.Connection[Any]) -> None:
    expired = _seed(owner, expires_in_h=-1)
    with _as(database, "callbacks") as callbacks, pytest.raises(REFUSED, match="is not open"):
        _decide(callbacks, expired, "carol.main")
    decided = _seed_second_gate(owner, quorum=1)
    with _as(database, "callbacks") as callbacks:
        _decide(callbacks, decided, "alice.chen")
        with pytest.raises(REFUSED, match="already decided"):
            _decide(callbacks, decided, "bob.osei", decision="reject")


def _seed_second_gate(owner: psycopg.Connection[Any], *, quorum: int) -> str:
    close_id = owner.execute("SELECT close_id FROM close_run LIMIT 1").fetchone()
    assert close_id is not None
    gate_id = str(uuid.uuid4())
    owner.execute(
        "INSERT INTO gate (gate_id, close_id, task, attempt, kind, tier, quorum, approver_role, rule, summary,"
        " prepared_by, due_at, expires_at, requested_by) VALUES (%s, %s, 'variance_analysis', 1, 'approval', %s, %s,"
        " %s, 'r', '{}', 'orchestrator', now() + interval '1 day', now() + interval '2 days', '{}')",
        (gate_id, close_id[0], "critical" if quorum > 1 else "high", quorum, "cfo" if quorum > 1 else "controller"),
    )
    return gate_id


@pytest.mark.parametrize(
    ("channel", "proof"),
    [
        ("signed_callback", {}),
        ("signed_callback", {"kind": "ed25519", "signed_at": 1}),
        ("signed_callback", {"kind": "slack", "tenant": "T01", "external_id": "U0CAROL"}),
        ("slack", {}),
        ("slack", {"kind": "slack", "tenant": "T01", "external_id": "U0BOB"}),  # bob's Slack id, carol's name
        ("slack", {"kind": "slack", "tenant": "T99", "external_id": "U0CAROL"}),  # another workspace
        ("teams", {"kind": "slack", "tenant": "T01", "external_id": "U0CAROL"}),
        ("sms", {"kind": "sms"}),
    ],
)
def test_a_decision_without_person_level_proof_for_its_channel_is_refused(
    database: Database, owner: psycopg.Connection[Any], channel: str, proof: dict[str, Any]
) -> None:
    gate_id = _seed(owner)
    with _as(database, "callbacks") as callbacks, pytest.raises(REFUSED, match=r"proof|identity|channel"):
        _decide(callbacks, gate_id, "carol.main", channel=channel, proof=Jsonb(proof))


def test_a_signed_decision_needs_a_registered_key(database: Database, owner: psycopg.Connection[Any]) -> None:
    gate_id = _seed(owner)
    owner.execute("UPDATE principal SET public_key = NULL WHERE principal_id = 'carol.main'")
    with _as(database, "callbacks") as callbacks, pytest.raises(REFUSED, match="no registered public key"):
        _decide(callbacks, gate_id, "carol.main")


def _accept_platform_identity(owner: psycopg.Connection[Any], gate_id: str) -> None:
    """Set-up only: the gate accepts chat identities, as a medium-tier gate does (risk.yaml `proofs`)."""
    with owner.transaction():
        owner.execute("ALTER TABLE gate DISABLE TRIGGER gate_requirements_fixed")
        owner.execute(
            "UPDATE gate SET accepted_proofs = '{platform_identity,ed25519,passkey}' WHERE gate_id = %s", (gate_id,)
        )
        owner.execute("ALTER TABLE gate ENABLE ALWAYS TRIGGER gate_requirements_fixed")


def test_a_mapped_platform_identity_is_accepted_and_nobody_back_dates_a_decision(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    gate_id = _seed(owner)
    _accept_platform_identity(owner, gate_id)
    with _as(database, "callbacks") as callbacks:
        _decide(
            callbacks,
            gate_id,
            "carol.main",
            channel="slack",
            proof=Jsonb({"kind": "slack", "tenant": "T01", "external_id": "U0CAROL"}),
            decided_at="2020-01-01T00:00:00Z",
        )
    row = owner.execute("SELECT decided_at > now() - interval '1 minute' FROM gate_decision").fetchone()
    assert row == (True,)


def test_application_roles_cannot_turn_off_the_decision_check(database: Database) -> None:
    for role in ("engine", "callbacks"):
        with _as(database, role) as conn, pytest.raises(REFUSED):
            conn.execute("ALTER TABLE gate_decision DISABLE TRIGGER gate_decision_admitted")


# --- trace events are bound to the role that wrote them ---------------------------------------------------------


def _pending(
    conn: psycopg.Connection[Any],
    actor: str,
    kind: str,
    payload: dict[str, Any] | None = None,
    *,
    close_id: str | None = None,
) -> None:
    conn.execute(
        "INSERT INTO trace_pending (ts, close_id, actor, kind, payload, version_set)"
        " VALUES ('t', %s, %s, %s, %s, '{}')",
        (close_id, actor, kind, Jsonb(payload or {})),
    )


# A door's refusal in the shape the database admits (migration 0015).
REFUSAL = {
    "gate_id": None,
    "principal": "mallory",
    "decision": "approve",
    "code": "unknown_principal",
    "reason": "no such principal",
    "channel": "signed_callback",
}


def test_the_engine_role_cannot_forge_a_human_decision_event(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    """The reproduced attack: the engine's role queued a `gate_decided` event as carol.main and it was sealed."""
    gate_id = _seed(owner)
    with _as(database, "engine") as engine:
        with pytest.raises(REFUSED, match="written by the database from the decision row"):
            _pending(engine, "carol.main", "gate_decided", {"gate_id": gate_id, "decision": "approve"})
        with pytest.raises(REFUSED, match="only as a machine principal"):
            _pending(engine, "carol.main", "close_status", {"status": "closed"})
        with pytest.raises(REFUSED, match="only as a machine principal"):
            _pending(engine, "Carol.Main", "close_status", {"status": "closed"})
        _pending(engine, "orchestrator", "close_status", {"status": "running"})  # its own kind, as itself: fine
    assert owner.execute("SELECT actor, writer FROM trace_pending").fetchall() == [
        ("orchestrator", "countersign_engine")
    ]


def test_the_callbacks_role_cannot_append_engine_events_or_invent_decisions(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    gate_id = _seed(owner)
    with _as(database, "callbacks") as callbacks:
        for kind in ("gate_passed", "close_status", "task_done", "journal_posted"):
            with pytest.raises(REFUSED, match=f"may not append {kind}"):
                _pending(callbacks, "orchestrator", kind)
        with pytest.raises(REFUSED, match="written by the database from the decision row"):
            _pending(callbacks, "carol.main", "gate_decided", {"gate_id": gate_id, "decision": "approve"})


def test_neither_role_writes_the_sealed_log_or_moves_its_head(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    digest = bytes(32)
    for role in ("engine", "callbacks"):
        with _as(database, role) as conn:
            with pytest.raises(REFUSED):
                conn.execute(
                    "INSERT INTO trace_event (seq, ts, actor, kind, payload, version_set, prev_hash, hash)"
                    " VALUES (1, 't', 'carol.main', 'gate_decided', '{}', '{}', %s, %s)",
                    (digest, digest),
                )
            with pytest.raises(REFUSED):
                conn.execute("UPDATE trace_head SET seq = 0")
            with pytest.raises(REFUSED):
                conn.execute("DELETE FROM trace_pending")
            with pytest.raises(REFUSED):
                conn.execute("UPDATE trace_pending SET actor = 'carol.main'")


def test_sealing_refuses_hashes_or_canonical_bytes_that_do_not_match_the_queued_event(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    with _as(database, "engine") as engine:
        _pending(engine, "orchestrator", "close_status", {"status": "running"})
        with engine.transaction():
            row = engine.execute(
                "SELECT head_seq, head_hash, pending_id, ts, close_id, actor, kind, payload, version_set, writer"
                " FROM trace_claim_pending(10)"
            ).fetchone()
        assert row is not None
        head_seq, head_hash, pending_id, ts, _, actor, kind, payload, versions, writer = row
        honest = canonical_bytes(event_body(head_seq + 1, ts, None, actor, kind, payload, versions, writer))
        forged = canonical_bytes(event_body(head_seq + 1, ts, None, "carol.main", kind, payload, versions, writer))
        attempts = [
            (honest, bytes(32)),  # a garbage hash
            (forged, chain_hash(bytes(head_hash), forged)),  # a consistent hash over other content
        ]
        for canonical, digest in attempts:
            with pytest.raises(psycopg.errors.DataException, match="does not match"), engine.transaction():
                engine.execute("SELECT trace_claim_pending(10)")
                engine.execute("SELECT trace_seal_claimed(%s, %s, %s)", ([pending_id], [canonical], [digest]))
        with engine.transaction():
            engine.execute("SELECT trace_claim_pending(10)")
            engine.execute(
                "SELECT trace_seal_claimed(%s, %s, %s)",
                ([pending_id], [honest], [chain_hash(bytes(head_hash), honest)]),
            )
    assert owner.execute("SELECT actor, writer FROM trace_event").fetchall() == [("orchestrator", "countersign_engine")]


async def test_the_writer_is_part_of_the_hashed_content(database: Database) -> None:
    with psycopg.connect(database.callbacks_url, autocommit=True) as callbacks:
        _pending(callbacks, "callbacks", "decision_refused", REFUSAL)
    async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as conn:
        assert await seal_pending(conn) == 1
        assert (await verify_chain(conn)).ok
        await conn.execute("ALTER TABLE trace_event DISABLE TRIGGER trace_event_append_only")  # a superuser could
        await conn.execute("UPDATE trace_event SET writer = 'countersign_callbacks_x' WHERE seq = 1")
        result = await verify_chain(conn)
    assert not result.ok
    assert result.first_bad_seq == 1


def test_negative_control_the_owner_is_not_restricted_so_the_tests_above_test_the_roles(
    owner: psycopg.Connection[Any],
) -> None:
    gate_id = _seed(owner)
    close_id = owner.execute("SELECT close_id FROM gate WHERE gate_id = %s", (gate_id,)).fetchone()
    assert close_id is not None
    _pending(owner, "carol.main", "close_status", {"gate_id": gate_id}, close_id=str(close_id[0]))
    rows = owner.execute("SELECT actor, writer FROM trace_pending").fetchall()
    assert rows and rows[0][0] == "carol.main" and rows[0][1] not in ("countersign_engine", "countersign_callbacks")
    assert json.dumps(rows[0][0])


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT count(*) FROM construction_certificate",
        "INSERT INTO construction_set (source, digest, loaded_by) VALUES ('x', repeat('a', 64), 'carol.main')",
        "INSERT INTO payment_certification (certificate_id, close_id, gate_id, amount, currency,"
        " certified_by_gate_at) VALUES ('IPC-1', gen_random_uuid(), gen_random_uuid(), 1, 'GBP', now())",
        "DELETE FROM payment_certification",
    ],
)
def test_the_callbacks_role_cannot_read_construction_evidence_or_certify_a_payment(
    database: Database, statement: str
) -> None:
    with _as(database, "callbacks") as callbacks, pytest.raises(psycopg.errors.InsufficientPrivilege):
        callbacks.execute(statement)
