"""The payment notice proper (issue 35): HGCRA 1996 s. 110A, served on every decided certificate.

- **A second kind of notice.** `payment_notice.kind` takes `payment` beside `pay_less`: the payer's notice of the sum
  it considers due at the due date and the basis on which that sum is calculated. One per certificate and kind, as
  before, append-only.
- **Admitted only against the decided payment gate, with the sum it decided.** The same checks as a pay-less notice
  (the certificate's own payment approval gate, the notified sum is the claim on that gate's frozen summary, the
  document's SHA-256), and the sum: a rejected gate's payment notice says nothing is due; an approved gate's says the
  certified amount (`payment_certification.amount`), whatever its relation to the claim. The caller cannot choose it.
- **Its deadline from the frozen rows.** `payment_terms.payment_notice_days` (default 5) after the due date (the
  Scheme for Construction Contracts, para. 9): the database computes it, `served_at` is its clock and
  `served_in_time` says whether the notice beat it. A pay-less notice's deadline is computed as in 0018.
- **Posted in the channel.** The outbox may carry the notice template `payment_notice` naming the notice by its id.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

KINDS = r"""
ALTER TABLE public.payment_notice DROP CONSTRAINT payment_notice_kind_check;
ALTER TABLE public.payment_notice ADD CONSTRAINT payment_notice_kind_check CHECK (kind IN ('pay_less', 'payment'));
"""

# 0018's admission, with the payment notice's own sum rule and deadline.
ADMIT_NOTICE = r"""
CREATE OR REPLACE FUNCTION public.admit_payment_notice() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    g record;
    certified numeric;
    claimed numeric;
    valued date;
    received date;
    due_days int;
    final_days int;
    pay_less_days int;
    payment_days int;
BEGIN
    SELECT s.close_id, gt.task, gt.kind, gt.subject, s.status, gt.summary, r.workflow, r.entity,
           (b.manifest->>'construction_set_id') AS manifest_set
      INTO g
      FROM public.gate_state s
      JOIN public.gate gt ON gt.gate_id = s.gate_id
      JOIN public.close_run r ON r.close_id = s.close_id
      JOIN public.book_set b ON b.book_set_id = r.book_set_id
     WHERE s.gate_id = NEW.gate_id;
    IF NOT FOUND OR g.close_id IS DISTINCT FROM NEW.close_id OR g.workflow <> 'certificates' OR g.task <> 'payment'
       OR g.kind <> 'approval' OR g.subject IS DISTINCT FROM NEW.certificate_id
       OR g.entity IS DISTINCT FROM NEW.certificate_id OR g.manifest_set IS DISTINCT FROM NEW.set_id::text THEN
        RAISE EXCEPTION 'notice refused: gate % is not the payment approval gate of certificate %''s run %',
            NEW.gate_id, NEW.certificate_id, NEW.close_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    claimed := (g.summary #>> '{certificate,claimed_amount}')::numeric;
    IF claimed IS NULL THEN
        claimed := (g.summary #>> '{certificate,amount_to_certify}')::numeric;
    END IF;
    IF claimed IS DISTINCT FROM NEW.notified_sum
       OR (g.summary #>> '{certificate,currency}') IS DISTINCT FROM NEW.currency THEN
        RAISE EXCEPTION 'notice refused: the notified sum % % is not the claim on gate % (% %)', NEW.currency,
            NEW.notified_sum, NEW.gate_id, g.summary #>> '{certificate,currency}', claimed
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF g.status = 'rejected' THEN
        IF NEW.sum_to_pay <> 0 THEN
            RAISE EXCEPTION 'notice refused: gate % was rejected, so the sum to be paid is nothing, not %',
                NEW.gate_id, NEW.sum_to_pay USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF g.status = 'approved' THEN
        SELECT p.amount INTO certified FROM public.payment_certification p
         WHERE p.gate_id = NEW.gate_id AND p.certificate_id = NEW.certificate_id;
        IF certified IS NULL OR certified IS DISTINCT FROM NEW.sum_to_pay
           OR (NEW.kind = 'pay_less' AND certified >= NEW.notified_sum) THEN
            RAISE EXCEPTION 'notice refused: gate % certified % %, so a % notice for % is not the one due',
                NEW.gate_id, NEW.currency, certified, NEW.kind, NEW.sum_to_pay USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSE
        RAISE EXCEPTION 'notice refused: gate % is not decided', NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.sha256 IS DISTINCT FROM encode(sha256(convert_to(NEW.document, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION 'notice refused: sha256 is not the digest of the document' USING ERRCODE = 'check_violation';
    END IF;
    SELECT (c.doc->>'date')::date, (s.loaded_at AT TIME ZONE 'UTC')::date,
           COALESCE((k.doc #>> '{payment_terms,due_date_days}')::int, 7),
           COALESCE((k.doc #>> '{payment_terms,final_date_days}')::int, 17),
           COALESCE((k.doc #>> '{payment_terms,pay_less_notice_days}')::int, 7),
           COALESCE((k.doc #>> '{payment_terms,payment_notice_days}')::int, 5)
      INTO valued, received, due_days, final_days, pay_less_days, payment_days
      FROM public.construction_certificate c
      JOIN public.construction_set s ON s.set_id = c.set_id
      JOIN public.construction_contract k ON k.set_id = c.set_id AND k.contract_id = c.contract_id
     WHERE c.set_id = NEW.set_id AND c.certificate_id = NEW.certificate_id;
    NEW.due_date := greatest(valued, received) + due_days;
    NEW.final_date := NEW.due_date + final_days;
    NEW.deadline := CASE NEW.kind WHEN 'payment' THEN NEW.due_date + payment_days
                                  ELSE NEW.final_date - pay_less_days END;
    NEW.served_at := now();
    NEW.served_in_time := (NEW.served_at AT TIME ZONE 'UTC')::date <= NEW.deadline;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION public.admit_payment_notice() FROM PUBLIC;
"""

# 0018's definition, with one more notice template.
OUTBOX_FACTS_WITH_PAYMENT_NOTICE = r"""
CREATE OR REPLACE FUNCTION public.outbox_row_is_facts(kind text, template text, gate_id uuid, payload jsonb)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, public, pg_temp AS $$
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
            WHEN 'passkey_enrolled' THEN gate_id IS NULL AND payload - 'credential_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'credential_id') = 'string'
                AND payload->>'credential_id' ~ '^[A-Za-z0-9_-]+$'
                AND length(payload->>'credential_id') BETWEEN 16 AND 1364
            WHEN 'pay_less_notice' THEN gate_id IS NOT NULL AND payload - 'notice_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'notice_id') = 'number'
                AND payload->>'notice_id' ~ '^[1-9][0-9]{0,17}$'
            WHEN 'payment_notice' THEN gate_id IS NOT NULL AND payload - 'notice_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'notice_id') = 'number'
                AND payload->>'notice_id' ~ '^[1-9][0-9]{0,17}$'
            ELSE false END
        ELSE false END
$$;
"""


def upgrade() -> None:
    op.execute(KINDS)
    op.execute(ADMIT_NOTICE)
    op.execute(OUTBOX_FACTS_WITH_PAYMENT_NOTICE)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
