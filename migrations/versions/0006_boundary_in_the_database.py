"""The decision boundary and the trace's writers, enforced by PostgreSQL (filled by the boundary work).

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

SQL = "SELECT 1"


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
