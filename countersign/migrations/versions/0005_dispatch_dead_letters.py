"""Dispatch retries with backoff and a dead letter after three failures.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SQL = """
ALTER TABLE dispatch ADD COLUMN failures integer NOT NULL DEFAULT 0 CHECK (failures >= 0);
ALTER TABLE dispatch ADD COLUMN next_attempt_at timestamptz;
ALTER TABLE dispatch ADD COLUMN dead_lettered_at timestamptz;
ALTER TABLE dispatch DROP CONSTRAINT dispatch_status_check;
ALTER TABLE dispatch ADD CONSTRAINT dispatch_status_check CHECK (status IN ('pending', 'completed', 'failed', 'dead'));
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
