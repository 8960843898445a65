"""The outbox carries facts, never rendered text; delivery claims rows with a lease instead of holding row locks.

A compromised engine or callbacks process could write any text into `outbox_message.payload` and the bot posted it
("please re-approve at https://evil.example"). Now a row holds only facts: the gate, the message kind and, for a
notice, a template name from a fixed set with integer arguments. The deliverer renders every message from the tables
through `countersign/cards/`. A CHECK refuses anything else, whoever writes, and a trigger lets the callbacks role
insert only
`card_update` rows (and change none).

Delivery claims a row with `claimed_by` / `claimed_until` in one short statement and records the outcome in another,
so no connection, transaction or row lock is held while Slack or Teams answers (or hangs).

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

SQL = r"""
ALTER TABLE outbox_message ADD COLUMN template text;
ALTER TABLE outbox_message ADD COLUMN claimed_by text CHECK (claimed_by IS NULL OR length(claimed_by) <= 200);
ALTER TABLE outbox_message ADD COLUMN claimed_until timestamptz;
ALTER TABLE outbox_message ADD CONSTRAINT outbox_claim_whole CHECK ((claimed_by IS NULL) = (claimed_until IS NULL));

-- Notices written before this revision carried their text; keep the fact they named, drop the text.
UPDATE outbox_message SET template = 'checkpoint',
       payload = jsonb_build_object('tree_size', split_part(dedupe_key, ':', 2)::bigint)
 WHERE kind = 'notice' AND dedupe_key ~ '^checkpoint:[1-9][0-9]{0,17}:';
UPDATE outbox_message SET template = 'gate_overdue', payload = '{}'
 WHERE kind = 'notice' AND dedupe_key LIKE 'gate_overdue:%' AND gate_id IS NOT NULL;
UPDATE outbox_message SET payload = '{}' WHERE kind = 'gate_card';
UPDATE outbox_message SET payload = '{}'
 WHERE kind = 'card_update' AND NOT (payload - 'state' = '{}'::jsonb
       AND (NOT payload ? 'state' OR payload->>'state' ~ '^[a-z_]{1,16}:[0-9]{1,6}:[0-9]{1,6}$'));
DELETE FROM outbox_message WHERE kind = 'notice' AND template IS NULL;

-- What a row may say. Template names and their (integer) arguments match countersign/engine/outbox.py NOTICE_TEMPLATES.
CREATE FUNCTION outbox_row_is_facts(kind text, template text, gate_id uuid, payload jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(payload) = 'object' AND CASE kind
        WHEN 'gate_card' THEN template IS NULL AND gate_id IS NOT NULL AND payload = '{}'::jsonb
        WHEN 'card_update' THEN template IS NULL AND gate_id IS NOT NULL AND payload - 'state' = '{}'::jsonb
            AND (NOT payload ? 'state' OR (jsonb_typeof(payload->'state') = 'string'
                 AND payload->>'state' ~ '^[a-z_]{1,16}:[0-9]{1,6}:[0-9]{1,6}$'))
        WHEN 'notice' THEN CASE template
            WHEN 'gate_overdue' THEN gate_id IS NOT NULL AND payload = '{}'::jsonb
            WHEN 'checkpoint' THEN payload - 'tree_size' = '{}'::jsonb
                AND jsonb_typeof(payload->'tree_size') = 'number'
                AND payload->>'tree_size' ~ '^[1-9][0-9]{0,17}$'
            ELSE false END
        ELSE false END
$$;
ALTER TABLE outbox_message ADD CONSTRAINT outbox_message_carries_facts
    CHECK (coalesce(outbox_row_is_facts(kind, template, gate_id, payload), false));

-- The decision side announces decided cards, nothing else.
CREATE FUNCTION outbox_callbacks_card_updates_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_user = 'countersign_callbacks' AND (TG_OP <> 'INSERT' OR NEW.kind <> 'card_update') THEN
        RAISE EXCEPTION 'the callbacks role may only insert card_update rows into the outbox (tried % of %)',
            TG_OP, CASE WHEN TG_OP = 'DELETE' THEN OLD.kind ELSE NEW.kind END
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END
$$;
CREATE TRIGGER outbox_callbacks_card_updates_only BEFORE INSERT OR UPDATE OR DELETE ON outbox_message
    FOR EACH ROW EXECUTE FUNCTION outbox_callbacks_card_updates_only();
ALTER TABLE outbox_message ENABLE ALWAYS TRIGGER outbox_callbacks_card_updates_only;
REVOKE UPDATE, DELETE ON outbox_message FROM countersign_callbacks;
REVOKE ALL ON FUNCTION outbox_callbacks_card_updates_only() FROM PUBLIC;
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
