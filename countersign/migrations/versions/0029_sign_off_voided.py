"""A sign-off is voided when the data it approved changes (issue 36, docs/adr/0046).

- **What a gate covers.** `gate.accounts` names the accounts the gated work judged (the handler's `gate_accounts`:
  a reconciliation's cash, control or intercompany accounts, an accrual's journal accounts), frozen when the gate
  opens: no service role may update the column.
- **The void.** `sign_off_void` records, whoever inserts the row, each change that lands on a covered account after
  its gate was approved: a ledger journal line of the close's entity and period (`journal_line`), a GL line or a
  bank line joining the close's own book set (`book_gl_line`, `book_bank_line`; a new bank feed is such a change),
  or, for a payment certificate's run, a new version of its certificate (`construction_certificate`). It names the
  table, the journal or line reference, the account (or contract), the amount with its currency and when. Statement
  triggers owned by the owner write it (SECURITY DEFINER, pinned search_path, qualified names); nobody else can
  insert, update, delete or truncate it. Only the approved approval gate of a task's current attempt in a run that is
  not closed is voided; a journal the close posted from the task's own gate does not void that gate. The changed
  tables refuse UPDATE and DELETE already (migration 0001), so nothing is inserted elsewhere and moved later.
- **The approval no longer counts.** `gate_state` says `voided` for a gate with a void, so `gate_applied_with(...
  'approved')` is false for it (no task completes on it, no always-human line posts on it, no certification on it),
  and a new decision on it is refused. A done task whose current attempt's gate is voided may go back to pending
  for a new attempt (the one new row of `lifecycle_transition`); no other done task may. A run does not close, and
  its period is not closed, while a void stands that no later applied, approved approval gate of the same task
  answers.
- **The run wakes.** A void enqueues an `advance` of its run, so the engine reopens the task and says so.

Revision ID: 0029
Revises: 0028
"""

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"
FIXED_PATH = "pg_catalog, public, pg_temp"

TABLE = f"""
ALTER TABLE public.gate ADD COLUMN accounts text[] NOT NULL DEFAULT '{{}}';

CREATE TABLE public.sign_off_void (
    void_id      bigserial PRIMARY KEY,
    gate_id      uuid NOT NULL REFERENCES public.gate,
    close_id     uuid NOT NULL REFERENCES public.close_run,
    task         text NOT NULL,
    attempt      integer NOT NULL,
    change_table text NOT NULL
                 CHECK (change_table IN ('journal_line', 'book_gl_line', 'book_bank_line', 'construction_certificate')),
    change_ref   text NOT NULL,
    change_line  text NOT NULL,
    account      text NOT NULL,
    account_name text,
    description  text NOT NULL,
    amount       numeric(18, 2) NOT NULL,
    currency     char(3) NOT NULL,
    changed_by   text NOT NULL,
    changed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_off_void_gate ON public.sign_off_void (gate_id);
CREATE INDEX sign_off_void_close ON public.sign_off_void (close_id, task, attempt);

CREATE FUNCTION public.refuse_sign_off_void_change() RETURNS trigger
    LANGUAGE plpgsql SET search_path = {FIXED_PATH} AS $$
BEGIN
    RAISE EXCEPTION 'a sign-off void is append-only: % on sign_off_void is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
REVOKE ALL ON FUNCTION public.refuse_sign_off_void_change() FROM PUBLIC;
CREATE TRIGGER sign_off_void_append_only BEFORE UPDATE OR DELETE ON public.sign_off_void
    FOR EACH ROW EXECUTE FUNCTION public.refuse_sign_off_void_change();
CREATE TRIGGER sign_off_void_no_truncate BEFORE TRUNCATE ON public.sign_off_void
    FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_sign_off_void_change();
ALTER TABLE public.sign_off_void ENABLE ALWAYS TRIGGER sign_off_void_append_only;
ALTER TABLE public.sign_off_void ENABLE ALWAYS TRIGGER sign_off_void_no_truncate;
GRANT SELECT ON public.sign_off_void TO {ENGINE_ROLE}, {CALLBACKS_ROLE};

INSERT INTO public.lifecycle_transition (machine, source, target, name)
    VALUES ('task', 'done', 'pending', 'sign-off voided: run again');
"""

# 0002's view, and `voided` first: a gate whose approval a change voided no longer counts as approved anywhere.
GATE_STATE = r"""
CREATE OR REPLACE VIEW public.gate_state AS
SELECT g.gate_id,
       g.close_id,
       g.task,
       g.attempt,
       g.kind,
       g.tier,
       g.quorum,
       g.lifecycle,
       count(d.decision_id) FILTER (WHERE d.decision = 'approve') AS approvals,
       count(d.decision_id) FILTER (WHERE d.decision = 'reject') AS rejections,
       CASE
           WHEN EXISTS (SELECT 1 FROM public.sign_off_void v WHERE v.gate_id = g.gate_id) THEN 'voided'
           WHEN count(d.decision_id) FILTER (WHERE d.decision = 'reject') > 0 THEN 'rejected'
           WHEN count(d.decision_id) FILTER (WHERE d.decision = 'approve') >= g.quorum THEN 'approved'
           WHEN g.lifecycle = 'cancelled' THEN 'cancelled'
           WHEN g.lifecycle = 'expired' OR g.expires_at <= now() THEN 'expired'
           ELSE 'open'
       END AS status,
       (g.lifecycle = 'open' AND g.due_at <= now()
        AND count(d.decision_id) FILTER (WHERE d.decision = 'reject') = 0
        AND count(d.decision_id) FILTER (WHERE d.decision = 'approve') < g.quorum) AS overdue
  FROM public.gate g
  LEFT JOIN public.gate_decision d ON d.gate_id = g.gate_id
 GROUP BY g.gate_id;
"""

# The approved approval gates of current attempts in live runs, the shape every void trigger joins against.
VOIDS = f"""
CREATE FUNCTION public.approved_sign_offs() RETURNS TABLE (
    gate_id uuid, close_id uuid, task text, attempt integer, accounts text[], entity text, period text,
    book_set_id bigint, workflow text, currency char(3))
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
    SELECT g.gate_id, g.close_id, g.task, g.attempt, g.accounts, r.entity, r.period, r.book_set_id, r.workflow,
           b.currency
      FROM public.close_run r
      JOIN public.book_set b ON b.book_set_id = r.book_set_id
      JOIN public.close_task t ON t.close_id = r.close_id
      JOIN public.gate g ON g.close_id = t.close_id AND g.task = t.task AND g.attempt = t.attempt
      JOIN public.gate_state s ON s.gate_id = g.gate_id
     WHERE r.status <> 'closed' AND g.kind = 'approval' AND s.status = 'approved'
$$;
REVOKE ALL ON FUNCTION public.approved_sign_offs() FROM PUBLIC;

CREATE FUNCTION public.wake_voided_runs(p_since bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_run uuid;
BEGIN
    FOR v_run IN SELECT DISTINCT v.close_id FROM public.sign_off_void v WHERE v.void_id > p_since LOOP
        PERFORM public.countersign_enqueue_job('advance', v_run);
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION public.wake_voided_runs(bigint) FROM PUBLIC;

CREATE FUNCTION public.void_on_journal_lines() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_since bigint := (SELECT coalesce(max(v.void_id), 0) FROM public.sign_off_void v);
BEGIN
    INSERT INTO public.sign_off_void (gate_id, close_id, task, attempt, change_table, change_ref, change_line,
                                      account, account_name, description, amount, currency, changed_by)
    SELECT a.gate_id, a.close_id, a.task, a.attempt, 'journal_line', n.journal_id::text, n.line_no::text, n.account,
           ba.name, j.memo, n.amount, a.currency, j.posted_by
      FROM new_lines n
      JOIN public.journal j ON j.journal_id = n.journal_id
      JOIN public.approved_sign_offs() a ON a.entity = j.entity AND a.period = j.period
      LEFT JOIN public.book_account ba ON ba.book_set_id = a.book_set_id AND ba.account = n.account
     WHERE n.account = ANY (a.accounts)
       AND (j.source_close IS DISTINCT FROM a.close_id OR j.source_task IS DISTINCT FROM a.task);
    PERFORM public.wake_voided_runs(v_since);
    RETURN NULL;
END $$;

CREATE FUNCTION public.void_on_gl_lines() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_since bigint := (SELECT coalesce(max(v.void_id), 0) FROM public.sign_off_void v);
BEGIN
    INSERT INTO public.sign_off_void (gate_id, close_id, task, attempt, change_table, change_ref, change_line,
                                      account, account_name, description, amount, currency, changed_by)
    SELECT a.gate_id, a.close_id, a.task, a.attempt, 'book_gl_line', n.journal_id, n.line_id, n.account,
           ba.name, n.description, n.amount, a.currency, session_user
      FROM new_lines n
      JOIN public.approved_sign_offs() a ON a.book_set_id = n.book_set_id
      LEFT JOIN public.book_account ba ON ba.book_set_id = n.book_set_id AND ba.account = n.account
     WHERE n.account = ANY (a.accounts);
    PERFORM public.wake_voided_runs(v_since);
    RETURN NULL;
END $$;

CREATE FUNCTION public.void_on_bank_lines() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_since bigint := (SELECT coalesce(max(v.void_id), 0) FROM public.sign_off_void v);
BEGIN
    INSERT INTO public.sign_off_void (gate_id, close_id, task, attempt, change_table, change_ref, change_line,
                                      account, account_name, description, amount, currency, changed_by)
    SELECT a.gate_id, a.close_id, a.task, a.attempt, 'book_bank_line', n.bank_line_id,
           'feed ' || n.feed_version, n.account, ba.name, n.reference, n.amount,
           coalesce(n.currency, ba.currency, a.currency), f.loaded_by
      FROM new_lines n
      JOIN public.bank_feed f ON f.book_set_id = n.book_set_id AND f.feed_version = n.feed_version
      JOIN public.approved_sign_offs() a ON a.book_set_id = n.book_set_id
      LEFT JOIN public.book_account ba ON ba.book_set_id = n.book_set_id AND ba.account = n.account
     WHERE n.account = ANY (a.accounts);
    PERFORM public.wake_voided_runs(v_since);
    RETURN NULL;
END $$;

-- A certificates run's entity is its certificate; a new version of that certificate (the same id in a new set, or a
-- certificate that says it supersedes it) voids the approved payment gate. The amount is the sum the new version
-- claims (`totals.amount_due`), in the currency the gate froze.
CREATE FUNCTION public.void_on_certificates() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_since bigint := (SELECT coalesce(max(v.void_id), 0) FROM public.sign_off_void v);
BEGIN
    INSERT INTO public.sign_off_void (gate_id, close_id, task, attempt, change_table, change_ref, change_line,
                                      account, account_name, description, amount, currency, changed_by)
    SELECT a.gate_id, a.close_id, a.task, a.attempt, 'construction_certificate', n.certificate_id,
           'set ' || n.set_id, n.contract_id, NULL, 'certificate ' || n.number || ' for ' || n.period,
           coalesce(public.sign_off_claimed_amount(n.doc), 0),
           coalesce(g.summary #>> '{{certificate,currency}}', a.currency), s.loaded_by
      FROM new_certificates n
      JOIN public.construction_set s ON s.set_id = n.set_id
      JOIN public.approved_sign_offs() a ON a.workflow = 'certificates' AND a.task = 'payment'
                                         AND a.entity IN (n.certificate_id, n.doc ->> 'supersedes')
      JOIN public.gate g ON g.gate_id = a.gate_id;
    PERFORM public.wake_voided_runs(v_since);
    RETURN NULL;
END $$;

CREATE FUNCTION public.sign_off_claimed_amount(p_doc jsonb) RETURNS numeric
    LANGUAGE plpgsql IMMUTABLE SET search_path = {FIXED_PATH} AS $$
BEGIN
    RETURN (p_doc #>> '{{totals,amount_due}}')::numeric;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

REVOKE ALL ON FUNCTION public.void_on_journal_lines(), public.void_on_gl_lines(), public.void_on_bank_lines(),
    public.void_on_certificates(), public.sign_off_claimed_amount(jsonb) FROM PUBLIC;

CREATE TRIGGER journal_line_voids_sign_offs AFTER INSERT ON public.journal_line
    REFERENCING NEW TABLE AS new_lines FOR EACH STATEMENT EXECUTE FUNCTION public.void_on_journal_lines();
CREATE TRIGGER book_gl_line_voids_sign_offs AFTER INSERT ON public.book_gl_line
    REFERENCING NEW TABLE AS new_lines FOR EACH STATEMENT EXECUTE FUNCTION public.void_on_gl_lines();
CREATE TRIGGER book_bank_line_voids_sign_offs AFTER INSERT ON public.book_bank_line
    REFERENCING NEW TABLE AS new_lines FOR EACH STATEMENT EXECUTE FUNCTION public.void_on_bank_lines();
CREATE TRIGGER construction_certificate_voids_sign_offs AFTER INSERT ON public.construction_certificate
    REFERENCING NEW TABLE AS new_certificates FOR EACH STATEMENT EXECUTE FUNCTION public.void_on_certificates();
ALTER TABLE public.journal_line ENABLE ALWAYS TRIGGER journal_line_voids_sign_offs;
ALTER TABLE public.book_gl_line ENABLE ALWAYS TRIGGER book_gl_line_voids_sign_offs;
ALTER TABLE public.book_bank_line ENABLE ALWAYS TRIGGER book_bank_line_voids_sign_offs;
ALTER TABLE public.construction_certificate ENABLE ALWAYS TRIGGER construction_certificate_voids_sign_offs;
"""

# A void stands until a later attempt of the same task passes an applied, approved approval gate.
STANDING = f"""
CREATE FUNCTION public.standing_sign_off_voids(p_close uuid) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
    SELECT count(*) FROM public.sign_off_void v
     WHERE v.close_id = p_close
       AND NOT EXISTS (SELECT 1 FROM public.gate_state s
                        WHERE s.close_id = v.close_id AND s.task = v.task AND s.attempt > v.attempt
                          AND s.kind = 'approval' AND s.lifecycle = 'applied' AND s.status = 'approved')
$$;
REVOKE ALL ON FUNCTION public.standing_sign_off_voids(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.standing_sign_off_voids(uuid) TO {ENGINE_ROLE}, {CALLBACKS_ROLE};

CREATE FUNCTION public.refuse_closing_over_a_void() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_run uuid;
BEGIN
    IF NEW.status <> 'closed' OR OLD.status = 'closed' THEN
        RETURN NEW;
    END IF;
    IF TG_TABLE_NAME = 'close_run' THEN
        IF public.standing_sign_off_voids(NEW.close_id) > 0 THEN
            RAISE EXCEPTION 'run % cannot close: a sign-off was voided by a later change and is not approved again',
                NEW.close_id USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    FOR v_run IN SELECT r.close_id FROM public.close_run r
                  WHERE r.entity = NEW.entity AND r.period = NEW.period AND r.status <> 'closed' LOOP
        IF public.standing_sign_off_voids(v_run) > 0 THEN
            RAISE EXCEPTION 'period %/% cannot close: a sign-off of close % was voided by a later change and is not '
                            'approved again', NEW.entity, NEW.period, v_run USING ERRCODE = 'check_violation';
        END IF;
    END LOOP;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION public.refuse_closing_over_a_void() FROM PUBLIC;
CREATE TRIGGER close_run_no_standing_void BEFORE UPDATE OF status ON public.close_run
    FOR EACH ROW EXECUTE FUNCTION public.refuse_closing_over_a_void();
CREATE TRIGGER accounting_period_no_standing_void BEFORE UPDATE OF status ON public.accounting_period
    FOR EACH ROW EXECUTE FUNCTION public.refuse_closing_over_a_void();
ALTER TABLE public.close_run ENABLE ALWAYS TRIGGER close_run_no_standing_void;
ALTER TABLE public.accounting_period ENABLE ALWAYS TRIGGER accounting_period_no_standing_void;

-- done -> pending (the new row of lifecycle_transition) only for a task whose current attempt's gate is voided.
CREATE FUNCTION public.reopen_only_a_voided_sign_off() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
BEGIN
    IF OLD.status = 'done' AND NEW.status = 'pending' AND NOT EXISTS (
        SELECT 1 FROM public.sign_off_void v
         WHERE v.close_id = OLD.close_id AND v.task = OLD.task AND v.attempt = OLD.attempt) THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from done to pending: done work reopens only when a '
                        'change voids the sign-off of attempt %', OLD.task, OLD.attempt
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION public.reopen_only_a_voided_sign_off() FROM PUBLIC;
CREATE TRIGGER close_task_reopens_only_when_voided BEFORE UPDATE OF status ON public.close_task
    FOR EACH ROW EXECUTE FUNCTION public.reopen_only_a_voided_sign_off();
ALTER TABLE public.close_task ENABLE ALWAYS TRIGGER close_task_reopens_only_when_voided;
"""


def upgrade() -> None:
    op.execute(TABLE)
    op.execute(GATE_STATE)
    op.execute(VOIDS)
    op.execute(STANDING)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
