"""A tenth escalation reason: the model server did not answer through every retry its deadline allowed (issue 24).

The model gateway retries an HTTP 429, a 5xx and a connection never made inside the loop's wall-clock bound (ADR
0038); only when those retries run out does the loop stop `model_unavailable`, and the task escalates to the
reason's owner. Every earlier reason stays (0013's list).

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

SQL = """
ALTER TABLE public.close_task DROP CONSTRAINT close_task_escalation_check;
ALTER TABLE public.close_task ADD CONSTRAINT close_task_escalation_check CHECK (escalation IN (
    'anomaly_over_tolerance', 'contradictory_evidence', 'missing_parameter', 'suspected_injection',
    'budget_exhausted', 'specialist_dead_lettered', 'ungrounded_narrative', 'gate_expired', 'no_recorded_response',
    'model_unavailable'));
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
