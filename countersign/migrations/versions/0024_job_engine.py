# ruff: noqa: E501  (SQL statements; a long line is one statement line)
"""Work as jobs on procrastinate (issue 25, ADR 0040): an advance is a job, enqueued by the change that makes it due.

- **The library's schema, in its own schema.** procrastinate 3.10.0's `schema.sql` (read from the installed package,
  whose version is checked) is installed by the owner into the schema `procrastinate`, and every function there runs
  with `search_path = pg_catalog, procrastinate, pg_temp`: its bare table names resolve only to the owner's tables.
- **The engine role claims and finishes jobs; it cannot write the job tables.** It may read them and execute the
  functions a worker needs (fetch, finish, worker registration and heartbeat), each SECURITY DEFINER. It may not
  insert, update or delete a row, nor call the library's own `defer` functions: new jobs come only from
  `public.countersign_enqueue_job`, which knows four kinds (advance a live run, a deadline wake-up, sign a checkpoint,
  deliver the outbox) and fixes each one's lock and queueing lock. A job only says "advance run X": the advance re-reads
  everything from our tables under our checks, so no job can forge a decision or skip a gate.
- **Enqueued in the transaction of the change.** Triggers enqueue an advance when a run is started, a decision is
  recorded, a task is made ready again, or a corrected bank feed is loaded for the run's books; a gate opened with a
  due time or an expiry schedules a wake-up at that time. Finished, blocked and waiting runs have no job.
- **Serialised per run, no pile-up.** An advance's lock and queueing lock are both `run:<close id>`: one runs at a time
  per run, and at most one waits. Wake-ups carry no lock (a scheduled job would hold back every later job of its
  lock), so they only enqueue the run's advance when their time comes.
- **A dead worker's jobs come back at once.** A worker holds a session advisory lock keyed by its procrastinate
  worker id for its life; `countersign_recover_stalled_jobs()` puts back to `todo` every `doing` job whose worker
  holds no such lock (killed, or pruned for a stale heartbeat).

Runs not closed when this revision is applied each get an advance job, and open gates their wake-ups.

Revision ID: 0024
Revises: 0023
"""

from importlib import metadata, resources

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

PROCRASTINATE_VERSION = "3.10.0"
ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"
JOBS_PATH = "pg_catalog, procrastinate, pg_temp"
FIXED_PATH = "pg_catalog, public, pg_temp"
LIVENESS_NAMESPACE = (
    1129530956  # the first key of a worker's liveness lock (countersign/store/jobs.py LIVENESS_NAMESPACE)
)


def _library_schema() -> str:
    installed = metadata.version("procrastinate")
    if installed != PROCRASTINATE_VERSION:
        raise RuntimeError(
            f"migration 0024 installs procrastinate {PROCRASTINATE_VERSION}'s schema, but {installed} is installed:"
            " install the pinned version (make install)"
        )
    return resources.files("procrastinate.sql").joinpath("schema.sql").read_text(encoding="utf-8")


# Every function the library created: a fixed path, no EXECUTE for PUBLIC; the ones a worker calls run as the owner.
HARDEN = f"""
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
             JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'procrastinate'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = {JOBS_PATH}', f);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END $$;
REVOKE ALL ON SCHEMA procrastinate FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA procrastinate FROM PUBLIC, {ENGINE_ROLE}, {CALLBACKS_ROLE};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA procrastinate FROM PUBLIC, {ENGINE_ROLE}, {CALLBACKS_ROLE};
GRANT USAGE ON SCHEMA procrastinate TO {ENGINE_ROLE};
GRANT SELECT ON procrastinate.procrastinate_jobs, procrastinate.procrastinate_workers,
    procrastinate.procrastinate_events TO {ENGINE_ROLE};
ALTER FUNCTION procrastinate.procrastinate_fetch_job_v2(character varying[], bigint) SECURITY DEFINER;
ALTER FUNCTION procrastinate.procrastinate_finish_job_v1(bigint, procrastinate.procrastinate_job_status, boolean) SECURITY DEFINER;
ALTER FUNCTION procrastinate.procrastinate_register_worker_v1() SECURITY DEFINER;
ALTER FUNCTION procrastinate.procrastinate_unregister_worker_v1(bigint) SECURITY DEFINER;
ALTER FUNCTION procrastinate.procrastinate_update_heartbeat_v1(bigint) SECURITY DEFINER;
ALTER FUNCTION procrastinate.procrastinate_prune_stalled_workers_v1(double precision) SECURITY DEFINER;
GRANT EXECUTE ON FUNCTION
    procrastinate.procrastinate_fetch_job_v2(character varying[], bigint),
    procrastinate.procrastinate_finish_job_v1(bigint, procrastinate.procrastinate_job_status, boolean),
    procrastinate.procrastinate_register_worker_v1(),
    procrastinate.procrastinate_unregister_worker_v1(bigint),
    procrastinate.procrastinate_update_heartbeat_v1(bigint),
    procrastinate.procrastinate_prune_stalled_workers_v1(double precision)
    TO {ENGINE_ROLE};
"""

ENQUEUE = f"""
CREATE FUNCTION public.countersign_enqueue_job(p_task text, p_close_id uuid DEFAULT NULL, p_at timestamptz DEFAULT NULL,
                                               p_key text DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_lock text;
    v_queueing text;
    v_args jsonb := '{{}}';
    v_id bigint;
BEGIN
    IF p_task = 'advance' THEN
        IF NOT EXISTS (SELECT 1 FROM public.close_run r WHERE r.close_id = p_close_id AND r.status <> 'closed') THEN
            RETURN NULL;  -- a closed or unknown run is never advanced
        END IF;
        v_lock := 'run:' || p_close_id;
        v_queueing := v_lock;
        v_args := jsonb_build_object('close_id', p_close_id::text);
    ELSIF p_task = 'wake' THEN
        IF p_at IS NULL OR p_key IS NULL OR p_close_id IS NULL THEN
            RAISE EXCEPTION 'countersign_enqueue_job: a wake-up needs a run, a time and a key' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_queueing := 'wake:' || p_key;
        v_args := jsonb_build_object('close_id', p_close_id::text);
    ELSIF p_task = 'sign_checkpoint' THEN
        v_lock := 'checkpoint';
        v_queueing := 'checkpoint';
    ELSIF p_task = 'deliver' THEN
        v_queueing := 'deliver';
    ELSE
        RAISE EXCEPTION 'countersign_enqueue_job: % is not a job kind (advance, wake, sign_checkpoint, deliver)', p_task
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A job that waits already and runs no later than asked does: share-lock it and add nothing. The share lock keeps
    -- a worker's fetch (FOR UPDATE SKIP LOCKED) off it until this transaction commits, so the job sees the change;
    -- many changes on one run share it instead of queueing on the row (as ON CONFLICT DO UPDATE would make them).
    IF p_task <> 'wake' THEN
        PERFORM 1 FROM procrastinate.procrastinate_jobs j
         WHERE j.queueing_lock = v_queueing AND j.status = 'todo'
           AND (j.scheduled_at IS NULL OR (p_at IS NOT NULL AND j.scheduled_at <= p_at))
           FOR SHARE OF j;
        IF FOUND THEN
            RETURN NULL;
        END IF;
    END IF;
    -- At most one waiting job per queueing lock: a second request leaves one job, due at the earlier time (a wake-up
    -- takes its key's new time: a moved deadline).
    INSERT INTO procrastinate.procrastinate_jobs AS j (queue_name, task_name, lock, queueing_lock, args, scheduled_at)
        VALUES ('countersign', p_task, v_lock, v_queueing, v_args, p_at)
        ON CONFLICT (queueing_lock) WHERE status = 'todo' DO UPDATE
            SET scheduled_at = CASE WHEN p_task = 'wake' THEN EXCLUDED.scheduled_at
                                    WHEN EXCLUDED.scheduled_at IS NULL OR j.scheduled_at IS NULL THEN NULL
                                    ELSE least(j.scheduled_at, EXCLUDED.scheduled_at) END
            WHERE j.scheduled_at IS NOT NULL
              AND (EXCLUDED.scheduled_at IS NULL OR EXCLUDED.scheduled_at IS DISTINCT FROM j.scheduled_at)
        RETURNING j.id INTO v_id;
    RETURN v_id;
END $$;
REVOKE ALL ON FUNCTION public.countersign_enqueue_job(text, uuid, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.countersign_enqueue_job(text, uuid, timestamptz, text) TO {ENGINE_ROLE};

CREATE FUNCTION public.countersign_recover_stalled_jobs() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_job record;
    v_n integer := 0;
BEGIN
    FOR v_job IN
        SELECT j.id, j.queueing_lock FROM procrastinate.procrastinate_jobs j
        WHERE j.status = 'doing' AND (j.worker_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM pg_catalog.pg_locks l
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
              AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
              AND l.classid = {LIVENESS_NAMESPACE}::oid AND l.objid = j.worker_id::oid))
        FOR UPDATE OF j SKIP LOCKED
    LOOP
        IF v_job.queueing_lock IS NOT NULL AND EXISTS (
            SELECT 1 FROM procrastinate.procrastinate_jobs o WHERE o.queueing_lock = v_job.queueing_lock AND o.status = 'todo')
        THEN  -- the same work already waits: this one ends
            PERFORM procrastinate.procrastinate_finish_job_v1(v_job.id, 'failed', false);
        ELSE
            PERFORM procrastinate.procrastinate_retry_job_v2(v_job.id, now(), NULL, NULL, NULL);
        END IF;
        v_n := v_n + 1;
    END LOOP;
    RETURN v_n;
END $$;
REVOKE ALL ON FUNCTION public.countersign_recover_stalled_jobs() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.countersign_recover_stalled_jobs() TO {ENGINE_ROLE};

-- Every run the engine can move on by itself (status running) gets an advance: a worker's start-up sweep, so that a
-- job dropped by hand (the engine role may finish any job) costs at most a worker restart.
CREATE FUNCTION public.countersign_enqueue_running_runs() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_n integer := 0;
    v_run uuid;
BEGIN
    FOR v_run IN SELECT r.close_id FROM public.close_run r WHERE r.status = 'running' LOOP
        PERFORM public.countersign_enqueue_job('advance', v_run);
        v_n := v_n + 1;
    END LOOP;
    RETURN v_n;
END $$;
REVOKE ALL ON FUNCTION public.countersign_enqueue_running_runs() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.countersign_enqueue_running_runs() TO {ENGINE_ROLE};
"""

TRIGGERS = f"""
CREATE FUNCTION public.job_on_run_started() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
BEGIN
    PERFORM public.countersign_enqueue_job('advance', NEW.close_id);
    RETURN NULL;
END $$;
CREATE TRIGGER close_run_job AFTER INSERT ON public.close_run
    FOR EACH ROW EXECUTE FUNCTION public.job_on_run_started();

CREATE FUNCTION public.job_on_decision() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
BEGIN
    PERFORM public.countersign_enqueue_job('advance', (SELECT g.close_id FROM public.gate g WHERE g.gate_id = NEW.gate_id));
    RETURN NULL;
END $$;
CREATE TRIGGER gate_decision_job AFTER INSERT ON public.gate_decision
    FOR EACH ROW EXECUTE FUNCTION public.job_on_decision();

CREATE FUNCTION public.job_on_task_ready() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
BEGIN
    PERFORM public.countersign_enqueue_job('advance', NEW.close_id);
    RETURN NULL;
END $$;
CREATE TRIGGER close_task_job AFTER UPDATE OF status ON public.close_task
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status IS DISTINCT FROM 'pending')
    EXECUTE FUNCTION public.job_on_task_ready();

CREATE FUNCTION public.job_on_feed_loaded() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_run uuid;
BEGIN
    FOR v_run IN SELECT r.close_id FROM public.close_run r WHERE r.book_set_id = NEW.book_set_id AND r.status <> 'closed' LOOP
        PERFORM public.countersign_enqueue_job('advance', v_run);
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER bank_feed_job AFTER INSERT ON public.bank_feed
    FOR EACH ROW EXECUTE FUNCTION public.job_on_feed_loaded();

-- A gate's due time (the overdue reminder) and expiry each wake its run when they come; a moved time moves the wake.
CREATE FUNCTION public.job_on_gate_deadlines() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
BEGIN
    IF NEW.lifecycle <> 'open' THEN
        RETURN NULL;
    END IF;
    PERFORM public.countersign_enqueue_job('wake', NEW.close_id, NEW.due_at, 'gate:' || NEW.gate_id || ':due');
    IF NEW.expires_at IS NOT NULL THEN
        PERFORM public.countersign_enqueue_job('wake', NEW.close_id, NEW.expires_at, 'gate:' || NEW.gate_id || ':expires');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER gate_deadline_jobs AFTER INSERT OR UPDATE OF due_at, expires_at ON public.gate
    FOR EACH ROW EXECUTE FUNCTION public.job_on_gate_deadlines();

REVOKE ALL ON FUNCTION public.job_on_run_started(), public.job_on_decision(), public.job_on_task_ready(),
    public.job_on_feed_loaded(), public.job_on_gate_deadlines() FROM PUBLIC;
ALTER TABLE public.close_run ENABLE ALWAYS TRIGGER close_run_job;
ALTER TABLE public.gate_decision ENABLE ALWAYS TRIGGER gate_decision_job;
ALTER TABLE public.close_task ENABLE ALWAYS TRIGGER close_task_job;
ALTER TABLE public.bank_feed ENABLE ALWAYS TRIGGER bank_feed_job;
ALTER TABLE public.gate ENABLE ALWAYS TRIGGER gate_deadline_jobs;
"""

BACKFILL = """
SELECT public.countersign_enqueue_job('advance', r.close_id) FROM public.close_run r WHERE r.status <> 'closed';
SELECT public.countersign_enqueue_job('wake', g.close_id, g.due_at, 'gate:' || g.gate_id || ':due')
    FROM public.gate g WHERE g.lifecycle = 'open';
SELECT public.countersign_enqueue_job('wake', g.close_id, g.expires_at, 'gate:' || g.gate_id || ':expires')
    FROM public.gate g WHERE g.lifecycle = 'open' AND g.expires_at IS NOT NULL;
"""


def _run(sql: str) -> None:
    """psycopg's own connection, without parameters: the SQL has bare '%' (the library's messages) and ':name'."""
    op.get_bind().connection.driver_connection.execute(sql)  # type: ignore[union-attr]


def upgrade() -> None:
    _run("CREATE SCHEMA procrastinate")
    _run("SET LOCAL search_path = procrastinate, pg_catalog")
    _run(_library_schema())
    _run("SET LOCAL search_path = public, pg_catalog")
    for sql in (HARDEN, ENQUEUE, TRIGGERS, BACKFILL):
        _run(sql)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
