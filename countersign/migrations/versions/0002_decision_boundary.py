"""The decision boundary: database roles per service, channel identities, gate deadlines and requesters.

The engine connects as `countersign_engine`, which may read gate decisions and never write them; the callbacks
service connects as `countersign_callbacks`, which may INSERT decisions and nothing more on that table. Neither role
owns a table, so neither can disable a trigger. Roles are cluster-wide, so they are created only when missing.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"

ROLES = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ENGINE_ROLE}') THEN
        CREATE ROLE {ENGINE_ROLE} LOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{CALLBACKS_ROLE}') THEN
        CREATE ROLE {CALLBACKS_ROLE} LOGIN;
    END IF;
END $$;
"""

IDENTITIES = r"""
CREATE TABLE principal_identity (
    principal_id text NOT NULL REFERENCES principal,
    channel      text NOT NULL CHECK (channel IN ('slack', 'teams', 'login')),
    tenant       text NOT NULL DEFAULT '',
    external_id  text NOT NULL CHECK (external_id <> ''),
    PRIMARY KEY (channel, tenant, external_id)
);
CREATE INDEX principal_identity_principal ON principal_identity (principal_id);
"""

GATE_DEADLINES = r"""
ALTER TABLE gate ADD COLUMN requested_by text[] NOT NULL DEFAULT '{}';
ALTER TABLE gate ADD COLUMN expires_at timestamptz;
ALTER TABLE gate ADD COLUMN escalated_at timestamptz;
ALTER TABLE gate DROP CONSTRAINT gate_lifecycle_check;
ALTER TABLE gate ADD CONSTRAINT gate_lifecycle_check CHECK (lifecycle IN ('open', 'applied', 'expired', 'cancelled'));
ALTER TABLE gate ADD CONSTRAINT gate_expires_after_due CHECK (expires_at IS NULL OR expires_at > due_at);

CREATE OR REPLACE VIEW gate_state AS
SELECT g.gate_id,
       g.close_id,
       g.task,
       g.attempt,
       g.kind,
       g.tier,
       g.quorum,
       g.lifecycle,
       count(d.decision_id) FILTER (WHERE d.decision = 'approve') AS approvals,
       count(d.decision_id) FILTER (WHERE d.decision = 'reject') AS rejections,
       CASE
           WHEN count(d.decision_id) FILTER (WHERE d.decision = 'reject') > 0 THEN 'rejected'
           WHEN count(d.decision_id) FILTER (WHERE d.decision = 'approve') >= g.quorum THEN 'approved'
           WHEN g.lifecycle = 'cancelled' THEN 'cancelled'
           WHEN g.lifecycle = 'expired' OR g.expires_at <= now() THEN 'expired'
           ELSE 'open'
       END AS status,
       (g.lifecycle = 'open' AND g.due_at <= now()
        AND count(d.decision_id) FILTER (WHERE d.decision = 'reject') = 0
        AND count(d.decision_id) FILTER (WHERE d.decision = 'approve') < g.quorum) AS overdue
  FROM gate g
  LEFT JOIN gate_decision d ON d.gate_id = g.gate_id
 GROUP BY g.gate_id;
"""

ENGINE_TABLES_INSERT_ONLY = (
    "book_set",
    "book_account",
    "book_gl_line",
    "bank_feed",
    "book_bank_line",
    "book_ap_item",
    "book_ar_item",
    "book_grni",
    "book_intercompany",
    "book_pnl_reference",
    "journal",
    "journal_line",
    "trace_event",
)
ENGINE_TABLES_READ_WRITE = ("close_run", "close_task", "dispatch", "gate", "accounting_period", "trace_head")
ENGINE_TABLES_READ_ONLY = ("principal", "principal_identity", "gate_decision", "gate_state")
ENGINE_SEQUENCES = ("book_set_book_set_id_seq", "dispatch_dispatch_id_seq", "journal_journal_id_seq")

CALLBACKS_TABLES_READ_ONLY = (
    "gate",
    "gate_state",
    "close_run",
    "close_task",
    "principal",
    "principal_identity",
)


def grants() -> str:
    statements = [
        f"GRANT USAGE ON SCHEMA public TO {ENGINE_ROLE}, {CALLBACKS_ROLE}",
        f"GRANT SELECT, INSERT ON {', '.join(ENGINE_TABLES_INSERT_ONLY)} TO {ENGINE_ROLE}",
        f"GRANT SELECT, INSERT, UPDATE ON {', '.join(ENGINE_TABLES_READ_WRITE)} TO {ENGINE_ROLE}",
        f"GRANT SELECT ON {', '.join(ENGINE_TABLES_READ_ONLY)} TO {ENGINE_ROLE}",
        f"GRANT USAGE ON SEQUENCE {', '.join(ENGINE_SEQUENCES)} TO {ENGINE_ROLE}",
        f"GRANT SELECT ON {', '.join(CALLBACKS_TABLES_READ_ONLY)} TO {CALLBACKS_ROLE}",
        f"GRANT SELECT, INSERT ON gate_decision, trace_event TO {CALLBACKS_ROLE}",
        f"GRANT SELECT, UPDATE ON trace_head TO {CALLBACKS_ROLE}",
        f"GRANT USAGE ON SEQUENCE gate_decision_decision_id_seq TO {CALLBACKS_ROLE}",
    ]
    return ";\n".join(statements) + ";"


def upgrade() -> None:
    op.execute(ROLES)
    op.execute(IDENTITIES)
    op.execute(GATE_DEADLINES)
    op.execute(grants())


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
