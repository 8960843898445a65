"""Schema migrations: Alembic, driven from code. Only the owner migrates (`countersign db upgrade`, or the embedded
default, which is its own owner); every other process checks the schema is at this release's head and refuses to
start otherwise."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from psycopg import AsyncConnection, sql

from countersign import migrations
from countersign.bootstrap.database import Database
from countersign.policy import Policy, Workflow

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent
UNREADABLE_REVISION = "a revision before 0010"  # service roles may read alembic_version from 0010 on


def alembic_config(database: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database.sqlalchemy_url().replace("%", "%%"))
    return config


def upgrade(database: Database, policy: Policy | None = None, workflows: Mapping[str, Workflow] | None = None) -> None:
    """Apply every pending migration as the owner, take object creation away from everyone else in this database,
    and seed the policy minimums the database enforces (the shipped `config/` when no rules are given)."""
    command.upgrade(alembic_config(database), "head")
    harden_database(database)
    if policy is None or workflows is None:
        from countersign.bootstrap.settings import default_config_dir
        from countersign.policy import load_policy, load_workflows

        policy = load_policy(default_config_dir() / "risk.yaml")
        workflows = load_workflows(default_config_dir() / "workflows", policy)
    seed_policy(database, policy, workflows)


# Per database, so a clone or a restore starts with PostgreSQL's defaults (TEMPORARY for PUBLIC): `db upgrade`
# re-applies it. The schema's CREATE is revoked by migrations 0006 and 0015 and travels with the schema.
HARDEN_DATABASE = """
DO $$
BEGIN
    EXECUTE format('REVOKE TEMPORARY, CREATE ON DATABASE %I FROM PUBLIC, countersign_engine, countersign_callbacks',
                   current_database());
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'only the owner of database % can revoke TEMPORARY from PUBLIC; services will refuse to start '
                  'until it is revoked', current_database();
END $$
"""


def harden_database(database: Database) -> None:
    with database.connect(autocommit=True) as conn:
        conn.execute(HARDEN_DATABASE)


def enforced_digest(policy: Policy, workflows: Mapping[str, Workflow]) -> str:
    """The digest of the rules the database enforces: risk.yaml's, then each workflow file's, by name."""
    lines = [f"policy:{policy.digest}", *(f"workflow:{name}:{workflows[name].digest}" for name in sorted(workflows))]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def seed_policy(database: Database, policy: Policy, workflows: Mapping[str, Workflow]) -> str:
    """Replace the policy minimums the database enforces (as the owner, in one transaction); returns their digest.

    Each tier with its rank, quorum and approver role; each workflow task's minimum tier; the amount thresholds; the
    escalation tier, owners and findings tier. A changed risk.yaml takes effect in the database only through this.
    """
    with database.connect() as conn, conn.transaction(), conn.cursor() as cur:
        for statement, rows in policy_seed(policy, workflows):
            cur.executemany(statement, rows) if rows else cur.execute(statement)
    return enforced_digest(policy, workflows)


async def seed_policy_async(conn: AsyncConnection[Any], policy: Policy, workflows: Mapping[str, Workflow]) -> str:
    """`seed_policy` on an owner's connection the caller holds (a test that brings a workflow of its own)."""
    async with conn.transaction(), conn.cursor() as cur:
        for statement, rows in policy_seed(policy, workflows):
            await (cur.executemany(statement, rows) if rows else cur.execute(statement))
    return enforced_digest(policy, workflows)


def policy_seed(policy: Policy, workflows: Mapping[str, Workflow]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The statements that replace the seeded policy, each with its rows (none: run it once); an INSERT with no rows
    (no entities, no always-human accounts) is left out."""
    tasks = [(name, task.id, task.risk_tier) for name, flow in sorted(workflows.items()) for task in flow.tasks]
    always_human = policy.always_human
    always_human_accounts = [
        *(("*", account) for account in (always_human.accounts if always_human else ())),
        *((entity.entity, account) for entity in policy.entities for account in entity.always_human_accounts),
    ]
    inserts: list[tuple[str, list[tuple[Any, ...]]]] = [
        (
            "INSERT INTO policy_tier (name, rank, gated, quorum, approver_role, accepted_proofs)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            [(t.name, t.rank, t.gate, t.quorum, t.approver_role, list(t.accepted_proofs)) for t in policy.tiers],
        ),
        ("INSERT INTO policy_task (workflow, task, tier) VALUES (%s, %s, %s)", list(tasks)),
        (
            "INSERT INTO policy_amount_threshold (min_amount, tier) VALUES (%s, %s)",
            [(t.min_amount, t.tier) for t in policy.amount_thresholds],
        ),
        (
            "INSERT INTO policy_escalation_owner (reason, approver_role) VALUES (%s, %s)",
            [(reason.value, role) for reason, role in policy.escalation_owners],
        ),
        (
            "INSERT INTO policy_entity (entity, currency) VALUES (%s, %s)",
            [(entity.entity, entity.currency) for entity in policy.entities],
        ),
        (
            "INSERT INTO policy_entity_threshold (entity, min_amount, tier) VALUES (%s, %s, %s)",
            [
                (entity.entity, threshold.min_amount, threshold.tier)
                for entity in policy.entities
                for threshold in entity.amount_thresholds or ()
            ],
        ),
        ("INSERT INTO policy_always_human_account (entity, account) VALUES (%s, %s)", always_human_accounts),
        (
            "INSERT INTO policy_certified_accrual (contract_id, entity, cost_account, accrual_account)"
            " VALUES (%s, %s, %s, %s)",
            [
                (contract, entity, certified.cost_account, certified.accrual_account)
                for contract, entity in certified.contracts
            ]
            if (certified := policy.accruals.certified) is not None
            else [],
        ),
        (
            "INSERT INTO policy_enforced (digest, escalation_tier, findings_tier, currency, always_human_tier)"
            " VALUES (%s, %s, %s, %s, %s)",
            [
                (
                    enforced_digest(policy, workflows),
                    policy.escalation_tier,
                    policy.findings_tier,
                    policy.currency,
                    always_human.tier if always_human else None,
                )
            ],
        ),
    ]
    return [
        *((f"DELETE FROM {table}", []) for table in _POLICY_TABLES),
        *((statement, rows) for statement, rows in inserts if rows),
    ]


# Children first, so the deletes never meet a foreign key.
_POLICY_TABLES = (
    "policy_task",
    "policy_amount_threshold",
    "policy_entity_threshold",
    "policy_entity",
    "policy_always_human_account",
    "policy_certified_accrual",
    "policy_escalation_owner",
    "policy_enforced",
    "policy_tier",
)


class PolicyNotEnforced(RuntimeError):
    """The rules this process loaded are not the ones the database enforces; only `db upgrade` changes those."""

    def __init__(self, enforced: str | None, loaded: str) -> None:
        self.enforced = enforced
        self.loaded = loaded
        super().__init__(
            f"the database enforces policy {enforced[:12] if enforced else 'none'}, this process loaded {loaded[:12]}"
            " (config/risk.yaml or config/workflows/ changed): run `countersign db upgrade` as the owner"
        )


class ObjectCreationAllowed(RuntimeError):
    """A service role may create objects in the database: names could be shadowed."""

    def __init__(self, role: str, what: str) -> None:
        self.role = role
        super().__init__(
            f"role {role} may {what} in this database; run `countersign db upgrade` as the database owner"
            " (it revokes TEMPORARY and CREATE from PUBLIC and the service roles)"
        )


def require_enforced(url: str, policy: Policy, workflows: Mapping[str, Workflow]) -> None:
    """Raise unless the database at `url` enforces exactly these rules and neither service role can create objects."""
    loaded = enforced_digest(policy, workflows)
    with psycopg.connect(url, autocommit=True) as conn:
        enforced_row = conn.execute("SELECT (SELECT digest FROM policy_enforced)").fetchone()
        rights = conn.execute(
            "SELECT r.rolname, has_database_privilege(r.oid, current_database(), 'TEMPORARY'),"
            " has_database_privilege(r.oid, current_database(), 'CREATE'),"
            " has_schema_privilege(r.oid, 'public', 'CREATE')"
            " FROM pg_roles r WHERE r.rolname IN ('countersign_engine', 'countersign_callbacks') ORDER BY r.rolname"
        ).fetchall()
    enforced = enforced_row[0] if enforced_row else None
    if enforced != loaded:
        raise PolicyNotEnforced(enforced, loaded)
    for role, temporary, create_schema, create_in_public in rights:
        for allowed, what in (
            (temporary, "create temporary tables"),
            (create_schema, "create schemas"),
            (create_in_public, "create objects in schema public"),
        ):
            if allowed:
                raise ObjectCreationAllowed(str(role), what)


def head_revision() -> str:
    """The newest revision in countersign/migrations/versions: what `db upgrade` brings a database to."""
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None, "countersign/migrations/versions has no head revision"
    return str(head)


def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at; None before the first migration.

    Any role may ask: the service roles read alembic_version from revision 0010 on; before that they cannot, and the
    answer is UNREADABLE_REVISION. Connection errors (psycopg.OperationalError) reach the caller unchanged.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return None
        try:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except psycopg.errors.InsufficientPrivilege:
            return UNREADABLE_REVISION
        return str(row[0]) if row else None


class SchemaNotAtHead(RuntimeError):
    """The database's schema is not the one this release needs; only `countersign db upgrade` moves it."""

    def __init__(self, current: str | None, head: str) -> None:
        self.current = current
        self.head = head
        super().__init__(
            f"database schema is at {current or 'no revision (never migrated)'}, this release needs {head}: "
            "run `countersign db upgrade`"
        )


def require_head(url: str) -> None:
    """Raise SchemaNotAtHead unless the database at `url` is at this release's head revision."""
    current, head = current_revision(url), head_revision()
    if current != head:
        raise SchemaNotAtHead(current, head)


def set_role_passwords(database: Database, passwords: Mapping[str, str]) -> list[str]:
    """Set each service role's password (as the owner); returns the roles changed.

    The password is hashed on this side (libpq's PQencryptPasswordConn, with the server's `password_encryption`,
    e.g. SCRAM-SHA-256) and sent as a literal (psycopg's sql.Literal), so the plain text reaches neither the server's
    statement log nor ours.
    """
    changed = []
    with database.connect(autocommit=True) as conn:
        for role, password in passwords.items():
            verifier = _encrypted(conn, password, role)
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(verifier)))
            changed.append(role)
    return changed


def _encrypted(conn: psycopg.Connection[Any], password: str, role: str) -> str:
    return conn.pgconn.encrypt_password(password.encode(), role.encode()).decode()


async def schema_revision(conn: AsyncConnection[Any]) -> str | None:
    """The revision the database's schema is at (alembic_version), or None before the first migration.

    Service roles may read it from revision 0010 on; before that the table is the owner's, and the schema is behind.
    """
    async with conn.cursor() as cur:
        await cur.execute("SELECT to_regclass('alembic_version') IS NOT NULL")
        exists = await cur.fetchone()
        if not exists or not exists[0]:
            return None
        try:
            await cur.execute("SELECT version_num FROM alembic_version")
        except psycopg.errors.InsufficientPrivilege:
            return "an older revision (before 0010)"
        row = await cur.fetchone()
    return str(row[0]) if row else None


async def ping(conn: AsyncConnection[Any]) -> None:
    """Ask the database one trivial question: it answers, as this connection's role."""
    await conn.execute("SELECT 1")
