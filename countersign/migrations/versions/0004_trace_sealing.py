"""The trace in two phases, and signed checkpoints.

Effects write their events to `trace_pending` inside their own transaction (no global lock on the request path). A
sealer takes the pending events in batches under one advisory lock, gives them gap-free sequence numbers, chains
them into `trace_event` and deletes them from the queue. `trace_context` holds each close's version set, merged into
every event of the close at sealing. `trace_checkpoint` holds signed checkpoints; like the log it is append-only.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SQL = r"""
CREATE TABLE trace_pending (
    pending_id  bigserial PRIMARY KEY,
    ts          text NOT NULL,
    close_id    uuid,
    actor       text NOT NULL,
    kind        text NOT NULL,
    payload     jsonb NOT NULL,
    version_set jsonb NOT NULL
);

CREATE TABLE trace_context (
    close_id    uuid PRIMARY KEY,
    version_set jsonb NOT NULL
);

CREATE TABLE trace_checkpoint (
    tree_size bigint PRIMARY KEY CHECK (tree_size >= 1),
    root      bytea NOT NULL CHECK (length(root) = 32),
    origin    text NOT NULL,
    key_name  text NOT NULL,
    note      text NOT NULL,
    signed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER trace_checkpoint_append_only BEFORE UPDATE OR DELETE ON trace_checkpoint
    FOR EACH ROW EXECUTE FUNCTION refuse_trace_change();
CREATE TRIGGER trace_checkpoint_no_truncate BEFORE TRUNCATE ON trace_checkpoint
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_trace_change();
ALTER TABLE trace_checkpoint ENABLE ALWAYS TRIGGER trace_checkpoint_append_only;
ALTER TABLE trace_checkpoint ENABLE ALWAYS TRIGGER trace_checkpoint_no_truncate;

-- UPDATE only so the sealer may lock rows (SELECT … FOR UPDATE); nothing updates pending events.
GRANT SELECT, INSERT, UPDATE, DELETE ON trace_pending TO countersign_engine, countersign_callbacks;
GRANT USAGE ON SEQUENCE trace_pending_pending_id_seq TO countersign_engine, countersign_callbacks;
GRANT SELECT, INSERT ON trace_context, trace_checkpoint TO countersign_engine;
GRANT SELECT ON trace_context, trace_checkpoint TO countersign_callbacks;
GRANT SELECT, INSERT ON trace_event TO countersign_callbacks;
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
