"""Reserved for issue 25 (placeholder: replaced by the migration that takes this number).

Revision ID: 0023
Revises: 0022
"""

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
