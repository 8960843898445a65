"""A ninth escalation reason: a model request that replay mode finds no recorded response for (issue 12).

A miss is never a silent default: the agent loop ends and the task escalates to the reason's owner.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

SQL = """
ALTER TABLE close_task DROP CONSTRAINT close_task_escalation_check;
ALTER TABLE close_task ADD CONSTRAINT close_task_escalation_check CHECK (escalation IN (
    'anomaly_over_tolerance', 'contradictory_evidence', 'missing_parameter', 'suspected_injection',
    'budget_exhausted', 'specialist_dead_lettered', 'ungrounded_narrative', 'gate_expired', 'no_recorded_response'));
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
