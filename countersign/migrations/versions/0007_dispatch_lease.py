"""Dispatch claims work with a lease row instead of an advisory lock held across the specialist call.

A worker claims a dispatch in one short transaction (`leased_by`, `lease_until`), gives its connection back, calls
the specialist, renews the lease with brief transactions while the call runs, and records the result in a new
transaction. A worker that dies loses its lease when `lease_until` passes; another worker then takes the call over.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SQL = """
ALTER TABLE dispatch ADD COLUMN leased_by text CHECK (leased_by IS NULL OR length(leased_by) <= 200);
ALTER TABLE dispatch ADD COLUMN lease_until timestamptz;
ALTER TABLE dispatch ADD CONSTRAINT dispatch_lease_whole CHECK ((leased_by IS NULL) = (lease_until IS NULL));
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
