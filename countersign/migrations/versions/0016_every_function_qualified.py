# ruff: noqa: E501  (the definitions are as PostgreSQL prints them; a long line is one SQL statement line)
"""Every function names every table `public.` (issue 20 review: six functions still relied on the fixed search path).

Migration 0015 gave every function `search_path = pg_catalog, public, pg_temp` and rewrote most of them with
qualified names. Six older ones still named tables bare: the decision admission trigger (`admit_gate_decision`),
`gate_applied_with`, the supervisor's transition check (`refuse_illegal_transition`), `supervise_close_run` and the two
sealing functions (`trace_claim_pending`, `trace_seal_claimed`). Each is re-created here exactly as head defined it,
with its `SET search_path` written into its definition and every table it reads or writes named `public.`, so no
name it uses can be shadowed even if a role were ever given a schema of its own. `CREATE OR REPLACE` keeps each
function's owner, grants and triggers. `tests/test_database_owns_its_names.py` holds every function to both rules.

Revision ID: 0016
Revises: 0015
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

FUNCTIONS = {
    "admit_gate_decision": r"""
CREATE OR REPLACE FUNCTION public.admit_gate_decision()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET enable_seqscan TO 'off'
AS $function$
DECLARE
    c record;
BEGIN
    -- Everything the decision is judged on, in one statement. Locking the gate row serialises decisions on one gate
    -- and keeps them from racing the engine applying its outcome.
    SELECT g.lifecycle, g.expires_at, g.quorum, g.approver_role, g.prepared_by, g.requested_by,
           p.principal_id IS NOT NULL AS known, p.kind, p.active, p.roles, p.public_key IS NOT NULL AS has_key,
           v.approvals, v.rejections, v.voted
      INTO c
      FROM public.gate g
      LEFT JOIN public.principal p ON p.principal_id = NEW.principal_id
      CROSS JOIN LATERAL (
          SELECT count(*) FILTER (WHERE d.decision = 'approve') AS approvals,
                 count(*) FILTER (WHERE d.decision = 'reject') AS rejections,
                 coalesce(bool_or(d.principal_id = NEW.principal_id), false) AS voted
            FROM public.gate_decision d WHERE d.gate_id = NEW.gate_id) v
     WHERE g.gate_id = NEW.gate_id
       FOR UPDATE OF g;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'decision refused: no gate %', NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT c.known THEN
        RAISE EXCEPTION 'decision refused: principal % is not known', NEW.principal_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.kind <> 'human' OR NOT c.active THEN
        RAISE EXCEPTION 'decision refused: principal % is not an active human', NEW.principal_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT (c.approver_role = ANY (c.roles)) THEN
        RAISE EXCEPTION 'decision refused: principal % lacks role % required by gate %',
            NEW.principal_id, c.approver_role, NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.principal_id = c.prepared_by OR NEW.principal_id = ANY (c.requested_by) THEN
        RAISE EXCEPTION 'decision refused: principal % prepared or requested the work under gate %',
            NEW.principal_id, NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.lifecycle <> 'open' OR (c.expires_at IS NOT NULL AND c.expires_at <= now()) THEN
        RAISE EXCEPTION 'decision refused: gate % is not open (lifecycle %, expires %)',
            NEW.gate_id, c.lifecycle, c.expires_at USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.voted THEN
        RAISE EXCEPTION 'decision refused: principal % already decided gate %', NEW.principal_id, NEW.gate_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.rejections > 0 OR c.approvals >= c.quorum THEN
        RAISE EXCEPTION 'decision refused: gate % is already decided', NEW.gate_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.channel = 'signed_callback' THEN
        IF NEW.proof->>'kind' IS DISTINCT FROM 'ed25519'
           OR jsonb_typeof(NEW.proof->'signature') IS DISTINCT FROM 'string'
           OR jsonb_typeof(NEW.proof->'signed_at') IS DISTINCT FROM 'number' THEN
            RAISE EXCEPTION 'decision refused: a signed callback needs the person''s Ed25519 signature as proof'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NOT c.has_key THEN
            RAISE EXCEPTION 'decision refused: principal % has no registered public key', NEW.principal_id
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF NEW.channel IN ('slack', 'teams') THEN
        IF NEW.proof->>'kind' IS DISTINCT FROM NEW.channel OR NOT EXISTS (
            SELECT 1 FROM public.principal_identity i
             WHERE i.channel = NEW.channel
               AND i.tenant = NEW.proof->>'tenant'
               AND i.external_id = NEW.proof->>'external_id'
               AND i.principal_id = NEW.principal_id) THEN
            RAISE EXCEPTION 'decision refused: the % identity in the proof does not belong to principal %',
                NEW.channel, NEW.principal_id USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSE
        RAISE EXCEPTION 'decision refused: unknown channel %', NEW.channel USING ERRCODE = 'insufficient_privilege';
    END IF;
    NEW.decided_at := now();  -- nobody back-dates a decision
    RETURN NEW;
END $function$
""",
    "gate_applied_with": r"""
CREATE OR REPLACE FUNCTION public.gate_applied_with(p_close uuid, p_task text, p_attempt integer, p_kind text, p_status text)
 RETURNS boolean
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
    SELECT EXISTS (
        SELECT 1 FROM public.gate_state
         WHERE close_id = p_close AND task = p_task AND attempt = p_attempt AND kind = p_kind
           AND lifecycle = 'applied' AND status = p_status)
$function$
""",
    "refuse_illegal_transition": r"""
CREATE OR REPLACE FUNCTION public.refuse_illegal_transition(p_machine text, p_source text, p_target text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
    IF p_source IS DISTINCT FROM p_target AND NOT EXISTS (
        SELECT 1 FROM public.lifecycle_transition WHERE machine = p_machine AND source = p_source AND target = p_target) THEN
        RAISE EXCEPTION 'illegal transition: % cannot go from % to %', p_machine, p_source, p_target
            USING ERRCODE = 'check_violation',
                  HINT = 'the legal moves are the rows of lifecycle_transition (countersign/engine/lifecycle.py)';
    END IF;
END $function$
""",
    "supervise_close_run": r"""
CREATE OR REPLACE FUNCTION public.supervise_close_run()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
        SELECT 1 FROM public.close_task WHERE close_id = NEW.close_id AND status <> 'done') THEN
        RAISE EXCEPTION 'illegal transition: run % cannot go from % to closed while a task is not done',
            OLD.close_id, OLD.status USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $function$
""",
    "trace_claim_pending": r"""
CREATE OR REPLACE FUNCTION public.trace_claim_pending(p_limit integer)
 RETURNS TABLE(head_seq bigint, head_hash bytea, pending_id bigint, ts text, close_id uuid, actor text, kind text, payload jsonb, version_set jsonb, writer text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
BEGIN
    PERFORM 1 FROM public.trace_head WHERE singleton FOR UPDATE;
    RETURN QUERY
        SELECT h.seq, h.hash, q.pending_id, q.ts, q.close_id, q.actor, q.kind, q.payload,
               COALESCE(c.version_set, '{}'::jsonb) || q.version_set, q.writer
          FROM (SELECT * FROM public.trace_pending p ORDER BY p.pending_id LIMIT p_limit FOR UPDATE) q
          LEFT JOIN public.trace_context c ON c.close_id = q.close_id
          CROSS JOIN public.trace_head h
         ORDER BY q.pending_id;
END $function$
""",
    "trace_seal_claimed": r"""
CREATE OR REPLACE FUNCTION public.trace_seal_claimed(p_ids bigint[], p_canonical bytea[], p_hashes bytea[])
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET enable_seqscan TO 'off'
AS $function$
DECLARE
    v_seq  bigint;
    v_prev bytea;
    v_n    integer := cardinality(p_ids);
    v_rows   bigint;
    v_sealed bigint;
    v_bad    bigint;
BEGIN
    IF v_n = 0 THEN
        RETURN 0;
    END IF;
    IF cardinality(p_canonical) <> v_n OR cardinality(p_hashes) <> v_n THEN
        RAISE EXCEPTION 'trace_seal_claimed: % ids, % canonical forms, % hashes',
            v_n, cardinality(p_canonical), cardinality(p_hashes) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT seq, hash INTO v_seq, v_prev FROM public.trace_head WHERE singleton FOR UPDATE;
    -- One statement: the events as they will be sealed, built from the queue (never from the caller) with the
    -- caller's bytes beside them; the first that does not match; and the insert, which happens only if none fails.
    -- (No temporary table: a caller could plant one with its own triggers in front of this SECURITY DEFINER code.)
    WITH src AS MATERIALIZED (
        SELECT v_seq + u.n AS seq, p.ts, p.close_id, p.actor, p.kind, p.payload,
               COALESCE(c.version_set, '{}'::jsonb) || p.version_set AS version_set, p.writer,
               CASE WHEN u.n = 1 THEN v_prev ELSE p_hashes[u.n - 1] END AS prev_hash, u.h AS hash, u.canon
          FROM unnest(p_ids, p_canonical, p_hashes) WITH ORDINALITY AS u(id, canon, h, n)
          JOIN public.trace_pending p ON p.pending_id = u.id
          LEFT JOIN public.trace_context c ON c.close_id = p.close_id
    ), bad AS (
        SELECT min(s.seq) AS seq FROM src s
         WHERE s.hash IS DISTINCT FROM sha256(s.prev_hash || s.canon)
            OR convert_from(s.canon, 'UTF8')::jsonb IS DISTINCT FROM (
                   jsonb_build_object('seq', s.seq, 'ts', s.ts, 'close_id', s.close_id, 'actor', s.actor,
                                      'kind', s.kind, 'payload', s.payload, 'version_set', s.version_set)
                   || CASE WHEN s.writer IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('writer', s.writer) END)
    ), sealed AS (
        INSERT INTO trace_event (seq, ts, close_id, actor, kind, payload, version_set, writer, prev_hash, hash)
        SELECT seq, ts, close_id, actor, kind, payload, version_set, writer, prev_hash, hash FROM src
         WHERE (SELECT seq FROM bad) IS NULL
        RETURNING 1
    )
    SELECT (SELECT seq FROM bad), (SELECT count(*) FROM src), (SELECT count(*) FROM sealed)
      INTO v_bad, v_rows, v_sealed;
    IF v_rows <> v_n THEN
        RAISE EXCEPTION 'trace_seal_claimed: % of % pending events exist', v_rows, v_n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_bad IS NOT NULL OR v_sealed <> v_n THEN
        RAISE EXCEPTION 'trace_seal_claimed: event % does not match its canonical form or its hash', v_bad
            USING ERRCODE = 'data_exception';
    END IF;
    DELETE FROM public.trace_pending WHERE pending_id = ANY (p_ids);
    UPDATE public.trace_head SET seq = v_seq + v_n, hash = p_hashes[v_n] WHERE singleton;
    RETURN v_n;
END $function$
""",
}


def upgrade() -> None:
    for definition in FUNCTIONS.values():
        op.execute(definition)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
