"""Reserved for issue 25 (placeholder: replaced by the migration that takes this number).

Revision ID: 0024
Revises: 0023
"""

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
