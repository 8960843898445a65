"""The decision boundary and the trace's writers, enforced by PostgreSQL whoever connects.

Until now the rules that make a gate mean something lived in Python (`callbacks/decisions.py`). A process holding the
engine's or the callbacks service's database role could step around them with plain SQL. This revision puts them
where neither role can reach:

- A gate's requirements (tier, quorum, approver role, rule, preparer, requesters, due and expiry times) never change
  after the gate is opened; only its lifecycle moves, and only forward.
- A decision row is admitted only for a known, active human holding the gate's role, who neither prepared nor
  requested the work and has not voted on it, on an open, unexpired, undecided gate, with person-level proof that fits
  its channel (an Ed25519 signature for the signed callback, a mapped platform identity for Slack and Teams). The
  check runs as the table owner (`SECURITY DEFINER`), so the caller cannot disable or bypass it.
- Every trace event records the database role that wrote it (`writer`, inside the hashed content). The callbacks
  role may append only decision-side kinds; the engine role may append only engine kinds, and only as a machine
  principal. Pending events cannot be edited, and neither role can write the sealed log or move its head except
  through the two sealing functions, which copy content from the queue themselves.

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"

# The kinds only the decision side writes; everything else is the engine's.
CALLBACKS_KINDS = ("gate_decided", "decision_refused", "trace_exported", "command_refused")

# Processes that act for the engine without being a person: they may appear as the actor of engine events.
ENGINE_MACHINES = (
    ("countersign-cli", "Countersign command line"),
    ("countersign-worker", "Countersign worker"),
    ("countersign-demo", "Countersign demo"),
    ("countersign-drill", "Countersign drills"),
)

PRINCIPALS = """
ALTER TABLE principal ADD COLUMN active boolean NOT NULL DEFAULT true;
ALTER TABLE principal ADD COLUMN public_key bytea CHECK (public_key IS NULL OR length(public_key) = 32);
INSERT INTO principal (principal_id, kind, display_name, roles) VALUES
{machines}
ON CONFLICT (principal_id) DO NOTHING;
"""

GATE_REQUIREMENTS = r"""
CREATE FUNCTION refuse_gate_requirement_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'gates are never deleted (gate %)', OLD.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.gate_id, NEW.close_id, NEW.task, NEW.attempt, NEW.kind, NEW.tier, NEW.quorum, NEW.approver_role,
        NEW.rule, NEW.summary, NEW.prepared_by, NEW.requested_by, NEW.opened_at, NEW.due_at, NEW.expires_at)
       IS DISTINCT FROM
       (OLD.gate_id, OLD.close_id, OLD.task, OLD.attempt, OLD.kind, OLD.tier, OLD.quorum, OLD.approver_role,
        OLD.rule, OLD.summary, OLD.prepared_by, OLD.requested_by, OLD.opened_at, OLD.due_at, OLD.expires_at) THEN
        RAISE EXCEPTION 'gate %: its requirements (tier, quorum, approver role, rule, summary, preparer, requesters, '
                        'due and expiry times) cannot change once it is open', OLD.gate_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.lifecycle <> 'open' AND NEW.lifecycle IS DISTINCT FROM OLD.lifecycle THEN
        RAISE EXCEPTION 'gate % is % and cannot become %', OLD.gate_id, OLD.lifecycle, NEW.lifecycle
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER gate_requirements_fixed BEFORE UPDATE OR DELETE ON gate
    FOR EACH ROW EXECUTE FUNCTION refuse_gate_requirement_change();
ALTER TABLE gate ENABLE ALWAYS TRIGGER gate_requirements_fixed;
"""

DECISIONS = r"""
ALTER TABLE gate_decision ADD COLUMN proof jsonb NOT NULL DEFAULT '{}';

CREATE FUNCTION admit_gate_decision() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET enable_seqscan = off AS $$
DECLARE
    c record;
BEGIN
    -- Everything the decision is judged on, in one statement. Locking the gate row serialises decisions on one gate
    -- and keeps them from racing the engine applying its outcome.
    SELECT g.lifecycle, g.expires_at, g.quorum, g.approver_role, g.prepared_by, g.requested_by,
           p.principal_id IS NOT NULL AS known, p.kind, p.active, p.roles, p.public_key IS NOT NULL AS has_key,
           v.approvals, v.rejections, v.voted
      INTO c
      FROM gate g
      LEFT JOIN principal p ON p.principal_id = NEW.principal_id
      CROSS JOIN LATERAL (
          SELECT count(*) FILTER (WHERE d.decision = 'approve') AS approvals,
                 count(*) FILTER (WHERE d.decision = 'reject') AS rejections,
                 coalesce(bool_or(d.principal_id = NEW.principal_id), false) AS voted
            FROM gate_decision d WHERE d.gate_id = NEW.gate_id) v
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
            SELECT 1 FROM principal_identity i
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
END $$;
CREATE TRIGGER gate_decision_admitted BEFORE INSERT ON gate_decision
    FOR EACH ROW EXECUTE FUNCTION admit_gate_decision();
ALTER TABLE gate_decision ENABLE ALWAYS TRIGGER gate_decision_admitted;
ALTER TABLE gate_decision ENABLE ALWAYS TRIGGER gate_decision_immutable;
ALTER TABLE gate_decision ENABLE ALWAYS TRIGGER gate_decision_no_truncate;
"""

TRACE_WRITERS = r"""
ALTER TABLE trace_pending ADD COLUMN writer text;
ALTER TABLE trace_event ADD COLUMN writer text;  -- NULL only for events sealed before this revision

CREATE FUNCTION stamp_trace_writer() RETURNS trigger LANGUAGE plpgsql
    SET enable_seqscan = off AS $$
-- Runs as the inserting role (not SECURITY DEFINER), so current_user is who wrote the event.
BEGIN
    NEW.writer := current_user;
    IF current_user = '{callbacks}' THEN
        IF NOT (NEW.kind = ANY ('{callbacks_kinds}'::text[])) THEN
            RAISE EXCEPTION 'the callbacks role may not append % events', NEW.kind
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NEW.kind = 'gate_decided' AND NOT EXISTS (
            SELECT 1 FROM gate_decision
             WHERE gate_id = (NEW.payload->>'gate_id')::uuid AND principal_id = NEW.actor
               AND decision = NEW.payload->>'decision') THEN
            RAISE EXCEPTION 'a gate_decided event needs the decision row it reports (gate %, principal %)',
                NEW.payload->>'gate_id', NEW.actor USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSIF current_user = '{engine}' THEN
        IF NEW.kind = ANY ('{callbacks_kinds}'::text[]) THEN
            RAISE EXCEPTION 'the engine role may not append % events', NEW.kind
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM principal WHERE principal_id = NEW.actor AND kind = 'machine') THEN
            RAISE EXCEPTION 'the engine role appends events only as a machine principal, not as %', NEW.actor
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER trace_pending_writer BEFORE INSERT ON trace_pending
    FOR EACH ROW EXECUTE FUNCTION stamp_trace_writer();
ALTER TABLE trace_pending ENABLE ALWAYS TRIGGER trace_pending_writer;

CREATE TRIGGER trace_pending_unchanged BEFORE UPDATE ON trace_pending
    FOR EACH ROW EXECUTE FUNCTION refuse_trace_change();
ALTER TABLE trace_pending ENABLE ALWAYS TRIGGER trace_pending_unchanged;

-- Sealing, step 1: lock the head and the oldest pending events; return them with the close's version set merged in.
CREATE FUNCTION trace_claim_pending(p_limit integer)
    RETURNS TABLE (head_seq bigint, head_hash bytea, pending_id bigint, ts text, close_id uuid, actor text,
                   kind text, payload jsonb, version_set jsonb, writer text)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM 1 FROM trace_head WHERE singleton FOR UPDATE;
    RETURN QUERY
        SELECT h.seq, h.hash, q.pending_id, q.ts, q.close_id, q.actor, q.kind, q.payload,
               COALESCE(c.version_set, '{{}}'::jsonb) || q.version_set, q.writer
          FROM (SELECT * FROM trace_pending p ORDER BY p.pending_id LIMIT p_limit FOR UPDATE) q
          LEFT JOIN trace_context c ON c.close_id = q.close_id
          CROSS JOIN trace_head h
         ORDER BY q.pending_id;
END $$;

-- Sealing, step 2: chain the claimed events. The content is copied from the queue here, never taken from the caller;
-- the caller supplies only each event's canonical bytes and hash, and both are checked: the hash links to the head,
-- and the canonical bytes parse to exactly the event being sealed.
CREATE FUNCTION trace_seal_claimed(p_ids bigint[], p_canonical bytea[], p_hashes bytea[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET enable_seqscan = off AS $$
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
    SELECT seq, hash INTO v_seq, v_prev FROM trace_head WHERE singleton FOR UPDATE;
    -- One statement: the events as they will be sealed, built from the queue (never from the caller) with the
    -- caller's bytes beside them; the first that does not match; and the insert, which happens only if none fails.
    -- (No temporary table: a caller could plant one with its own triggers in front of this SECURITY DEFINER code.)
    WITH src AS MATERIALIZED (
        SELECT v_seq + u.n AS seq, p.ts, p.close_id, p.actor, p.kind, p.payload,
               COALESCE(c.version_set, '{{}}'::jsonb) || p.version_set AS version_set, p.writer,
               CASE WHEN u.n = 1 THEN v_prev ELSE p_hashes[u.n - 1] END AS prev_hash, u.h AS hash, u.canon
          FROM unnest(p_ids, p_canonical, p_hashes) WITH ORDINALITY AS u(id, canon, h, n)
          JOIN trace_pending p ON p.pending_id = u.id
          LEFT JOIN trace_context c ON c.close_id = p.close_id
    ), bad AS (
        SELECT min(s.seq) AS seq FROM src s
         WHERE s.hash IS DISTINCT FROM sha256(s.prev_hash || s.canon)
            OR convert_from(s.canon, 'UTF8')::jsonb IS DISTINCT FROM (
                   jsonb_build_object('seq', s.seq, 'ts', s.ts, 'close_id', s.close_id, 'actor', s.actor,
                                      'kind', s.kind, 'payload', s.payload, 'version_set', s.version_set)
                   || CASE WHEN s.writer IS NULL THEN '{{}}'::jsonb ELSE jsonb_build_object('writer', s.writer) END)
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
    DELETE FROM trace_pending WHERE pending_id = ANY (p_ids);
    UPDATE trace_head SET seq = v_seq + v_n, hash = p_hashes[v_n] WHERE singleton;
    RETURN v_n;
END $$;

REVOKE ALL ON FUNCTION trace_claim_pending(integer), trace_seal_claimed(bigint[], bytea[], bytea[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION trace_claim_pending(integer), trace_seal_claimed(bigint[], bytea[], bytea[])
    TO {engine}, {callbacks};

-- The SECURITY DEFINER functions above resolve names in `public`: nobody but the owner may create objects there
-- (PostgreSQL 15 and later already default to this).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

REVOKE UPDATE, DELETE ON trace_pending FROM {engine}, {callbacks};
REVOKE INSERT, UPDATE, DELETE ON trace_event FROM {engine}, {callbacks};
REVOKE UPDATE ON trace_head FROM {engine}, {callbacks};
GRANT SELECT ON trace_head TO {engine}, {callbacks};
"""


# The three functions that run on every decision and every seal carry `SET enable_seqscan = off`: each statement in
# them is a key lookup, and PL/pgSQL caches a generic plan per session. A plan made while a table was still small
# (a fresh deployment) would otherwise scan the table on every call for the life of the connection.


def _machines() -> str:
    return ",\n".join(f"    ('{pid}', 'machine', '{name}', '{{}}')" for pid, name in ENGINE_MACHINES)


def upgrade() -> None:
    op.execute(PRINCIPALS.format(machines=_machines()))
    op.execute(GATE_REQUIREMENTS)
    op.execute(DECISIONS)
    op.execute(
        TRACE_WRITERS.replace("{callbacks_kinds}", "{" + ",".join(CALLBACKS_KINDS) + "}")
        .replace("{callbacks}", CALLBACKS_ROLE)
        .replace("{engine}", ENGINE_ROLE)
        .replace("{{}}", "{}")
    )


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
