"""One migrated database shared by a test module, and rows of a close put straight into any state.

The lifecycle tests run many cases against the same rows, each in a transaction that is rolled back, so they clone
the template database once per module instead of once per test.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb

from countersign.bootstrap.database import Database, with_database_name
from countersign.bootstrap.migrate import harden_database

APPROVER = "carol.main"  # a human with the cfo role and a registered key


@contextmanager
def cloned_database(pg_server_url: str, template_url: str) -> Iterator[Database]:
    template = conninfo_to_dict(template_url)["dbname"]
    name = f"t_lifecycle_{uuid.uuid4().hex[:12]}"
    admin_url = with_database_name(pg_server_url, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        database = Database(with_database_name(pg_server_url, name))
        harden_database(database)
        yield database
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def seed_approver(owner: psycopg.Connection[Any]) -> None:
    owner.execute(
        "INSERT INTO principal (principal_id, kind, display_name, roles, public_key)"
        " VALUES (%s, 'human', 'Carol Main', '{cfo}', %s) ON CONFLICT DO NOTHING",
        (APPROVER, bytes(range(32))),
    )


def new_close(owner: psycopg.Connection[Any], *, status: str = "running") -> str:
    """A close with no tasks, its run put straight into `status` (past the supervisor, as the owner may)."""
    entity = f"E{uuid.uuid4().hex[:12]}"
    book = owner.execute(
        "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
        " VALUES (%s, '2026-10', 'GBP', 'test', '{}', 'd') RETURNING book_set_id",
        (entity,),
    ).fetchone()
    assert book is not None
    close_id = str(uuid.uuid4())
    with _supervisor_off(owner, "close_run", "close_run_supervised"):
        owner.execute(
            "INSERT INTO close_run (close_id, entity, period, book_set_id, policy_digest, checklist_digest,"
            " started_by, status) VALUES (%s, %s, '2026-10', %s, 'p', 'c', 'test-starter', %s)",
            (close_id, entity, book[0], status),
        )
    return close_id


def put_task(
    owner: psycopg.Connection[Any],
    close_id: str,
    task: str,
    status: str,
    *,
    attempt: int = 1,
    escalation: str | None = None,
) -> None:
    """A task row in any state, written past the supervisor (test set-up only)."""
    with _supervisor_off(owner, "close_task", "close_task_supervised"):
        owner.execute(
            "INSERT INTO close_task (close_id, task, status, attempt, escalation) VALUES (%s, %s, %s, %s, %s)",
            (close_id, task, status, attempt, escalation),
        )


def put_gate(
    owner: psycopg.Connection[Any],
    close_id: str,
    task: str,
    *,
    attempt: int = 1,
    kind: str = "approval",
    lifecycle: str = "open",
) -> str:
    gate_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    with _supervisor_off(owner, "gate", "gate_supervised", "gate_admitted"):
        owner.execute(
            "INSERT INTO gate (gate_id, close_id, task, attempt, kind, tier, quorum, approver_role, rule, summary,"
            " prepared_by, due_at, expires_at, lifecycle, subject)"
            " VALUES (%s, %s, %s, %s, %s, 'high', 1, 'cfo', 'test', '{}', 'orchestrator', %s, %s, %s,"
            " (SELECT entity FROM close_run WHERE close_id = %s))",
            (
                gate_id,
                close_id,
                task,
                attempt,
                kind,
                now + timedelta(hours=1),
                now + timedelta(hours=2),
                lifecycle,
                close_id,
            ),
        )
    return gate_id


def decide(conn: psycopg.Connection[Any], gate_id: str, decision: str = "approve") -> None:
    """The approver's decision, with a signed-callback proof of the shape the database admits."""
    proof = {"kind": "ed25519", "signature": base64.b64encode(bytes(64)).decode(), "signed_at": 1_800_000_000}
    conn.execute(
        "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel, proof)"
        " VALUES (%s, %s, %s, 'ok', %s, 'x', 'signed_callback', %s)",
        (gate_id, APPROVER, decision, uuid.uuid4().hex, Jsonb(proof)),
    )


@contextmanager
def _supervisor_off(owner: psycopg.Connection[Any], table: str, *triggers: str) -> Iterator[None]:
    """Set-up only, as the owner: rows put straight into a state (the gate's policy check is one of these)."""
    with owner.transaction():
        for trigger in triggers:
            owner.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
        yield
        for trigger in triggers:
            owner.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}")
