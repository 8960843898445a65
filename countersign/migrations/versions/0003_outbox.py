"""The outbox: every card post and card update to Slack or Teams, delivered once per gate and channel.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

OUTBOX = r"""
CREATE TABLE outbox_message (
    message_id          bigserial PRIMARY KEY,
    dedupe_key          text NOT NULL UNIQUE,
    close_id            uuid REFERENCES close_run,
    gate_id             uuid REFERENCES gate,
    platform            text NOT NULL CHECK (platform IN ('slack', 'teams')),
    channel             text NOT NULL,
    kind                text NOT NULL CHECK (kind IN ('gate_card', 'card_update', 'notice')),
    payload             jsonb NOT NULL DEFAULT '{}',
    status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts            integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    last_error          text,
    platform_message_id text,
    rendered_state      text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz
);
CREATE INDEX outbox_message_due ON outbox_message (next_attempt_at) WHERE status = 'pending';
CREATE UNIQUE INDEX outbox_one_card_per_gate_and_channel ON outbox_message (gate_id, platform, channel)
    WHERE kind = 'gate_card';

-- Slack retries an event it thinks we missed; remember what we handled.
CREATE TABLE slack_event_seen (
    event_id  text PRIMARY KEY,
    seen_at   timestamptz NOT NULL DEFAULT now()
);
"""

GRANTS = """
GRANT SELECT, INSERT, UPDATE ON outbox_message TO countersign_engine, countersign_callbacks;
GRANT USAGE ON SEQUENCE outbox_message_message_id_seq TO countersign_engine, countersign_callbacks;
GRANT SELECT, INSERT ON slack_event_seen TO countersign_callbacks, countersign_engine;
GRANT SELECT ON journal, journal_line, dispatch, accounting_period, trace_event TO countersign_callbacks;
"""


def upgrade() -> None:
    op.execute(OUTBOX)
    op.execute(GRANTS)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
