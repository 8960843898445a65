"""The payee's default notice (issue 35): HGCRA 1996 s. 110B, recorded when the payer's payment notice was not given
in time.

- **What the Act says, as read here.** Where the payer fails to give the payment notice s. 110A requires, the payee
  may give the payer a notice at any time after the date on which the payment notice was required (s. 110B(2)),
  specifying the sum the payee considers to be or to have been due at the payment due date and the basis on which
  that sum is calculated (s. 110B(4)). The final date for payment of that sum is then postponed by as many days as the
  notice was given after the date the payment notice was required (s. 110B(3)). The clause corpus under config/ does
  not carry s. 110B, so this is the reading, not a quotation.
- **Admitted only when no payment notice was given in time.** `payee_default_notice` is written only by
  `record_payee_default_notice`, a SECURITY DEFINER function owned by the owner, with its path pinned and every name
  qualified. It refuses a certificate whose payment notice (`payment_notice`, kind `payment`, migration 0025) was
  served in time (`served_in_time`); it admits one where none was served or one was served late. It computes the
  payment notice's deadline from the frozen rows as 0025 does (`payment_notice_days`, default 5, after the due date)
  and refuses a notice given on or before it, or on a day still to come (UTC).
- **The sum and the claim.** The payee states any non-negative sum (normally the application's); the database
  records the application's claim (`totals.amount_due` of the frozen certificate) and the contract's currency beside
  it, and the basis in words.
- **The postponed final date.** `days_late` is the day given less the payment notice's deadline, and
  `postponed_final_date` the final date plus those days; neither can be supplied.
- **Posted in the channel.** The outbox may carry the notice template `payee_default_notice` naming the notice by
  its id, with no gate; the deliverer renders the words from the row.
- **One per certificate, append-only.** The engine role may execute the function (the CLI records the notice for the
  payee, as that role) and read the table; no role inserts, updates, deletes or truncates it.

Revision ID: 0031
Revises: 0030
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
FIXED_PATH = "pg_catalog, public, pg_temp"

TABLE = f"""
CREATE TABLE public.payee_default_notice (
    notice_id             bigserial PRIMARY KEY,
    kind                  text NOT NULL DEFAULT 'payee_default' CHECK (kind = 'payee_default'),
    set_id                bigint NOT NULL,
    certificate_id        text NOT NULL UNIQUE,
    payment_notice_id     bigint REFERENCES public.payment_notice,
    currency              char(3) NOT NULL,
    claimed_sum           numeric(18, 2),
    stated_sum            numeric(18, 2) NOT NULL CHECK (stated_sum >= 0),
    basis                 text NOT NULL CHECK (length(basis) BETWEEN 1 AND 4000),
    given_on              date NOT NULL,
    given_by              text NOT NULL CHECK (length(given_by) BETWEEN 1 AND 200),
    due_date              date NOT NULL,
    final_date            date NOT NULL,
    payment_notice_deadline date NOT NULL,
    days_late             integer NOT NULL CHECK (days_late >= 1),
    postponed_final_date  date NOT NULL,
    recorded_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (given_on = payment_notice_deadline + days_late),
    CHECK (postponed_final_date = final_date + days_late),
    FOREIGN KEY (set_id, certificate_id) REFERENCES public.construction_certificate (set_id, certificate_id)
);
CREATE TRIGGER payee_default_notice_immutable BEFORE UPDATE OR DELETE ON public.payee_default_notice
    FOR EACH ROW EXECUTE FUNCTION public.refuse_construction_change();
CREATE TRIGGER payee_default_notice_no_truncate BEFORE TRUNCATE ON public.payee_default_notice
    FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_construction_change();
ALTER TABLE public.payee_default_notice ENABLE ALWAYS TRIGGER payee_default_notice_immutable;
ALTER TABLE public.payee_default_notice ENABLE ALWAYS TRIGGER payee_default_notice_no_truncate;
REVOKE ALL ON public.payee_default_notice FROM PUBLIC;
GRANT SELECT ON public.payee_default_notice TO {ENGINE_ROLE};
"""

# Runs as the owner so the caller's grants and names cannot hide the payment notice or the frozen rows from it; the
# dates, the claim and the currency come from those rows, never from the caller.
RECORD = f"""
CREATE FUNCTION public.record_payee_default_notice(p_certificate_id text, p_stated_sum numeric, p_basis text,
                                                   p_given_on date, p_given_by text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    c record;
    pn record;
    v_due date;
    v_final date;
    v_deadline date;
    v_late integer;
    new_id bigint;
BEGIN
    IF p_stated_sum IS NULL OR p_stated_sum < 0 THEN
        RAISE EXCEPTION 'default notice refused: the stated sum must be nothing or more, not %', p_stated_sum
            USING ERRCODE = 'check_violation';
    END IF;
    IF p_given_on IS NULL OR p_given_on > (pg_catalog.now() AT TIME ZONE 'UTC')::date THEN
        RAISE EXCEPTION 'default notice refused: it cannot be given on %, a day still to come', p_given_on
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT n.notice_id, n.set_id, n.served_in_time, n.served_at INTO pn
      FROM public.payment_notice n
     WHERE n.certificate_id = p_certificate_id AND n.kind = 'payment';
    SELECT ce.set_id, (ce.doc ->> 'date')::date AS valued, (s.loaded_at AT TIME ZONE 'UTC')::date AS received,
           public.sign_off_claimed_amount(ce.doc) AS claimed, k.doc ->> 'currency' AS currency,
           COALESCE((k.doc #>> '{{payment_terms,due_date_days}}')::int, 7) AS due_days,
           COALESCE((k.doc #>> '{{payment_terms,final_date_days}}')::int, 17) AS final_days,
           COALESCE((k.doc #>> '{{payment_terms,payment_notice_days}}')::int, 5) AS payment_days
      INTO c
      FROM public.construction_certificate ce
      JOIN public.construction_set s ON s.set_id = ce.set_id
      JOIN public.construction_contract k ON k.set_id = ce.set_id AND k.contract_id = ce.contract_id
     WHERE ce.certificate_id = p_certificate_id AND (pn.set_id IS NULL OR ce.set_id = pn.set_id)
     ORDER BY ce.set_id DESC
     LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'default notice refused: no certificate % was loaded', p_certificate_id
            USING ERRCODE = 'no_data_found';
    END IF;
    IF pn.served_in_time THEN
        RAISE EXCEPTION 'default notice refused: the payment notice for certificate % was given in time (%)',
            p_certificate_id, pn.served_at USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM public.payee_default_notice d WHERE d.certificate_id = p_certificate_id) THEN
        RAISE EXCEPTION 'default notice refused: certificate % has one already', p_certificate_id
            USING ERRCODE = 'unique_violation';
    END IF;
    v_due := greatest(c.valued, c.received) + c.due_days;
    v_final := v_due + c.final_days;
    v_deadline := v_due + c.payment_days;
    v_late := p_given_on - v_deadline;
    IF v_late < 1 THEN
        RAISE EXCEPTION 'default notice refused: the payment notice for certificate % may be given until %, so a'
            ' default notice may be given only after it, not on %', p_certificate_id, v_deadline, p_given_on
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO public.payee_default_notice (set_id, certificate_id, payment_notice_id, currency, claimed_sum,
                                             stated_sum, basis, given_on, given_by, due_date, final_date,
                                             payment_notice_deadline, days_late, postponed_final_date)
    VALUES (c.set_id, p_certificate_id, pn.notice_id, c.currency, c.claimed, p_stated_sum, p_basis, p_given_on,
            p_given_by, v_due, v_final, v_deadline, v_late, v_final + v_late)
    RETURNING notice_id INTO new_id;
    RETURN new_id;
END $$;
REVOKE ALL ON FUNCTION public.record_payee_default_notice(text, numeric, text, date, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.record_payee_default_notice(text, numeric, text, date, text) TO {ENGINE_ROLE};
"""

# The delegation migration's definition, with one more notice template: the payee's default notice, named by its id
# (it belongs to no gate).
OUTBOX_FACTS_WITH_DEFAULT_NOTICE = r"""
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
            WHEN 'gate_routed' THEN gate_id IS NOT NULL AND payload - 'routing_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'routing_id') = 'number'
                AND payload->>'routing_id' ~ '^[1-9][0-9]{0,17}$'
            WHEN 'payee_default_notice' THEN gate_id IS NULL AND payload - 'notice_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'notice_id') = 'number'
                AND payload->>'notice_id' ~ '^[1-9][0-9]{0,17}$'
            ELSE false END
        ELSE false END
$$;
"""


def upgrade() -> None:
    op.execute(TABLE)
    op.execute(RECORD)
    op.execute(OUTBOX_FACTS_WITH_DEFAULT_NOTICE)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
