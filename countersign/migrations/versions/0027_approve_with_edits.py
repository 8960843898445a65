# ruff: noqa: E501  (SQL statements; a long line is one statement line)
"""Approve with edits (issue 35): a quantity surveyor certifies another sum than proposed, signed by that person.

- **An amended approval is one decision row.** `gate_decision` gains `certified_minor` and `proposed_minor` (the
  currency's minor units, ISO 4217: `currency_minor_units`), `amend_currency`, `adjustments` (each line's reference,
  proposed and certified minor units and reason) and `amendment_digest`; all five or none. The row's `reason` is the
  approver's basis. The row is as immutable as every decision (`gate_decision_immutable`), so the sums, the
  adjustments and the gate they belong to never change once admitted.
- **Admitted only through the payment gate, by a quantity surveyor, with the person's own key.**
  `admit_decision_amendment` (a second BEFORE INSERT trigger, after `admit_gate_decision`, ENABLE ALWAYS) refuses an
  amendment unless: the decision is an approval; the gate is a certificates run's payment approval gate; the principal
  holds `certificate_amending_role()` (besides the gate's approver role, which `admit_gate_decision` checks with
  separation of duties); the channel carries a person's key (the signed callback's Ed25519 or the board's passkey,
  never a chat door's platform identity); the currency and the proposed sum are the gate's frozen
  `summary.certificate` ones; 0 <= certified <= the claim (`claimed_amount`, else the proposed sum); certified is
  not the proposed sum; the reason is not blank; every adjustment is well formed, the lines distinct and their
  differences sum to certified minus proposed; `amendment_digest` is the digest of those fields
  (`amendment_digest(...)`, the same canonical text as `countersign.policy.amendments`) and the proof records that
  same digest (`proof.amendment_digest`: what the person's signature covers; the engine re-verifies the signature
  over it before the decision counts). A plain decision's proof names no amendment digest.
- **Every approval of a gate certifies one sum.** An approval whose certified sum (NULL: as proposed) differs from an
  earlier approval's on the same gate is refused, so a quorum agrees on the sum it certifies.
- **The certification follows the amended sum.** `admit_payment_certification` admits the amended sum (and only it)
  where the gate's approvals amended it, stamping `basis = 'amended'`; the payment and pay-less notices, which the
  database already ties to `payment_certification.amount` (migrations 0018, 0025), follow.

Revision ID: 0027
Revises: 0026
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

COLUMNS = r"""
ALTER TABLE public.gate_decision ADD COLUMN certified_minor bigint;
ALTER TABLE public.gate_decision ADD COLUMN proposed_minor bigint;
ALTER TABLE public.gate_decision ADD COLUMN amend_currency char(3);
ALTER TABLE public.gate_decision ADD COLUMN adjustments jsonb;
ALTER TABLE public.gate_decision ADD COLUMN amendment_digest text;
ALTER TABLE public.gate_decision ADD CONSTRAINT gate_decision_amendment_whole CHECK (
    (certified_minor IS NULL AND proposed_minor IS NULL AND amend_currency IS NULL AND adjustments IS NULL
     AND amendment_digest IS NULL)
    OR (certified_minor IS NOT NULL AND proposed_minor IS NOT NULL AND amend_currency IS NOT NULL
        AND adjustments IS NOT NULL AND amendment_digest IS NOT NULL));
ALTER TABLE public.payment_certification DROP CONSTRAINT payment_certification_basis_check;
ALTER TABLE public.payment_certification ADD CONSTRAINT payment_certification_basis_check
    CHECK (basis IN ('claimed', 'reconstructed', 'amended'));
"""

# The same table as countersign/money/units.py (a test compares them); the role as countersign/policy/amendments.py.
FUNCTIONS = r"""
CREATE FUNCTION public.currency_minor_units(currency text) RETURNS int
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT CASE upper(currency)
        WHEN 'BIF' THEN 0 WHEN 'CLP' THEN 0 WHEN 'DJF' THEN 0 WHEN 'GNF' THEN 0 WHEN 'ISK' THEN 0 WHEN 'JPY' THEN 0
        WHEN 'KMF' THEN 0 WHEN 'KRW' THEN 0 WHEN 'PYG' THEN 0 WHEN 'RWF' THEN 0 WHEN 'UGX' THEN 0 WHEN 'UYI' THEN 0
        WHEN 'VND' THEN 0 WHEN 'VUV' THEN 0 WHEN 'XAF' THEN 0 WHEN 'XOF' THEN 0 WHEN 'XPF' THEN 0
        WHEN 'BHD' THEN 3 WHEN 'IQD' THEN 3 WHEN 'JOD' THEN 3 WHEN 'KWD' THEN 3 WHEN 'LYD' THEN 3 WHEN 'OMR' THEN 3
        WHEN 'TND' THEN 3 WHEN 'CLF' THEN 4 WHEN 'UYW' THEN 4 ELSE 2 END
$$;

CREATE FUNCTION public.certificate_amending_role() RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, public, pg_temp AS $$ SELECT 'quantity_surveyor'::text $$;

-- Each part written as <characters>:<text>; so no text can pass for another split: the purpose, the currency, the
-- proposed and certified sums, the number of lines, then each line's reference, proposed, certified and reason.
CREATE FUNCTION public.amendment_digest(currency text, proposed_minor bigint, certified_minor bigint, adjustments jsonb)
    RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT encode(sha256(convert_to(string_agg(length(p.part)::text || ':' || p.part || ';', '' ORDER BY p.n),
                                    'UTF8')), 'hex')
      FROM (
        SELECT h.n, h.part FROM unnest(ARRAY['countersign.amendment.v1', upper(currency), proposed_minor::text,
                                             certified_minor::text, jsonb_array_length(adjustments)::text])
                                WITH ORDINALITY AS h(part, n)
        UNION ALL
        SELECT 5 + (e.i - 1) * 4 + f.k, f.part
          FROM jsonb_array_elements(adjustments) WITH ORDINALITY AS e(item, i)
         CROSS JOIN LATERAL unnest(ARRAY[e.item->>'line', (e.item->>'proposed_minor')::numeric::bigint::text,
                                         (e.item->>'certified_minor')::numeric::bigint::text, e.item->>'reason'])
                            WITH ORDINALITY AS f(part, k)
      ) p
$$;

-- The sum the gate's approvals certify where they amended it (they all agree: admit_decision_amendment), in the
-- currency's major units; NULL where they certify the proposed sum.
CREATE FUNCTION public.gate_amended_sum(p_gate_id uuid) RETURNS numeric
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT d.certified_minor::numeric / (10::numeric ^ public.currency_minor_units(d.amend_currency))
      FROM public.gate_decision d
     WHERE d.gate_id = p_gate_id AND d.decision = 'approve' AND d.certified_minor IS NOT NULL
     ORDER BY d.decision_id LIMIT 1
$$;
REVOKE ALL ON FUNCTION public.gate_amended_sum(uuid) FROM PUBLIC;
"""

ADMIT_AMENDMENT = r"""
CREATE FUNCTION public.admit_decision_amendment() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    g record;
    v_roles text[];
    v_scale numeric;
    v_proposed numeric;
    v_claimed numeric;
    v_item jsonb;
    v_total numeric := 0;
    v_lines text[] := ARRAY[]::text[];
    v_digest text;
BEGIN
    IF NEW.certified_minor IS NULL THEN
        IF NEW.proof ? 'amendment_digest' THEN
            RAISE EXCEPTION 'decision refused: the proof names an amendment the decision does not carry'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NEW.decision = 'approve' AND EXISTS (
            SELECT 1 FROM public.gate_decision d
             WHERE d.gate_id = NEW.gate_id AND d.decision = 'approve' AND d.certified_minor IS NOT NULL) THEN
            RAISE EXCEPTION 'decision refused: an approval of gate % already certifies an amended sum; approve that '
                            'sum or reject', NEW.gate_id USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.decision <> 'approve' THEN
        RAISE EXCEPTION 'decision refused: only an approval certifies an amended sum' USING ERRCODE = 'check_violation';
    END IF;
    SELECT gt.kind, gt.task, gt.summary, r.workflow INTO g
      FROM public.gate gt JOIN public.close_run r ON r.close_id = gt.close_id
     WHERE gt.gate_id = NEW.gate_id;
    IF NOT FOUND OR g.workflow <> 'certificates' OR g.task <> 'payment' OR g.kind <> 'approval'
       OR (g.summary #>> '{certificate,amount_to_certify}') IS NULL THEN
        RAISE EXCEPTION 'decision refused: an amended sum is certified only at a certificate''s payment gate, and gate '
                        '% is not one', NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT p.roles INTO v_roles FROM public.principal p WHERE p.principal_id = NEW.principal_id;
    IF NOT (public.certificate_amending_role() = ANY (coalesce(v_roles, ARRAY[]::text[]))) THEN
        RAISE EXCEPTION 'decision refused: principal % lacks role % needed to certify another sum than proposed',
            NEW.principal_id, public.certificate_amending_role() USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.channel NOT IN ('signed_callback', 'board') THEN
        RAISE EXCEPTION 'decision refused: an amended sum needs the person''s own key (Ed25519 or a passkey); a % '
                        'decision carries none', NEW.channel USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.amend_currency IS DISTINCT FROM (g.summary #>> '{certificate,currency}') THEN
        RAISE EXCEPTION 'decision refused: the amendment is in %, the certificate in %', NEW.amend_currency,
            g.summary #>> '{certificate,currency}' USING ERRCODE = 'check_violation';
    END IF;
    v_scale := 10::numeric ^ public.currency_minor_units(NEW.amend_currency);
    v_proposed := (g.summary #>> '{certificate,amount_to_certify}')::numeric * v_scale;
    v_claimed := coalesce((g.summary #>> '{certificate,claimed_amount}')::numeric * v_scale, v_proposed);
    IF NEW.proposed_minor::numeric IS DISTINCT FROM v_proposed THEN
        RAISE EXCEPTION 'decision refused: the proposed sum % is not the one gate % proposes (%)',
            NEW.proposed_minor, NEW.gate_id, v_proposed USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.certified_minor < 0 OR NEW.certified_minor::numeric > v_claimed THEN
        RAISE EXCEPTION 'decision refused: the certified sum % is not between zero and the claim (%) in minor units '
                        'of %', NEW.certified_minor, v_claimed, NEW.amend_currency USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.certified_minor = NEW.proposed_minor THEN
        RAISE EXCEPTION 'decision refused: the certified sum is the proposed sum; approve it without an amendment'
            USING ERRCODE = 'check_violation';
    END IF;
    IF btrim(coalesce(NEW.reason, '')) = '' THEN
        RAISE EXCEPTION 'decision refused: an amended sum needs the approver''s reason' USING ERRCODE = 'check_violation';
    END IF;
    IF jsonb_typeof(NEW.adjustments) IS DISTINCT FROM 'array' OR jsonb_array_length(NEW.adjustments) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'decision refused: an amended sum needs between 1 and 200 line adjustments'
            USING ERRCODE = 'check_violation';
    END IF;
    FOR v_item IN SELECT e FROM jsonb_array_elements(NEW.adjustments) e LOOP
        IF jsonb_typeof(v_item) IS DISTINCT FROM 'object'
           OR (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(v_item) k)
              IS DISTINCT FROM ARRAY['certified_minor', 'line', 'proposed_minor', 'reason']
           OR jsonb_typeof(v_item->'line') <> 'string' OR btrim(v_item->>'line') = ''
           OR length(v_item->>'line') > 200
           OR jsonb_typeof(v_item->'reason') <> 'string' OR btrim(v_item->>'reason') = ''
           OR length(v_item->>'reason') > 2000
           OR jsonb_typeof(v_item->'proposed_minor') <> 'number'
           OR jsonb_typeof(v_item->'certified_minor') <> 'number'
           OR (v_item->>'proposed_minor')::numeric <> trunc((v_item->>'proposed_minor')::numeric)
           OR (v_item->>'certified_minor')::numeric <> trunc((v_item->>'certified_minor')::numeric)
           OR abs((v_item->>'proposed_minor')::numeric) > 1e17
           OR abs((v_item->>'certified_minor')::numeric) > 1e17 THEN
            RAISE EXCEPTION 'decision refused: line adjustment % is not {line, proposed_minor, certified_minor, '
                            'reason} with a line, whole minor units and a reason', v_item
                USING ERRCODE = 'check_violation';
        END IF;
        IF (v_item->>'line') = ANY (v_lines) THEN
            RAISE EXCEPTION 'decision refused: line % is adjusted twice', v_item->>'line'
                USING ERRCODE = 'check_violation';
        END IF;
        v_lines := v_lines || (v_item->>'line');
        v_total := v_total + (v_item->>'certified_minor')::numeric - (v_item->>'proposed_minor')::numeric;
    END LOOP;
    IF v_total <> NEW.certified_minor - NEW.proposed_minor THEN
        RAISE EXCEPTION 'decision refused: the line adjustments add up to %, not the certified minus the proposed '
                        'sum (%)', v_total, NEW.certified_minor - NEW.proposed_minor USING ERRCODE = 'check_violation';
    END IF;
    v_digest := public.amendment_digest(NEW.amend_currency, NEW.proposed_minor, NEW.certified_minor, NEW.adjustments);
    IF NEW.amendment_digest IS DISTINCT FROM v_digest OR NEW.proof->>'amendment_digest' IS DISTINCT FROM v_digest THEN
        RAISE EXCEPTION 'decision refused: the amendment digest (and the one its proof signs) is not the digest of '
                        'its sums and lines' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM public.gate_decision d
                WHERE d.gate_id = NEW.gate_id AND d.decision = 'approve'
                  AND d.certified_minor IS DISTINCT FROM NEW.certified_minor) THEN
        RAISE EXCEPTION 'decision refused: another approval of gate % certifies another sum', NEW.gate_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER gate_decision_amended BEFORE INSERT ON public.gate_decision
    FOR EACH ROW EXECUTE FUNCTION public.admit_decision_amendment();
ALTER TABLE public.gate_decision ENABLE ALWAYS TRIGGER gate_decision_amended;
REVOKE ALL ON FUNCTION public.admit_decision_amendment() FROM PUBLIC;
"""

# 0018's admission, with the amended sum where the gate's approvals amended it.
ADMIT_CERTIFICATION = r"""
CREATE OR REPLACE FUNCTION public.admit_payment_certification() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    c record;
    v_amended numeric;
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
    IF (c.summary #>> '{certificate,currency}') IS DISTINCT FROM NEW.currency THEN
        RAISE EXCEPTION 'certification refused: % is not the currency of gate % (%)', NEW.currency, NEW.gate_id,
            c.summary #>> '{certificate,currency}' USING ERRCODE = 'insufficient_privilege';
    END IF;
    v_amended := public.gate_amended_sum(NEW.gate_id);
    IF v_amended IS NOT NULL THEN
        IF NEW.amount IS DISTINCT FROM v_amended THEN
            RAISE EXCEPTION 'certification refused: % % is not the sum the approver certified on gate % (% %)',
                NEW.currency, NEW.amount, NEW.gate_id, NEW.currency, v_amended USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF (c.summary #>> '{certificate,amount_to_certify}') IS NULL
       OR (c.summary #>> '{certificate,amount_to_certify}')::numeric IS DISTINCT FROM NEW.amount
       OR c.gate_amount IS DISTINCT FROM NEW.amount THEN
        RAISE EXCEPTION 'certification refused: % % is not the amount the approvers saw on gate % (% %)',
            NEW.currency, NEW.amount, NEW.gate_id, c.summary #>> '{certificate,currency}',
            c.summary #>> '{certificate,amount_to_certify}' USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- What was chosen is what the approvers saw or, amended, what the approver certified.
    NEW.claimed_amount := COALESCE((c.summary #>> '{certificate,claimed_amount}')::numeric,
                                   (c.summary #>> '{certificate,amount_to_certify}')::numeric);
    NEW.basis := CASE WHEN v_amended IS NOT NULL THEN 'amended'
                      ELSE COALESCE(c.summary #>> '{certificate,basis}', 'claimed') END;
    NEW.certified_by_gate_at := (SELECT max(d.decided_at) FROM public.gate_decision d
                                  WHERE d.gate_id = NEW.gate_id AND d.decision = 'approve');
    NEW.recorded_at := now();
    RETURN NEW;
END $$;
"""


def upgrade() -> None:
    op.execute(COLUMNS)
    op.execute(FUNCTIONS)
    op.execute(ADMIT_AMENDMENT)
    op.execute(ADMIT_CERTIFICATION)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
