# ruff: noqa: E501  (SQL statements; a long line is one statement line)
"""Policy for real entities (issue 23): materiality per entity, amounts compared after conversion, always-human accounts.

- **Entities.** `policy_entity` holds each entity risk.yaml names with its functional currency;
  `policy_entity_threshold` the entity's own materiality, in that currency, replacing the global
  `policy_amount_threshold` for it. `policy_enforced.currency` is the policy's currency, the one the global thresholds
  are written in. Seeded by the owner from risk.yaml at `db upgrade` (countersign/bootstrap/migrate.py `policy_seed`), like the
  other policy tables; the service roles may only read them.
- **Amounts compared after conversion.** `admit_gate` (0015's, everything kept) judges a gate's amount against the
  entity's own thresholds when it has any; otherwise against the global ones, converting the amount from the entity's
  currency to the policy's at the rate of the close's own book set (`book_rate`, 0019: a row of the books the close
  runs on, immutable) and rounding to the cent half to even, as countersign/policy/fx.py `convert` does. A gate with an amount for
  an entity in another currency whose books hold no such rate is refused, whoever connects.
- **Always-human accounts.** `policy_always_human_account` lists the accounts that always need a person: for one
  entity, or for every entity (`*`); `policy_enforced.always_human_tier` is the least tier such work is approved at.
  A journal line on one of them is refused unless the journal's source task, in a close of the journal's own entity,
  has an applied, approved approval gate of its current attempt at that tier or above (the engine applies the gate,
  then posts, in one transaction: countersign/engine/gate_outcomes.py). Always-human events (a supplier's bank details changed)
  and gates over always-human accounts that post nothing are judged by countersign/policy/gates.py `derive_gate` alone.

Every function names every table `public.` and runs with `search_path = pg_catalog, public, pg_temp`: a temporary
table named like a policy table or `book_rate` changes nothing.

Revision ID: 0020
Revises: 0019
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"
SERVICE_ROLES = f"{ENGINE_ROLE}, {CALLBACKS_ROLE}"

ENTITY_CODE = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"  # countersign/engine/runs.py ENTITY_PATTERN

TABLES = r"""
CREATE TABLE public.policy_entity (
    entity   text PRIMARY KEY CHECK (entity ~ '{entity_code}'),
    currency char(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$')
);
CREATE TABLE public.policy_entity_threshold (
    entity     text NOT NULL REFERENCES public.policy_entity,
    min_amount numeric(18, 2) NOT NULL CHECK (min_amount >= 0),
    tier       text NOT NULL REFERENCES public.policy_tier,
    PRIMARY KEY (entity, min_amount)
);
CREATE TABLE public.policy_always_human_account (
    entity  text NOT NULL CHECK (entity = '*' OR entity ~ '{entity_code}'),
    account text NOT NULL CHECK (length(account) BETWEEN 1 AND 64),
    PRIMARY KEY (entity, account)
);
ALTER TABLE public.policy_enforced ADD COLUMN currency char(3) CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE public.policy_enforced ADD COLUMN always_human_tier text REFERENCES public.policy_tier;
GRANT SELECT ON public.policy_entity, public.policy_entity_threshold, public.policy_always_human_account
    TO {service_roles};
"""

# An amount times a rate, to the cent, half to even (countersign/policy/fx.py `convert`): PostgreSQL's round() goes half away
# from zero, so an exact tie whose cent below is even stays there.
CONVERT = r"""
CREATE FUNCTION public.convert_to_cent(p_amount numeric, p_rate numeric) RETURNS numeric
    LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT CASE WHEN abs(p.x * 100 - trunc(p.x * 100)) = 0.5 AND mod(trunc(p.x * 100), 2) = 0
                THEN trunc(p.x * 100) / 100
                ELSE round(p.x, 2) END
      FROM (SELECT p_amount * p_rate AS x) p
$$;
REVOKE ALL ON FUNCTION public.convert_to_cent(numeric, numeric) FROM PUBLIC;
"""

# 0015's admit_gate, everything kept; the amount floor now per entity and after conversion.
GATE_POLICY = r"""
CREATE OR REPLACE FUNCTION public.admit_gate() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_run      record;
    v_enforced record;
    v_tier     record;
    v_floor    integer;
    v_owner    text;
    v_findings integer;
    v_currency text;
    v_rate     numeric;
    v_compared numeric;
BEGIN
    SELECT r.entity, r.workflow, r.book_set_id INTO v_run FROM public.close_run r WHERE r.close_id = NEW.close_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'gate refused: no run %', NEW.close_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    NEW.subject := v_run.entity;
    SELECT e.digest, e.escalation_tier, e.findings_tier, e.currency INTO v_enforced FROM public.policy_enforced e;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'gate refused: the database holds no policy; run `countersign db upgrade` as the owner'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    NEW.enforced_policy := v_enforced.digest;
    SELECT t.rank, t.gated, t.quorum, t.approver_role INTO v_tier FROM public.policy_tier t WHERE t.name = NEW.tier;
    IF NOT FOUND OR NOT v_tier.gated THEN
        RAISE EXCEPTION 'gate refused: tier % is not a gated tier of the enforced policy', NEW.tier
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT pt.rank INTO v_floor
      FROM public.policy_task p JOIN public.policy_tier pt ON pt.name = p.tier
     WHERE p.workflow = v_run.workflow AND p.task = NEW.task;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'gate refused: the enforced policy has no task %/% (run `countersign db upgrade`)',
            v_run.workflow, NEW.task USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.amount IS NOT NULL THEN
        -- The amount is in the entity's functional currency: a close's books in another are refused a gate.
        SELECT pe.currency INTO v_currency FROM public.policy_entity pe WHERE pe.entity = v_run.entity;
        v_currency := coalesce(v_currency, v_enforced.currency);
        IF v_run.workflow = 'close' AND NOT EXISTS (
            SELECT 1 FROM public.book_set b WHERE b.book_set_id = v_run.book_set_id AND b.currency = v_currency)
        THEN
            RAISE EXCEPTION 'gate refused: the books of close % are not in %, the functional currency the '
                            'enforced policy gives %', NEW.close_id, v_currency, v_run.entity
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF EXISTS (SELECT 1 FROM public.policy_entity_threshold et WHERE et.entity = v_run.entity) THEN
            -- The entity's own materiality, in its own currency.
            v_floor := greatest(v_floor, (
                SELECT max(pt.rank) FROM public.policy_entity_threshold et
                  JOIN public.policy_tier pt ON pt.name = et.tier
                 WHERE et.entity = v_run.entity AND abs(NEW.amount) >= et.min_amount));
        ELSE
            -- The global thresholds, in the policy's currency: an amount in another converts at the close's rate.
            v_compared := abs(NEW.amount);
            IF v_currency IS DISTINCT FROM v_enforced.currency THEN
                SELECT br.rate INTO v_rate FROM public.book_rate br
                 WHERE br.book_set_id = v_run.book_set_id AND br.from_currency = v_currency
                   AND br.to_currency = v_enforced.currency;
                IF v_rate IS NULL THEN
                    RAISE EXCEPTION 'gate refused: % is in %, and the books of its close (book set %) hold no %->% '
                                    'rate to judge the amount % against the policy''s thresholds', v_run.entity,
                        v_currency, v_run.book_set_id, v_currency, v_enforced.currency, NEW.amount
                        USING ERRCODE = 'insufficient_privilege';
                END IF;
                v_compared := public.convert_to_cent(v_compared, v_rate);
            END IF;
            v_floor := greatest(v_floor, (
                SELECT max(pt.rank) FROM public.policy_amount_threshold a JOIN public.policy_tier pt ON pt.name = a.tier
                 WHERE v_compared >= a.min_amount));
        END IF;
    END IF;
    IF NEW.kind = 'approval' AND v_enforced.findings_tier IS NOT NULL THEN
        v_findings := coalesce(jsonb_array_length(CASE WHEN jsonb_typeof(NEW.summary #> '{certificate,violations}')
                                                  = 'array' THEN NEW.summary #> '{certificate,violations}' END), 0)
                    + coalesce(jsonb_array_length(CASE WHEN jsonb_typeof(NEW.summary #> '{certificate,holds}')
                                                  = 'array' THEN NEW.summary #> '{certificate,holds}' END), 0);
        IF v_findings > 0 THEN
            v_floor := greatest(v_floor, (SELECT pt.rank FROM public.policy_tier pt
                                           WHERE pt.name = v_enforced.findings_tier));
        END IF;
    END IF;
    IF NEW.kind = 'escalation' THEN
        v_floor := greatest(v_floor, (SELECT pt.rank FROM public.policy_tier pt
                                       WHERE pt.name = v_enforced.escalation_tier));
        SELECT o.approver_role INTO v_owner
          FROM public.close_task t JOIN public.policy_escalation_owner o ON o.reason = t.escalation
         WHERE t.close_id = NEW.close_id AND t.task = NEW.task;
        IF v_owner IS NULL THEN
            RAISE EXCEPTION 'gate refused: task %/% has no escalation reason the enforced policy knows',
                NEW.close_id, NEW.task USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF EXISTS (SELECT 1 FROM public.close_task t
                   WHERE t.close_id = NEW.close_id AND t.task = NEW.task AND t.escalation IS NOT NULL) THEN
        v_floor := greatest(v_floor, (SELECT pt.rank FROM public.policy_tier pt
                                       WHERE pt.name = v_enforced.escalation_tier));
    END IF;
    IF v_tier.rank < v_floor THEN
        RAISE EXCEPTION 'gate refused: tier % is below the minimum the enforced policy sets for %/% (rank % < %)',
            NEW.tier, v_run.workflow, NEW.task, v_tier.rank, v_floor USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.quorum < v_tier.quorum THEN
        RAISE EXCEPTION 'gate refused: tier % needs a quorum of at least %, not %', NEW.tier, v_tier.quorum,
            NEW.quorum USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.approver_role IS DISTINCT FROM coalesce(v_owner, v_tier.approver_role) THEN
        RAISE EXCEPTION 'gate refused: a % gate at tier % is decided by role %, not %', NEW.kind, NEW.tier,
            coalesce(v_owner, v_tier.approver_role), NEW.approver_role USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
"""

# A line on an always-human account of the journal's entity posts only behind a person's approval of the task that
# posts it: an applied, approved approval gate of the task's current attempt, at the always-human tier or above, in a
# close of the journal's own entity.
ALWAYS_HUMAN_LINES = r"""
CREATE FUNCTION public.admit_always_human_line() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_journal record;
    v_least   text;
BEGIN
    SELECT j.entity, j.source_close, j.source_task INTO v_journal
      FROM public.journal j WHERE j.journal_id = NEW.journal_id;
    IF NOT FOUND OR NOT EXISTS (
        SELECT 1 FROM public.policy_always_human_account a
         WHERE a.account = NEW.account AND a.entity IN ('*', v_journal.entity)) THEN
        RETURN NEW;
    END IF;
    SELECT e.always_human_tier INTO v_least FROM public.policy_enforced e;
    IF NOT EXISTS (
        SELECT 1
          FROM public.close_run r
          JOIN public.close_task t ON t.close_id = r.close_id
          JOIN public.gate_state s ON s.close_id = t.close_id AND s.task = t.task AND s.attempt = t.attempt
          JOIN public.policy_tier pt ON pt.name = s.tier
         WHERE r.close_id = v_journal.source_close AND r.entity = v_journal.entity
           AND t.task = v_journal.source_task
           AND s.kind = 'approval' AND s.lifecycle = 'applied' AND s.status = 'approved' AND pt.gated
           AND pt.rank >= coalesce((SELECT lt.rank FROM public.policy_tier lt WHERE lt.name = v_least), 0)) THEN
        RAISE EXCEPTION 'journal % refused: account % always needs a person for %, and task % of close % has no '
                        'applied, approved approval gate of its current attempt at tier % or above',
            NEW.journal_id, NEW.account, v_journal.entity, coalesce(v_journal.source_task, '(none)'),
            coalesce(v_journal.source_close::text, '(none)'), coalesce(v_least, '(any gated tier)')
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION public.admit_always_human_line() FROM PUBLIC;
CREATE TRIGGER journal_line_always_human BEFORE INSERT ON public.journal_line
    FOR EACH ROW EXECUTE FUNCTION public.admit_always_human_line();
ALTER TABLE public.journal_line ENABLE ALWAYS TRIGGER journal_line_always_human;
"""


def upgrade() -> None:
    op.execute(TABLES.replace("{entity_code}", ENTITY_CODE).replace("{service_roles}", SERVICE_ROLES))
    op.execute(CONVERT)
    op.execute(GATE_POLICY)
    op.execute(ALWAYS_HUMAN_LINES)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
