"""The supervisor in the database: one transition table per machine, triggers that refuse every other move.

Runs, tasks and gates change state only along `lifecycle_transition` (the same rows as
`countersign.engine.lifecycle.TRANSITIONS`;
a test compares them). A process that bypasses Python and updates a status column by hand meets the same table:

- `close_task.status`, `close_run.status` and `gate.lifecycle` move only along a row of the table (a row starts in
  its machine's first state: pending, running, open).
- Escalation is a typed outcome: `close_task.escalation` names why work was handed to a person. Once set it is never
  cleared (a later escalation may name another reason). A task halts only with a reason. Escalated work leaves
  `halted` for `pending` only through its escalation gate's outcome (approved by a person, or expired undecided:
  the re-run stays escalated and needs a human gate before it completes), and any task reaches
  `done` from `awaiting_gate` only through an applied, approved approval gate of its attempt. An escalated task
  never completes without one (no `running -> done`).
- A run closes only when every one of its tasks is done.

`close_run.workflow` names the workflow file the close runs.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TABLE = r"""
CREATE TABLE lifecycle_transition (
    machine text NOT NULL CHECK (machine IN ('run', 'task', 'gate')),
    source  text NOT NULL,
    target  text NOT NULL,
    name    text NOT NULL,
    PRIMARY KEY (machine, source, target),
    CHECK (source <> target)
);

INSERT INTO lifecycle_transition (machine, source, target, name) VALUES
    ('run', 'running', 'halted', 'a task escalated'),
    ('run', 'running', 'awaiting_approval', 'waiting on a gate'),
    ('run', 'running', 'blocked', 'a task was rejected or failed'),
    ('run', 'running', 'closed', 'every task done'),
    ('run', 'halted', 'running', 'work resumed'),
    ('run', 'halted', 'awaiting_approval', 'waiting on a gate'),
    ('run', 'halted', 'blocked', 'a task was rejected or failed'),
    ('run', 'halted', 'closed', 'every task done'),
    ('run', 'awaiting_approval', 'running', 'work resumed'),
    ('run', 'awaiting_approval', 'halted', 'a task escalated'),
    ('run', 'awaiting_approval', 'blocked', 'a task was rejected or failed'),
    ('run', 'awaiting_approval', 'closed', 'every task done'),
    ('run', 'blocked', 'running', 'work resumed'),
    ('run', 'blocked', 'halted', 'a task escalated'),
    ('run', 'blocked', 'awaiting_approval', 'waiting on a gate'),
    ('run', 'blocked', 'closed', 'every task done'),
    ('task', 'pending', 'running', 'start'),
    ('task', 'running', 'pending', 'retry later'),
    ('task', 'running', 'awaiting_gate', 'record result awaiting gate'),
    ('task', 'running', 'done', 'complete without gate'),
    ('task', 'running', 'halted', 'escalate'),
    ('task', 'running', 'failed', 'fail'),
    ('task', 'awaiting_gate', 'done', 'gate approved'),
    ('task', 'awaiting_gate', 'rejected', 'gate rejected'),
    ('task', 'awaiting_gate', 'pending', 'gate expired: run again'),
    ('task', 'awaiting_gate', 'halted', 'escalate while awaiting gate'),
    ('task', 'awaiting_gate', 'failed', 'decision proof invalid'),
    ('task', 'halted', 'pending', 'escalation approved or expired: run again'),
    ('task', 'halted', 'rejected', 'escalation rejected'),
    ('task', 'halted', 'failed', 'decision proof invalid'),
    ('task', 'failed', 'pending', 'dead letter replayed'),
    ('gate', 'open', 'applied', 'outcome applied'),
    ('gate', 'open', 'expired', 'expired undecided'),
    ('gate', 'open', 'cancelled', 'cancelled');

GRANT SELECT ON lifecycle_transition TO countersign_engine, countersign_callbacks;

ALTER TABLE close_run ADD COLUMN workflow text NOT NULL DEFAULT 'close';

ALTER TABLE close_task ADD COLUMN escalation text NULL CHECK (escalation IN (
    'anomaly_over_tolerance', 'contradictory_evidence', 'missing_parameter', 'suspected_injection',
    'budget_exhausted', 'specialist_dead_lettered', 'ungrounded_narrative', 'gate_expired'));
"""

# The triggers run as the owner (SECURITY DEFINER) so what they read cannot be hidden from them by grants, with a
# fixed search_path so nobody plants a look-alike table in front of them.
TRIGGERS = r"""
CREATE FUNCTION refuse_illegal_transition(p_machine text, p_source text, p_target text) RETURNS void
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF p_source IS DISTINCT FROM p_target AND NOT EXISTS (
        SELECT 1 FROM lifecycle_transition WHERE machine = p_machine AND source = p_source AND target = p_target) THEN
        RAISE EXCEPTION 'illegal transition: % cannot go from % to %', p_machine, p_source, p_target
            USING ERRCODE = 'check_violation',
                  HINT = 'the legal moves are the rows of lifecycle_transition (countersign/engine/lifecycle.py)';
    END IF;
END $$;

CREATE FUNCTION refuse_illegal_start(p_machine text, p_state text, p_first text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_state IS DISTINCT FROM p_first THEN
        RAISE EXCEPTION 'illegal transition: a % starts %, not %', p_machine, p_first, p_state
            USING ERRCODE = 'check_violation';
    END IF;
END $$;

-- Whether the task's gate of this attempt, of this kind, was applied by the engine with this outcome.
CREATE FUNCTION gate_applied_with(p_close uuid, p_task text, p_attempt integer, p_kind text, p_status text)
    RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT EXISTS (
        SELECT 1 FROM gate_state
         WHERE close_id = p_close AND task = p_task AND attempt = p_attempt AND kind = p_kind
           AND lifecycle = 'applied' AND status = p_status)
$$;

CREATE FUNCTION supervise_close_task() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM refuse_illegal_start('task', NEW.status, 'pending');
        RETURN NEW;
    END IF;
    IF OLD.escalation IS NOT NULL AND NEW.escalation IS NULL THEN
        RAISE EXCEPTION 'illegal transition: task %/% is escalated (%) and its escalation is never cleared',
            OLD.close_id, OLD.task, OLD.escalation USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.status = NEW.status THEN
        RETURN NEW;
    END IF;
    PERFORM refuse_illegal_transition('task', OLD.status, NEW.status);
    IF NEW.status = 'halted' AND NEW.escalation IS NULL THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from % to halted without an escalation reason',
            OLD.task, OLD.status USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.status = 'done' AND OLD.status <> 'awaiting_gate' AND NEW.escalation IS NOT NULL THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from % to done: escalated work (%) completes only '
                        'through a human gate', OLD.task, OLD.status, NEW.escalation
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.status = 'done' AND OLD.status = 'awaiting_gate'
       AND NOT gate_applied_with(NEW.close_id, NEW.task, NEW.attempt, 'approval', 'approved') THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from awaiting_gate to done without an applied, '
                        'approved approval gate for attempt %', OLD.task, NEW.attempt
            USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.status = 'halted' AND NEW.status = 'pending'
       AND NOT gate_applied_with(OLD.close_id, OLD.task, OLD.attempt, 'escalation', 'approved')
       AND NOT EXISTS (SELECT 1 FROM gate WHERE close_id = OLD.close_id AND task = OLD.task
                          AND attempt = OLD.attempt AND kind = 'escalation' AND lifecycle = 'expired') THEN
        RAISE EXCEPTION 'illegal transition: task % cannot go from halted to pending until the escalation gate of '
                        'attempt % is approved by a person or expired', OLD.task, OLD.attempt
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER close_task_supervised BEFORE INSERT OR UPDATE ON close_task
    FOR EACH ROW EXECUTE FUNCTION supervise_close_task();
ALTER TABLE close_task ENABLE ALWAYS TRIGGER close_task_supervised;

CREATE FUNCTION supervise_close_run() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM refuse_illegal_start('run', NEW.status, 'running');
        RETURN NEW;
    END IF;
    IF OLD.status = NEW.status THEN
        RETURN NEW;
    END IF;
    PERFORM refuse_illegal_transition('run', OLD.status, NEW.status);
    IF NEW.status = 'closed' AND EXISTS (
        SELECT 1 FROM close_task WHERE close_id = NEW.close_id AND status <> 'done') THEN
        RAISE EXCEPTION 'illegal transition: run % cannot go from % to closed while a task is not done',
            OLD.close_id, OLD.status USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER close_run_supervised BEFORE INSERT OR UPDATE ON close_run
    FOR EACH ROW EXECUTE FUNCTION supervise_close_run();
ALTER TABLE close_run ENABLE ALWAYS TRIGGER close_run_supervised;

-- Fires after gate_requirements_fixed (0006; triggers fire in name order), whose forward-only rule for the
-- lifecycle keeps its message; this one holds the lifecycle to the table.
CREATE FUNCTION supervise_gate() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM refuse_illegal_start('gate', NEW.lifecycle, 'open');
        RETURN NEW;
    END IF;
    PERFORM refuse_illegal_transition('gate', OLD.lifecycle, NEW.lifecycle);
    RETURN NEW;
END $$;
CREATE TRIGGER gate_supervised BEFORE INSERT OR UPDATE ON gate
    FOR EACH ROW EXECUTE FUNCTION supervise_gate();
ALTER TABLE gate ENABLE ALWAYS TRIGGER gate_supervised;

REVOKE ALL ON FUNCTION refuse_illegal_transition(text, text, text), refuse_illegal_start(text, text, text),
    gate_applied_with(uuid, text, integer, text, text), supervise_close_task(), supervise_close_run(),
    supervise_gate() FROM PUBLIC;
"""


def upgrade() -> None:
    op.execute(TABLE)
    op.execute(TRIGGERS)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
