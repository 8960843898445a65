# ruff: noqa: E501  (SQL statements; a long line is one statement line)
"""Certified payments feed the month's close (issue 36, ADR 0050).

- **Where a contract's certified sums are accrued.** `policy_certified_accrual` names, per contract id (`*` for any
  other), the entity whose books carry the contract, the cost account a certified sum is debited to and the accrual
  account credited. Seeded by the owner from risk.yaml `accruals.certified` at `db upgrade` (countersign/bootstrap/
  migrate.py `policy_seed`), like the other policy tables; the service roles may only read it.
- **A certification records its accrual, in the same statement.** `payment_certification` (0014, 0018) gains an AFTER
  INSERT trigger that writes one `certified_accrual` row keyed by the certificate id: the certified sum the
  certification recorded (`payment_certification.amount`, never recomputed) with its currency, the contract, its title,
  the certificate's number, the payee (the contract's contractor), the entity and the certificate's period (the close
  whose accruals carry it), the two accounts, the payment gate and the people who approved it. Every column is
  stamped by `admit_certified_accrual` from those rows whoever inserts, so not even the owner writes a proposal for
  another entity, period or sum. No mapping for the contract: the certification itself is refused, so a certified sum
  never goes unaccrued. The service roles may read the table and write nothing; it is append-only (UPDATE, DELETE and
  TRUNCATE refused, triggers enabled ALWAYS), so a proposal is never re-parented to another close or re-summed.
- **Nobody approves both.** `gate_decision_duties_segregated` (BEFORE INSERT on `gate_decision`, after 0017's
  admission): an approval of a close's accruals approval gate is refused to a person who approved a payment approval
  gate of a certificate that accrues into that close's entity and period (or who is named on a proposal there), and
  an approval of a certificate's payment approval gate is refused to a person who approved an accruals approval gate
  of a close of the entity and period it will accrue into. Both directions take a transaction lock on the entity and
  period first, so two approvals racing on the two gates are judged one after the other. The refusal carries DETAIL
  `duties_segregated`: the decision writer's `RefusalCode.DUTIES_SEGREGATED`. Rejections are not barred.

Every function names every table `public.` and runs with `search_path = pg_catalog, public, pg_temp`: a temporary
table named like one of these changes nothing.

Revision ID: 0028
Revises: 0027
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"
SERVICE_ROLES = f"{ENGINE_ROLE}, {CALLBACKS_ROLE}"

ENTITY_CODE = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"  # countersign/engine/runs.py ENTITY_PATTERN

TABLES = rf"""
CREATE TABLE public.policy_certified_accrual (
    contract_id     text PRIMARY KEY CHECK (length(contract_id) BETWEEN 1 AND 64),
    entity          text NOT NULL CHECK (entity ~ '{ENTITY_CODE}'),
    cost_account    text NOT NULL CHECK (length(cost_account) BETWEEN 1 AND 64),
    accrual_account text NOT NULL CHECK (length(accrual_account) BETWEEN 1 AND 64),
    CHECK (cost_account <> accrual_account)
);
GRANT SELECT ON public.policy_certified_accrual TO {SERVICE_ROLES};

CREATE TABLE public.certified_accrual (
    certificate_id  text PRIMARY KEY REFERENCES public.payment_certification (certificate_id),
    set_id          bigint NOT NULL,
    contract_id     text NOT NULL,
    contract_title  text NOT NULL,
    certificate_no  integer NOT NULL CHECK (certificate_no >= 1),
    payee           text NOT NULL,
    payee_id        text,
    entity          text NOT NULL CHECK (entity ~ '{ENTITY_CODE}'),
    period          text NOT NULL CHECK (period ~ '^[0-9]{{4}}-(0[1-9]|1[0-2])$'),
    amount          numeric(18, 2) NOT NULL,
    currency        char(3) NOT NULL CHECK (currency ~ '^[A-Z]{{3}}$'),
    cost_account    text NOT NULL,
    accrual_account text NOT NULL,
    gate_id         uuid NOT NULL,
    certified_by    text[] NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (set_id, certificate_id) REFERENCES public.construction_certificate (set_id, certificate_id)
);
CREATE INDEX certified_accrual_close ON public.certified_accrual (entity, period);
GRANT SELECT ON public.certified_accrual TO {SERVICE_ROLES};
CREATE TRIGGER certified_accrual_immutable BEFORE UPDATE OR DELETE ON public.certified_accrual
    FOR EACH ROW EXECUTE FUNCTION public.refuse_construction_change();
CREATE TRIGGER certified_accrual_no_truncate BEFORE TRUNCATE ON public.certified_accrual
    FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_construction_change();
ALTER TABLE public.certified_accrual ENABLE ALWAYS TRIGGER certified_accrual_immutable;
ALTER TABLE public.certified_accrual ENABLE ALWAYS TRIGGER certified_accrual_no_truncate;
"""

# The entity and period a certificate of a construction set accrues into: its contract's mapping (or `*`'s), and the
# certificate's own period. No row: no entity carries the contract.
ACCRUAL_TARGET = r"""
CREATE FUNCTION public.certified_accrual_target(p_set_id bigint, p_certificate_id text)
    RETURNS TABLE (contract_id text, entity text, period text, cost_account text, accrual_account text)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT c.contract_id, a.entity, c.period, a.cost_account, a.accrual_account
      FROM public.construction_certificate c
      JOIN public.policy_certified_accrual a ON a.contract_id IN (c.contract_id, '*')
     WHERE c.set_id = p_set_id AND c.certificate_id = p_certificate_id
     ORDER BY a.contract_id = '*'
     LIMIT 1
$$;
REVOKE ALL ON FUNCTION public.certified_accrual_target(bigint, text) FROM PUBLIC;
"""

# Every column from the certification and the frozen evidence, whoever inserts: the caller names the certificate only.
ADMIT_ACCRUAL = r"""
CREATE FUNCTION public.admit_certified_accrual() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    p record;
    t record;
BEGIN
    SELECT pc.set_id, pc.gate_id, pc.amount, pc.currency, c.number, c.contract_id,
           coalesce(nullif(btrim(k.doc->>'title'), ''), c.contract_id) AS title,
           coalesce(nullif(btrim(k.doc #>> '{contractor,name}'), ''), c.contract_id) AS payee,
           k.doc #>> '{contractor,vendor_id}' AS payee_id
      INTO p
      FROM public.payment_certification pc
      JOIN public.construction_certificate c ON c.set_id = pc.set_id AND c.certificate_id = pc.certificate_id
      JOIN public.construction_contract k ON k.set_id = c.set_id AND k.contract_id = c.contract_id
     WHERE pc.certificate_id = NEW.certificate_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'accrual refused: certificate % is not certified', NEW.certificate_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT * INTO t FROM public.certified_accrual_target(p.set_id, NEW.certificate_id);
    IF NOT FOUND THEN
        RAISE EXCEPTION 'certification refused: no entity carries contract % of certificate %, so its certified sum '
                        'could not be accrued (risk.yaml accruals.certified.contracts, then db upgrade)',
            p.contract_id, NEW.certificate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    NEW.set_id := p.set_id;
    NEW.contract_id := p.contract_id;
    NEW.contract_title := p.title;
    NEW.certificate_no := p.number;
    NEW.payee := p.payee;
    NEW.payee_id := p.payee_id;
    NEW.entity := t.entity;
    NEW.period := t.period;
    NEW.amount := p.amount;
    NEW.currency := p.currency;
    NEW.cost_account := t.cost_account;
    NEW.accrual_account := t.accrual_account;
    NEW.gate_id := p.gate_id;
    NEW.certified_by := ARRAY(SELECT d.principal_id FROM public.gate_decision d
                               WHERE d.gate_id = p.gate_id AND d.decision = 'approve' ORDER BY d.principal_id);
    NEW.recorded_at := now();
    RETURN NEW;
END $$;
CREATE TRIGGER certified_accrual_admitted BEFORE INSERT ON public.certified_accrual
    FOR EACH ROW EXECUTE FUNCTION public.admit_certified_accrual();
ALTER TABLE public.certified_accrual ENABLE ALWAYS TRIGGER certified_accrual_admitted;
REVOKE ALL ON FUNCTION public.admit_certified_accrual() FROM PUBLIC;

CREATE FUNCTION public.accrue_certification() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    INSERT INTO public.certified_accrual (certificate_id) VALUES (NEW.certificate_id);
    RETURN NULL;
END $$;
CREATE TRIGGER payment_certification_accrued AFTER INSERT ON public.payment_certification
    FOR EACH ROW EXECUTE FUNCTION public.accrue_certification();
ALTER TABLE public.payment_certification ENABLE ALWAYS TRIGGER payment_certification_accrued;
REVOKE ALL ON FUNCTION public.accrue_certification() FROM PUBLIC;
"""

# An approval on either side of the pair is judged against the other side's approvals, under one lock per entity and
# period. The close's workflow and task names are the shipped ones (config/workflows/close.yaml, certificates.yaml).
DUTIES_SEGREGATED = r"""
CREATE FUNCTION public.refuse_both_sides_of_a_certified_accrual() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    g record;
    t record;
    other record;
BEGIN
    IF NEW.decision IS DISTINCT FROM 'approve' THEN
        RETURN NEW;
    END IF;
    SELECT gt.task, gt.kind, r.workflow, r.entity, r.period, r.close_id,
           (b.manifest->>'construction_set_id') AS manifest_set, b.manifest->>'certificate_id' AS certificate_id
      INTO g
      FROM public.gate gt
      JOIN public.close_run r ON r.close_id = gt.close_id
      JOIN public.book_set b ON b.book_set_id = r.book_set_id
     WHERE gt.gate_id = NEW.gate_id;
    IF NOT FOUND OR g.kind IS DISTINCT FROM 'approval' THEN
        RETURN NEW;
    END IF;
    IF g.workflow = 'close' AND g.task = 'accruals' THEN
        PERFORM pg_advisory_xact_lock(hashtext('certified_accrual:' || g.entity || ':' || g.period));
        SELECT x.certificate_id, x.contract_title, x.certificate_no INTO other
          FROM (SELECT a.certificate_id, a.contract_title, a.certificate_no
                  FROM public.certified_accrual a
                 WHERE a.entity = g.entity AND a.period = g.period AND NEW.principal_id = ANY (a.certified_by)
                UNION ALL
                SELECT c.certificate_id, coalesce(nullif(btrim(k.doc->>'title'), ''), c.contract_id), c.number
                  FROM public.gate pay
                  JOIN public.gate_decision d ON d.gate_id = pay.gate_id
                  JOIN public.close_run cr ON cr.close_id = pay.close_id
                  JOIN public.book_set cb ON cb.book_set_id = cr.book_set_id
                  JOIN public.construction_certificate c
                    ON c.set_id = (cb.manifest->>'construction_set_id')::bigint
                   AND c.certificate_id = cb.manifest->>'certificate_id'
                  JOIN public.construction_contract k ON k.set_id = c.set_id AND k.contract_id = c.contract_id
                  CROSS JOIN LATERAL public.certified_accrual_target(c.set_id, c.certificate_id) tg
                 WHERE cr.workflow = 'certificates' AND pay.task = 'payment' AND pay.kind = 'approval'
                   AND d.principal_id = NEW.principal_id AND d.decision = 'approve'
                   AND c.period = g.period AND tg.entity = g.entity) x
         ORDER BY x.certificate_id
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'decision refused: principal % approved the payment of certificate % (%, certificate %), '
                            'whose certified sum the accruals of % % carry; someone else must approve these accruals',
                NEW.principal_id, other.certificate_id, other.contract_title, other.certificate_no, g.entity,
                g.period USING ERRCODE = 'insufficient_privilege', DETAIL = 'duties_segregated';
        END IF;
    ELSIF g.workflow = 'certificates' AND g.task = 'payment' AND g.manifest_set ~ '^[0-9]{1,18}$' THEN
        SELECT * INTO t FROM public.certified_accrual_target(g.manifest_set::bigint, g.certificate_id);
        IF NOT FOUND THEN
            RETURN NEW;  -- its certification is refused (no entity carries the contract)
        END IF;
        PERFORM pg_advisory_xact_lock(hashtext('certified_accrual:' || t.entity || ':' || t.period));
        SELECT r.close_id INTO other
          FROM public.gate ag
          JOIN public.gate_decision d ON d.gate_id = ag.gate_id
          JOIN public.close_run r ON r.close_id = ag.close_id
         WHERE r.workflow = 'close' AND r.entity = t.entity AND r.period = t.period
           AND ag.task = 'accruals' AND ag.kind = 'approval'
           AND d.principal_id = NEW.principal_id AND d.decision = 'approve'
         ORDER BY d.decided_at
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'decision refused: principal % approved the accruals of % % (close %), which certificate %''s '
                            'certified sum would be accrued into; someone else must certify it',
                NEW.principal_id, t.entity, t.period, other.close_id, g.certificate_id
                USING ERRCODE = 'insufficient_privilege', DETAIL = 'duties_segregated';
        END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER gate_decision_duties_segregated BEFORE INSERT ON public.gate_decision
    FOR EACH ROW EXECUTE FUNCTION public.refuse_both_sides_of_a_certified_accrual();
ALTER TABLE public.gate_decision ENABLE ALWAYS TRIGGER gate_decision_duties_segregated;
REVOKE ALL ON FUNCTION public.refuse_both_sides_of_a_certified_accrual() FROM PUBLIC;
"""


def upgrade() -> None:
    op.execute(TABLES)
    op.execute(ACCRUAL_TARGET)
    op.execute(ADMIT_ACCRUAL)
    op.execute(DUTIES_SEGREGATED)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
