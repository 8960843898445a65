"""The service roles may read the schema revision, so a process holding no owner credentials can tell it is at head.

`serve`'s `/readyz` (and any start-up check run as a service role) reads `alembic_version`; only the owner could.
The table holds one revision id and nothing else.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

SQL = "GRANT SELECT ON alembic_version TO countersign_engine, countersign_callbacks;"


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
