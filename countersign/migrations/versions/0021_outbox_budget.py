# ruff: noqa: E501  (SQL statements; a long line is one statement line)
"""The outbox retries for a time budget, not a number of attempts; a dead letter can be redriven (issue 24, ADR 0035).

- **A budget measured from a point the row keeps.** `budget_from` is when the message's retry budget started: its
  creation, or the moment a person redrove it. The deliverer dead-letters a message only when an attempt fails at or
  after `budget_from` + COUNTERSIGN_OUTBOX_BUDGET_HOURS; until then the next attempt's time (`next_attempt_at`, jittered
  exponential backoff with a cap) is in the row, so retries survive a restart.
- **Dead letters are dated and counted.** `dead_lettered_at` is set exactly while the status is `failed` (a CHECK);
  `redrives` counts how often a person put the message back.
- **Status moves one way, except a redrive.** pending → sent and pending → failed; failed → pending only as a redrive
  (`redrives` one more, a budget that starts later than the old one). A sent message never moves again, whoever
  connects: a redrive cannot post a card twice.

Rows written before this revision: `budget_from` is their creation; a failed row's `dead_lettered_at` is its last
scheduled attempt (the best the old row says).

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

COLUMNS = r"""
ALTER TABLE public.outbox_message ADD COLUMN budget_from timestamptz NOT NULL DEFAULT now();
UPDATE public.outbox_message SET budget_from = created_at;
ALTER TABLE public.outbox_message ADD COLUMN dead_lettered_at timestamptz;
UPDATE public.outbox_message SET dead_lettered_at = greatest(created_at, next_attempt_at) WHERE status = 'failed';
ALTER TABLE public.outbox_message ADD CONSTRAINT outbox_dead_letter_dated
    CHECK ((status = 'failed') = (dead_lettered_at IS NOT NULL));
ALTER TABLE public.outbox_message ADD COLUMN redrives integer NOT NULL DEFAULT 0 CHECK (redrives >= 0);
CREATE INDEX outbox_message_dead_letters ON public.outbox_message (dead_lettered_at) WHERE status = 'failed';
"""

STATUS_MOVES = r"""
CREATE FUNCTION public.outbox_status_moves() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status AND NOT (
           (OLD.status = 'pending' AND NEW.status IN ('sent', 'failed'))
        OR (OLD.status = 'failed' AND NEW.status = 'pending' AND NEW.redrives = OLD.redrives + 1
            AND NEW.budget_from > OLD.budget_from)) THEN
        RAISE EXCEPTION 'outbox message % may not move from % to % (sent is final; failed returns to pending only by a redrive with a fresh budget)',
            OLD.message_id, OLD.status, NEW.status USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION public.outbox_status_moves() FROM PUBLIC;
CREATE TRIGGER outbox_status_moves BEFORE UPDATE OF status ON public.outbox_message
    FOR EACH ROW EXECUTE FUNCTION public.outbox_status_moves();
ALTER TABLE public.outbox_message ENABLE ALWAYS TRIGGER outbox_status_moves;
"""


def upgrade() -> None:
    op.execute(COLUMNS)
    op.execute(STATUS_MOVES)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
