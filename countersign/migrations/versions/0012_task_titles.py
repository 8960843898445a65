"""Each close remembers its workflow's task titles, so every card and status names a task the way its file does.

Titles are copied from the workflow file when the close starts (like the workflow digest), so a card rendered
months later shows the title the close ran under; a close started before this revision shows the task id.

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

SQL = """
ALTER TABLE close_task ADD COLUMN title text CHECK (title IS NULL OR length(title) BETWEEN 1 AND 200);
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
