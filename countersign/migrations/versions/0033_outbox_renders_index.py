"""A posted card's last render is found by an index, not by scanning the outbox.

Every decision asks which of its gate's posted cards need an update (`countersign.store.outbox.posted_cards`): for
each card, the state it last showed is the newest sent `gate_card` or `card_update` of that gate, platform and
channel. Nothing indexed those columns for updates, so the lookup read the whole outbox, every decision: about 30 ms
a decision with 150,000 messages, growing with every card ever posted. This index serves that lookup in the order it
reads (newest first), for the sent card messages only.

Revision ID: 0033
Revises: 0032
"""

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX outbox_message_renders ON public.outbox_message (gate_id, platform, channel, sent_at DESC)"
        " WHERE status = 'sent' AND kind IN ('gate_card', 'card_update')"
    )


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
