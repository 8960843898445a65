"""Certified means certified, and the notices the law requires (issue 22).

- **What a certification chose.** `payment_certification` gains `claimed_amount` (the contractor's application, the
  notified sum) and `basis` (`claimed` or `reconstructed`: the sum the checks rebuilt from everything certified
  before). The admission trigger stamps both from the approved gate's frozen summary
  (`summary.certificate.claimed_amount` and `.basis`), never from the caller, so the record of what was chosen is the
  record of what the approvers saw. `difference` is generated (claimed minus certified). Rows recorded before this
  migration keep NULL there: they certified the claim.
- **Pay-less notices.** `payment_notice` holds each notice Countersign served on a certificate, as a document: its
  text, the SHA-256 of that text (checked here), the notified sum, the sum to be paid and the basis (each finding with
  its amounts and the clauses cited). The database admits a `pay_less` notice only against the certificate's own
  payment approval gate, once it is decided: rejected (the sum is nothing) or approved for less than the claim (the
  sum is what was certified). It computes the deadline itself from the frozen contract and certificate rows: the due
  date is the later of the valuation date and the day the application was received (the set's `loaded_at`, UTC) plus
  `payment_terms.due_date_days` (default 7); the final date is `final_date_days` (17) after it; the notice is due
  `pay_less_notice_days` (7) before the final date (the Scheme for Construction Contracts' periods, HGCRA 1996
  ss. 110A-111). `served_at` is the database's clock and `served_in_time` says whether it beat the deadline; neither
  can be supplied. Notices are append-only, one per certificate and kind.
- **Posted in the channel.** The outbox may carry the notice template `pay_less_notice` naming the notice by its id;
  the deliverer renders the words from the row.

Revision ID: 0018
Revises: 0017
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"

CERTIFICATION_CHOICE = r"""
ALTER TABLE public.payment_certification ADD COLUMN claimed_amount numeric(18, 2);
ALTER TABLE public.payment_certification ADD COLUMN basis text CHECK (basis IN ('claimed', 'reconstructed'));
ALTER TABLE public.payment_certification
    ADD COLUMN difference numeric(18, 2) GENERATED ALWAYS AS (claimed_amount - amount) STORED;
"""

# 0015's admission, with the choice stamped from the gate summary.
ADMIT_CERTIFICATION = r"""
CREATE OR REPLACE FUNCTION public.admit_payment_certification() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    c record;
BEGIN
    SELECT g.close_id, g.task, g.attempt AS gate_attempt, g.kind, g.summary, g.subject, g.amount AS gate_amount,
           r.entity, r.workflow, t.attempt AS task_attempt,
           (b.manifest->>'construction_set_id') AS manifest_set, b.manifest->>'certificate_id' AS manifest_certificate
      INTO c
      FROM public.gate g
      JOIN public.close_run r ON r.close_id = g.close_id
      JOIN public.book_set b ON b.book_set_id = r.book_set_id
      LEFT JOIN public.close_task t ON t.close_id = g.close_id AND t.task = g.task
     WHERE g.gate_id = NEW.gate_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'certification refused: no gate %', NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.close_id IS DISTINCT FROM NEW.close_id OR c.workflow <> 'certificates' OR c.task <> 'payment'
       OR c.kind <> 'approval' THEN
        RAISE EXCEPTION 'certification refused: gate % is not the payment approval gate of run %',
            NEW.gate_id, NEW.close_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.subject IS DISTINCT FROM NEW.certificate_id OR c.entity IS DISTINCT FROM NEW.certificate_id
       OR c.manifest_certificate IS DISTINCT FROM NEW.certificate_id
       OR c.manifest_set IS DISTINCT FROM NEW.set_id::text THEN
        RAISE EXCEPTION 'certification refused: gate % was opened for certificate % of construction set %, not % of %',
            NEW.gate_id, c.subject, c.manifest_set, NEW.certificate_id, NEW.set_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.gate_attempt IS DISTINCT FROM c.task_attempt
       OR NOT public.gate_applied_with(c.close_id, 'payment', c.gate_attempt, 'approval', 'approved') THEN
        RAISE EXCEPTION 'certification refused: certificate % has no applied, approved payment gate of its current '
                        'attempt (gate %)', NEW.certificate_id, NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (c.summary #>> '{certificate,amount_to_certify}') IS NULL
       OR (c.summary #>> '{certificate,amount_to_certify}')::numeric IS DISTINCT FROM NEW.amount
       OR c.gate_amount IS DISTINCT FROM NEW.amount
       OR (c.summary #>> '{certificate,currency}') IS DISTINCT FROM NEW.currency THEN
        RAISE EXCEPTION 'certification refused: % % is not the amount the approvers saw on gate % (% %)',
            NEW.currency, NEW.amount, NEW.gate_id, c.summary #>> '{certificate,currency}',
            c.summary #>> '{certificate,amount_to_certify}' USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- What was chosen is what the approvers saw: a summary without the choice certified the claim.
    NEW.claimed_amount := COALESCE((c.summary #>> '{certificate,claimed_amount}')::numeric, NEW.amount);
    NEW.basis := COALESCE(c.summary #>> '{certificate,basis}', 'claimed');
    NEW.certified_by_gate_at := (SELECT max(d.decided_at) FROM public.gate_decision d
                                  WHERE d.gate_id = NEW.gate_id AND d.decision = 'approve');
    NEW.recorded_at := now();
    RETURN NEW;
END $$;
"""

NOTICE_TABLE = f"""
CREATE TABLE public.payment_notice (
    notice_id       bigserial PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('pay_less')),
    set_id          bigint NOT NULL,
    certificate_id  text NOT NULL,
    close_id        uuid NOT NULL REFERENCES public.close_run,
    gate_id         uuid NOT NULL REFERENCES public.gate,
    currency        char(3) NOT NULL,
    notified_sum    numeric(18, 2) NOT NULL,
    sum_to_pay      numeric(18, 2) NOT NULL CHECK (sum_to_pay >= 0),
    basis           jsonb NOT NULL CHECK (jsonb_typeof(basis) = 'array'),
    document        text NOT NULL CHECK (length(document) BETWEEN 1 AND 20000),
    sha256          text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{{64}}$'),
    due_date        date NOT NULL,
    final_date      date NOT NULL,
    deadline        date NOT NULL,
    served_at       timestamptz NOT NULL DEFAULT now(),
    served_in_time  boolean NOT NULL,
    UNIQUE (certificate_id, kind),
    FOREIGN KEY (set_id, certificate_id) REFERENCES public.construction_certificate (set_id, certificate_id)
);
CREATE TRIGGER payment_notice_immutable BEFORE UPDATE OR DELETE ON public.payment_notice
    FOR EACH ROW EXECUTE FUNCTION public.refuse_construction_change();
CREATE TRIGGER payment_notice_no_truncate BEFORE TRUNCATE ON public.payment_notice
    FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_construction_change();
ALTER TABLE public.payment_notice ENABLE ALWAYS TRIGGER payment_notice_immutable;
ALTER TABLE public.payment_notice ENABLE ALWAYS TRIGGER payment_notice_no_truncate;
GRANT SELECT, INSERT ON public.payment_notice TO {ENGINE_ROLE};
GRANT USAGE ON SEQUENCE public.payment_notice_notice_id_seq TO {ENGINE_ROLE};
GRANT SELECT ON public.payment_notice TO {CALLBACKS_ROLE};
"""

# Runs as the owner (SECURITY DEFINER) so the caller's grants and names cannot hide the gate, the certification or the
# frozen evidence from it; the dates come from those rows and the clock, never from the caller.
ADMIT_NOTICE = r"""
CREATE FUNCTION public.admit_payment_notice() RETURNS trigger
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
        IF certified IS NULL OR certified IS DISTINCT FROM NEW.sum_to_pay OR certified >= NEW.notified_sum THEN
            RAISE EXCEPTION 'notice refused: gate % certified % %, so a pay-less notice for % is not due',
                NEW.gate_id, NEW.currency, certified, NEW.sum_to_pay USING ERRCODE = 'insufficient_privilege';
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
           COALESCE((k.doc #>> '{payment_terms,pay_less_notice_days}')::int, 7)
      INTO valued, received, due_days, final_days, pay_less_days
      FROM public.construction_certificate c
      JOIN public.construction_set s ON s.set_id = c.set_id
      JOIN public.construction_contract k ON k.set_id = c.set_id AND k.contract_id = c.contract_id
     WHERE c.set_id = NEW.set_id AND c.certificate_id = NEW.certificate_id;
    NEW.due_date := greatest(valued, received) + due_days;
    NEW.final_date := NEW.due_date + final_days;
    NEW.deadline := NEW.final_date - pay_less_days;
    NEW.served_at := now();
    NEW.served_in_time := (NEW.served_at AT TIME ZONE 'UTC')::date <= NEW.deadline;
    RETURN NEW;
END $$;
CREATE TRIGGER payment_notice_admitted BEFORE INSERT ON public.payment_notice
    FOR EACH ROW EXECUTE FUNCTION public.admit_payment_notice();
ALTER TABLE public.payment_notice ENABLE ALWAYS TRIGGER payment_notice_admitted;
REVOKE ALL ON FUNCTION public.admit_payment_notice() FROM PUBLIC;
"""

# 0017's definition, with its fixed path and one more notice template.
OUTBOX_FACTS_WITH_PAY_LESS_NOTICE = r"""
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
            ELSE false END
        ELSE false END
$$;
"""


def upgrade() -> None:
    op.execute(CERTIFICATION_CHOICE)
    op.execute(ADMIT_CERTIFICATION)
    op.execute(NOTICE_TABLE)
    op.execute(ADMIT_NOTICE)
    op.execute(OUTBOX_FACTS_WITH_PAY_LESS_NOTICE)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
