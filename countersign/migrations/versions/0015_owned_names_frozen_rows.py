"""The database trusts no name it does not own and no row it did not freeze (issue 19).

Three ways round the boundary closed here, each reproduced as an attack by a service role's own connection:

- **Names.** Trigger functions with no fixed `search_path` resolved `gate_decision`, `principal`, `journal_line` and
  `accounting_period` through the caller's path, where `pg_temp` comes first: a temporary table of the same name
  stood in for the real one. Now every function in the schema runs with `search_path = pg_catalog, public, pg_temp`
  (the temporary schema last), the functions on the attacked paths name every table `public.`, and neither service
  role may create anything: `TEMPORARY` and `CREATE` on the database and `CREATE` on the schema are revoked from
  `PUBLIC` and from both roles. (`countersign db upgrade` re-applies the database-level revokes: they are per
  database, and a database cloned from a template or restored from a dump starts with PostgreSQL's defaults.)
- **Rows.** The columns that identify a row and tie it to its parent never change, whoever connects: a run's entity,
  period, workflow and book set; a task's run and name (its attempt only counts up by one, into a re-run); a gate's
  run, task, attempt and subject; a dispatch's run, task, attempt, key and input; a period's entity and period. The
  engine role's UPDATE grants are narrowed to the columns it moves, and a trigger refuses the rest. A gate's subject
  (the run's entity when it opened: a certificate id for a payment run) and the amount its tier was judged on are
  stamped into it and frozen. A payment certification names its gate's subject, references the certificate by
  foreign key in the run's own construction set, certifies the gate's amount, and is unique in canonical form (case
  and white space folded), so a look-alike of a certified id is refused.
- **Policy.** The minimum tier per workflow task, each tier's quorum and approver role, the amount thresholds and the
  escalation owners from `risk.yaml` live in `policy_*` tables, seeded by the owner at `db upgrade`
  (countersign/bootstrap/migrate.py `seed_policy`). A gate below them is refused for any role; a gated task cannot
  complete
  without its gate; the digest the database enforces is stamped into every `gate_opened` and `close_started` event.
- **Trace facts.** `gate_decided` is written by the database itself, from the decision row, when the row is admitted:
  neither service role may append one. An event naming a gate must carry that gate's close, an event naming a task
  must name a task of its close, and the three events a door records about a request (`decision_refused`,
  `command_refused`, `trace_exported`) have a fixed shape, checked here.

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"
SERVICE_ROLES = f"{ENGINE_ROLE}, {CALLBACKS_ROLE}"
FIXED_PATH = "pg_catalog, public, pg_temp"

# Per database: re-applied by `db upgrade` (countersign/bootstrap/migrate.py HARDEN_DATABASE) for clones and restores.
NO_OBJECT_CREATION = f"""
DO $$
BEGIN
    EXECUTE format('REVOKE TEMPORARY, CREATE ON DATABASE %I FROM PUBLIC, {SERVICE_ROLES}', current_database());
END $$;
REVOKE CREATE ON SCHEMA public FROM PUBLIC, {SERVICE_ROLES};
"""

# What each service role may change, column by column; identity columns are in no grant and frozen by triggers.
COLUMN_GRANTS = f"""
REVOKE UPDATE ON close_run, close_task, gate, accounting_period, dispatch FROM {ENGINE_ROLE};
GRANT UPDATE (status, status_reason, updated_at) ON close_run TO {ENGINE_ROLE};
GRANT UPDATE (status, result, reason, attempt, escalation, updated_at) ON close_task TO {ENGINE_ROLE};
GRANT UPDATE (lifecycle, applied_at, escalated_at) ON gate TO {ENGINE_ROLE};
GRANT UPDATE (status, closed_at, closed_by_close) ON accounting_period TO {ENGINE_ROLE};
GRANT UPDATE (status, result, error, calls, completed_at, failures, next_attempt_at, dead_lettered_at, leased_by,
              lease_until) ON dispatch TO {ENGINE_ROLE};
"""

FROZEN_IDENTITY = r"""
CREATE FUNCTION refuse_identity_change() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF TG_TABLE_NAME = 'close_run' THEN
        IF (NEW.close_id, NEW.entity, NEW.period, NEW.book_set_id, NEW.workflow, NEW.policy_digest,
            NEW.checklist_digest, NEW.started_by, NEW.created_at) IS DISTINCT FROM
           (OLD.close_id, OLD.entity, OLD.period, OLD.book_set_id, OLD.workflow, OLD.policy_digest,
            OLD.checklist_digest, OLD.started_by, OLD.created_at) THEN
            RAISE EXCEPTION 'run %: its identity (entity, period, workflow, book set, digests, starter) never changes',
                OLD.close_id USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF TG_TABLE_NAME = 'close_task' THEN
        IF (NEW.close_id, NEW.task, NEW.title) IS DISTINCT FROM (OLD.close_id, OLD.task, OLD.title) THEN
            RAISE EXCEPTION 'task %/%: its run and name never change (nothing re-parents a task)',
                OLD.close_id, OLD.task USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NEW.attempt IS DISTINCT FROM OLD.attempt
           AND NOT (NEW.attempt = OLD.attempt + 1 AND NEW.status = 'pending' AND OLD.status <> 'pending') THEN
            RAISE EXCEPTION 'task %/%: its attempt counts up by one, into a re-run (% -> % while % -> %)',
                OLD.close_id, OLD.task, OLD.attempt, NEW.attempt, OLD.status, NEW.status
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF TG_TABLE_NAME = 'dispatch' THEN
        IF (NEW.dispatch_id, NEW.idempotency_key, NEW.close_id, NEW.task, NEW.attempt, NEW.specialist,
            NEW.input_digest, NEW.created_at) IS DISTINCT FROM
           (OLD.dispatch_id, OLD.idempotency_key, OLD.close_id, OLD.task, OLD.attempt, OLD.specialist,
            OLD.input_digest, OLD.created_at) THEN
            RAISE EXCEPTION 'dispatch %: its run, task, attempt, key and input never change', OLD.dispatch_id
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF TG_TABLE_NAME = 'accounting_period' THEN
        IF (NEW.entity, NEW.period) IS DISTINCT FROM (OLD.entity, OLD.period) THEN
            RAISE EXCEPTION 'period %/%: its entity and period never change', OLD.entity, OLD.period
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    RETURN NEW;
END $$;
"""

FROZEN_TABLES = ("close_run", "close_task", "dispatch", "accounting_period")

GATE_COLUMNS = r"""
ALTER TABLE gate ADD COLUMN subject text;
ALTER TABLE gate ADD COLUMN amount numeric(18, 2);
ALTER TABLE gate ADD COLUMN enforced_policy text;
UPDATE gate g SET subject = r.entity FROM close_run r WHERE r.close_id = g.close_id;
ALTER TABLE gate ALTER COLUMN subject SET NOT NULL;

CREATE OR REPLACE FUNCTION refuse_gate_requirement_change() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'gates are never deleted (gate %)', OLD.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.gate_id, NEW.close_id, NEW.task, NEW.attempt, NEW.kind, NEW.tier, NEW.quorum, NEW.approver_role,
        NEW.rule, NEW.summary, NEW.prepared_by, NEW.requested_by, NEW.opened_at, NEW.due_at, NEW.expires_at,
        NEW.subject, NEW.amount, NEW.enforced_policy)
       IS DISTINCT FROM
       (OLD.gate_id, OLD.close_id, OLD.task, OLD.attempt, OLD.kind, OLD.tier, OLD.quorum, OLD.approver_role,
        OLD.rule, OLD.summary, OLD.prepared_by, OLD.requested_by, OLD.opened_at, OLD.due_at, OLD.expires_at,
        OLD.subject, OLD.amount, OLD.enforced_policy) THEN
        RAISE EXCEPTION 'gate %: its requirements (run, task, attempt, subject, amount, tier, quorum, approver role, '
                        'rule, summary, preparer, requesters, due and expiry times) cannot change once it is open',
            OLD.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.lifecycle <> 'open' AND NEW.lifecycle IS DISTINCT FROM OLD.lifecycle THEN
        RAISE EXCEPTION 'gate % is % and cannot become %', OLD.gate_id, OLD.lifecycle, NEW.lifecycle
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
"""

POLICY_TABLES = f"""
CREATE TABLE policy_tier (
    name          text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    rank          integer NOT NULL UNIQUE CHECK (rank >= 0),
    gated         boolean NOT NULL,
    quorum        integer NOT NULL CHECK (quorum >= 0),
    approver_role text,
    CHECK (NOT gated OR (quorum >= 1 AND approver_role IS NOT NULL))
);
CREATE TABLE policy_task (
    workflow text NOT NULL,
    task     text NOT NULL,
    tier     text NOT NULL REFERENCES policy_tier,
    PRIMARY KEY (workflow, task)
);
CREATE TABLE policy_amount_threshold (
    min_amount numeric(18, 2) PRIMARY KEY CHECK (min_amount > 0),
    tier       text NOT NULL REFERENCES policy_tier
);
CREATE TABLE policy_escalation_owner (
    reason        text PRIMARY KEY,
    approver_role text NOT NULL
);
CREATE TABLE policy_enforced (
    singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    digest          text NOT NULL CHECK (digest ~ '^[0-9a-f]{{64}}$'),
    escalation_tier text NOT NULL REFERENCES policy_tier,
    findings_tier   text REFERENCES policy_tier,
    seeded_at       timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON policy_tier, policy_task, policy_amount_threshold, policy_escalation_owner, policy_enforced
    TO {SERVICE_ROLES};
"""

# Opening a gate: the database stamps what it knows (the subject, the policy it enforced) and refuses a gate below the
# seeded minimums, whoever connects.
GATE_POLICY = r"""
CREATE FUNCTION admit_gate() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_run      record;
    v_enforced record;
    v_tier     record;
    v_floor    integer;
    v_owner    text;
    v_findings integer;
BEGIN
    SELECT r.entity, r.workflow INTO v_run FROM public.close_run r WHERE r.close_id = NEW.close_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'gate refused: no run %', NEW.close_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    NEW.subject := v_run.entity;
    SELECT e.digest, e.escalation_tier, e.findings_tier INTO v_enforced FROM public.policy_enforced e;
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
        v_floor := greatest(v_floor, (
            SELECT max(pt.rank) FROM public.policy_amount_threshold a JOIN public.policy_tier pt ON pt.name = a.tier
             WHERE abs(NEW.amount) >= a.min_amount));
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
CREATE TRIGGER gate_admitted BEFORE INSERT ON gate FOR EACH ROW EXECUTE FUNCTION admit_gate();
ALTER TABLE gate ENABLE ALWAYS TRIGGER gate_admitted;
REVOKE ALL ON FUNCTION admit_gate() FROM PUBLIC;
"""

# The supervisor's task rule (0011), names qualified, plus: a task whose minimum tier is gated never completes
# without a gate.
SUPERVISE_TASK = r"""
CREATE OR REPLACE FUNCTION supervise_close_task() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM public.refuse_illegal_start('task', NEW.status, 'pending');
        RETURN NEW;
    END IF;
    IF OLD.escalation IS NOT NULL AND NEW.escalation IS NULL THEN
        RAISE EXCEPTION 'illegal transition: task %/% is escalated (%) and its escalation is never cleared',
            OLD.close_id, OLD.task, OLD.escalation USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.status = NEW.status THEN
        RETURN NEW;
    END IF;
    PERFORM public.refuse_illegal_transition('task', OLD.status, NEW.status);
    IF NEW.status = 'halted' AND NEW.escalation IS NULL THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from % to halted without an escalation reason',
            OLD.task, OLD.status USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.status = 'done' AND OLD.status <> 'awaiting_gate' AND NEW.escalation IS NOT NULL THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from % to done: escalated work (%) completes only '
                        'through a human gate', OLD.task, OLD.status, NEW.escalation
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.status = 'done' AND OLD.status <> 'awaiting_gate' AND EXISTS (
        SELECT 1 FROM public.close_run r
          JOIN public.policy_task p ON p.workflow = r.workflow AND p.task = NEW.task
          JOIN public.policy_tier t ON t.name = p.tier
         WHERE r.close_id = NEW.close_id AND t.gated) THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from % to done: the enforced policy gates it',
            OLD.task, OLD.status USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.status = 'done' AND OLD.status = 'awaiting_gate'
       AND NOT public.gate_applied_with(NEW.close_id, NEW.task, NEW.attempt, 'approval', 'approved') THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from awaiting_gate to done without an applied, '
                        'approved approval gate for attempt %', OLD.task, NEW.attempt
            USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.status = 'halted' AND NEW.status = 'pending'
       AND NOT public.gate_applied_with(OLD.close_id, OLD.task, OLD.attempt, 'escalation', 'approved')
       AND NOT EXISTS (SELECT 1 FROM public.gate g WHERE g.close_id = OLD.close_id AND g.task = OLD.task
                          AND g.attempt = OLD.attempt AND g.kind = 'escalation' AND g.lifecycle = 'expired') THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from halted to pending until the escalation gate of '
                        'attempt % is approved by a person or expired', OLD.task, OLD.attempt
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""

# The ledger's own rules, names qualified.
LEDGER = r"""
CREATE OR REPLACE FUNCTION refuse_posting_into_closed_period() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_entity text;
    v_period text;
BEGIN
    IF TG_TABLE_NAME = 'journal' THEN
        v_entity := NEW.entity;
        v_period := NEW.period;
    ELSE
        SELECT j.entity, j.period INTO v_entity, v_period FROM public.journal j WHERE j.journal_id = NEW.journal_id;
    END IF;
    IF EXISTS (SELECT 1 FROM public.accounting_period a
               WHERE a.entity = v_entity AND a.period = v_period AND a.status = 'closed') THEN
        RAISE EXCEPTION 'period %/% is closed: nothing posts into it', v_entity, v_period
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION check_journal_balanced() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_journal bigint := COALESCE(NEW.journal_id, OLD.journal_id);
    v_total   numeric;
    v_lines   integer;
BEGIN
    SELECT COALESCE(sum(l.amount), 0), count(*) INTO v_total, v_lines
      FROM public.journal_line l WHERE l.journal_id = v_journal;
    IF v_lines < 2 OR v_total <> 0 THEN
        RAISE EXCEPTION 'journal % is unbalanced: % lines summing to %', v_journal, v_lines, v_total
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;
ALTER TABLE journal ENABLE ALWAYS TRIGGER journal_period_open;
ALTER TABLE journal_line ENABLE ALWAYS TRIGGER journal_line_period_open;
ALTER TABLE journal ENABLE ALWAYS TRIGGER journal_balanced;
ALTER TABLE journal_line ENABLE ALWAYS TRIGGER journal_line_balanced;
ALTER TABLE accounting_period ENABLE ALWAYS TRIGGER accounting_period_stays_closed;
REVOKE ALL ON FUNCTION refuse_posting_into_closed_period(), check_journal_balanced() FROM PUBLIC;
"""

CERTIFICATION = r"""
ALTER TABLE payment_certification ADD COLUMN set_id bigint;
UPDATE payment_certification c SET set_id = (b.manifest->>'construction_set_id')::bigint
  FROM public.close_run r JOIN public.book_set b ON b.book_set_id = r.book_set_id
 WHERE r.close_id = c.close_id;
ALTER TABLE payment_certification ALTER COLUMN set_id SET NOT NULL;
ALTER TABLE payment_certification ADD CONSTRAINT payment_certification_certificate
    FOREIGN KEY (set_id, certificate_id) REFERENCES construction_certificate (set_id, certificate_id);
-- A certificate id in canonical form (case and white space folded) is certified once: no look-alike is paid twice.
CREATE UNIQUE INDEX payment_certification_canonical_id
    ON payment_certification (upper(regexp_replace(certificate_id, '\s', '', 'g')));

CREATE OR REPLACE FUNCTION admit_payment_certification() RETURNS trigger
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
    NEW.certified_by_gate_at := (SELECT max(d.decided_at) FROM public.gate_decision d
                                  WHERE d.gate_id = NEW.gate_id AND d.decision = 'approve');
    NEW.recorded_at := now();
    RETURN NEW;
END $$;
"""

# The database writes `gate_decided` from the decision row it admitted; the counts are the gate's after this row.
DECIDED_EVENT = r"""
CREATE FUNCTION trace_gate_decided() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    s record;
BEGIN
    SELECT g.close_id, g.task, g.quorum,
           count(*) FILTER (WHERE d.decision = 'approve') AS approvals,
           count(*) FILTER (WHERE d.decision = 'reject') AS rejections
      INTO s
      FROM public.gate g JOIN public.gate_decision d ON d.gate_id = g.gate_id
     WHERE g.gate_id = NEW.gate_id
     GROUP BY g.gate_id;
    INSERT INTO public.trace_pending (ts, close_id, actor, kind, payload, version_set)
    VALUES (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), s.close_id,
            NEW.principal_id, 'gate_decided',
            jsonb_build_object(
                'gate_id', NEW.gate_id::text, 'task', s.task, 'decision', NEW.decision, 'reason', NEW.reason,
                'channel', NEW.channel, 'decision_id', NEW.decision_id,
                'gate_status', CASE WHEN s.rejections > 0 THEN 'rejected'
                                    WHEN s.approvals >= s.quorum THEN 'approved' ELSE 'open' END,
                'approvals', s.approvals, 'quorum', s.quorum, 'to', 'orchestrator'),
            '{}'::jsonb);
    RETURN NULL;
END $$;
CREATE TRIGGER gate_decision_traced AFTER INSERT ON gate_decision
    FOR EACH ROW EXECUTE FUNCTION trace_gate_decided();
ALTER TABLE gate_decision ENABLE ALWAYS TRIGGER gate_decision_traced;
REVOKE ALL ON FUNCTION trace_gate_decided() FROM PUBLIC;
"""

# Who may write which event, and what an event may claim. Runs as the inserting role (not SECURITY DEFINER): the
# writer is `current_user`; the lookups read tables both roles may read, through qualified names.
TRACE_WRITER = r"""
CREATE OR REPLACE FUNCTION stamp_trace_writer() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp SET enable_seqscan = off AS $$
DECLARE
    v_gate_close uuid;
    v_keys text[];
BEGIN
    NEW.writer := current_user;
    IF current_user IN ('{engine}', '{callbacks}') AND NEW.kind = 'gate_decided' THEN
        RAISE EXCEPTION 'gate_decided events are written by the database from the decision row, not by %',
            current_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF current_user = '{callbacks}' THEN
        IF NOT (NEW.kind = ANY ('{door_kinds}'::text[])) THEN
            RAISE EXCEPTION 'the callbacks role may not append % events', NEW.kind
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF current_user = '{engine}' THEN
        IF NEW.kind = ANY ('{door_kinds}'::text[]) THEN
            RAISE EXCEPTION 'the engine role may not append % events', NEW.kind
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM public.principal p WHERE p.principal_id = NEW.actor AND p.kind = 'machine') THEN
            RAISE EXCEPTION 'the engine role appends events only as a machine principal, not as %', NEW.actor
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    -- A door's events say what the door saw about a request, in a fixed shape.
    IF NEW.kind = ANY ('{door_kinds}'::text[]) THEN
        IF jsonb_typeof(NEW.payload) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION '% payload must be an object', NEW.kind USING ERRCODE = 'check_violation';
        END IF;
        SELECT array_agg(k ORDER BY k) INTO v_keys FROM jsonb_object_keys(NEW.payload) k;
        IF NEW.kind = 'decision_refused' THEN
            IF v_keys IS DISTINCT FROM ARRAY['channel', 'code', 'decision', 'gate_id', 'principal', 'reason']
               OR NEW.actor <> 'callbacks'
               OR jsonb_typeof(NEW.payload->'code') IS DISTINCT FROM 'string'
               OR NEW.payload->>'code' !~ '^[a-z_]{1,40}$'
               OR length(NEW.payload::text) > 8192 THEN
                RAISE EXCEPTION 'decision_refused events carry gate_id, principal, decision, code, reason and '
                                'channel, as actor callbacks' USING ERRCODE = 'check_violation';
            END IF;
        ELSIF NEW.kind = 'command_refused' THEN
            IF v_keys IS DISTINCT FROM ARRAY['command', 'platform', 'reason', 'tenant', 'user']
               OR NEW.actor <> 'callbacks' OR NEW.close_id IS NOT NULL
               OR NEW.payload->>'platform' NOT IN ('slack', 'teams')
               OR length(NEW.payload::text) > 8192 THEN
                RAISE EXCEPTION 'command_refused events carry platform, tenant, user, command and reason, as actor '
                                'callbacks, for no close' USING ERRCODE = 'check_violation';
            END IF;
        ELSIF NEW.kind = 'trace_exported' THEN
            IF v_keys IS DISTINCT FROM ARRAY['bytes', 'close_id', 'format', 'platform', 'sha256']
               OR NEW.close_id IS NULL OR NEW.payload->>'close_id' IS DISTINCT FROM NEW.close_id::text
               OR NEW.payload->>'sha256' !~ '^[0-9a-f]{64}$'
               OR jsonb_typeof(NEW.payload->'bytes') IS DISTINCT FROM 'number'
               OR NEW.payload->>'format' NOT IN ('json', 'csv', 'bundle')
               OR NOT EXISTS (SELECT 1 FROM public.close_run r WHERE r.close_id = NEW.close_id)
               OR NOT EXISTS (SELECT 1 FROM public.principal p WHERE p.principal_id = NEW.actor) THEN
                RAISE EXCEPTION 'trace_exported events carry close_id, format, platform, sha256 and bytes, for an '
                                'existing close, as a known principal' USING ERRCODE = 'check_violation';
            END IF;
        END IF;
    END IF;
    -- An event that names a gate belongs to the gate's close; one that names a task, to a close with that task.
    IF jsonb_typeof(NEW.payload->'gate_id') = 'string' THEN
        IF NEW.payload->>'gate_id' ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' THEN
            SELECT g.close_id INTO v_gate_close FROM public.gate g WHERE g.gate_id = (NEW.payload->>'gate_id')::uuid;
        END IF;
        IF v_gate_close IS DISTINCT FROM NEW.close_id AND (v_gate_close IS NOT NULL OR NEW.kind <> 'decision_refused')
        THEN
            RAISE EXCEPTION '% event names gate % of close %, not close %', NEW.kind, NEW.payload->>'gate_id',
                v_gate_close, NEW.close_id USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    IF NEW.close_id IS NOT NULL AND jsonb_typeof(NEW.payload->'task') = 'string' AND NOT EXISTS (
        SELECT 1 FROM public.close_task t WHERE t.close_id = NEW.close_id AND t.task = NEW.payload->>'task') THEN
        RAISE EXCEPTION '% event names task %, which close % does not have', NEW.kind, NEW.payload->>'task',
            NEW.close_id USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.kind IN ('gate_opened', 'close_started') THEN
        NEW.payload := NEW.payload || jsonb_build_object(
            'enforced_policy', (SELECT e.digest FROM public.policy_enforced e));
    END IF;
    RETURN NEW;
END $$;
"""

DOOR_KINDS = ("decision_refused", "trace_exported", "command_refused")


def _fixed_path_everywhere() -> str:
    """Every function in the schema, whoever wrote it and whenever: the same fixed path."""
    return f"""
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
               JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'public' AND p.prokind IN ('f', 'p') LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = {FIXED_PATH}', f);
    END LOOP;
END $$;
"""


def _frozen(table: str) -> str:
    return (
        f"CREATE TRIGGER {table}_identity_frozen BEFORE UPDATE ON {table}"
        f" FOR EACH ROW EXECUTE FUNCTION refuse_identity_change();\n"
        f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_identity_frozen;\n"
    )


def upgrade() -> None:
    op.execute(NO_OBJECT_CREATION)
    op.execute(COLUMN_GRANTS)
    op.execute(FROZEN_IDENTITY)
    for table in FROZEN_TABLES:
        op.execute(_frozen(table))
    op.execute(GATE_COLUMNS)
    op.execute(POLICY_TABLES)
    op.execute(GATE_POLICY)
    op.execute(SUPERVISE_TASK)
    op.execute(LEDGER)
    op.execute(CERTIFICATION)
    op.execute(DECIDED_EVENT)
    op.execute(
        TRACE_WRITER.replace("{door_kinds}", "{" + ",".join(DOOR_KINDS) + "}")
        .replace("{engine}", ENGINE_ROLE)
        .replace("{callbacks}", CALLBACKS_ROLE)
    )
    op.execute("REVOKE ALL ON FUNCTION refuse_identity_change() FROM PUBLIC;")
    op.execute(_fixed_path_everywhere())


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
