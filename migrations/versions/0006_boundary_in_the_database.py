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
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    g record;
    p record;
    v_approvals integer;
    v_rejections integer;
BEGIN
    -- One decision at a time per gate, and none while the engine applies the gate's outcome.
    SELECT * INTO g FROM gate WHERE gate_id = NEW.gate_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'decision refused: no gate %', NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT * INTO p FROM principal WHERE principal_id = NEW.principal_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'decision refused: principal % is not known', NEW.principal_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p.kind <> 'human' OR NOT p.active THEN
        RAISE EXCEPTION 'decision refused: principal % is not an active human', NEW.principal_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT (g.approver_role = ANY (p.roles)) THEN
        RAISE EXCEPTION 'decision refused: principal % lacks role % required by gate %',
            NEW.principal_id, g.approver_role, NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.principal_id = g.prepared_by OR NEW.principal_id = ANY (g.requested_by) THEN
        RAISE EXCEPTION 'decision refused: principal % prepared or requested the work under gate %',
            NEW.principal_id, NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF g.lifecycle <> 'open' OR (g.expires_at IS NOT NULL AND g.expires_at <= now()) THEN
        RAISE EXCEPTION 'decision refused: gate % is not open (lifecycle %, expires %)',
            NEW.gate_id, g.lifecycle, g.expires_at USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM gate_decision WHERE gate_id = NEW.gate_id AND principal_id = NEW.principal_id) THEN
        RAISE EXCEPTION 'decision refused: principal % already decided gate %', NEW.principal_id, NEW.gate_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT count(*) FILTER (WHERE decision = 'approve'), count(*) FILTER (WHERE decision = 'reject')
      INTO v_approvals, v_rejections FROM gate_decision WHERE gate_id = NEW.gate_id;
    IF v_rejections > 0 OR v_approvals >= g.quorum THEN
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
        IF p.public_key IS NULL THEN
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

CREATE FUNCTION stamp_trace_writer() RETURNS trigger LANGUAGE plpgsql AS $$
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
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    v_seq  bigint;
    v_prev bytea;
    v_n    integer := cardinality(p_ids);
    v_rows integer;
    v_bad  bigint;
BEGIN
    IF v_n = 0 THEN
        RETURN 0;
    END IF;
    IF cardinality(p_canonical) <> v_n OR cardinality(p_hashes) <> v_n THEN
        RAISE EXCEPTION 'trace_seal_claimed: % ids, % canonical forms, % hashes',
            v_n, cardinality(p_canonical), cardinality(p_hashes) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT seq, hash INTO v_seq, v_prev FROM trace_head WHERE singleton FOR UPDATE;
    INSERT INTO trace_event (seq, ts, close_id, actor, kind, payload, version_set, writer, prev_hash, hash)
        SELECT v_seq + u.n, p.ts, p.close_id, p.actor, p.kind, p.payload,
               COALESCE(c.version_set, '{{}}'::jsonb) || p.version_set, p.writer,
               CASE WHEN u.n = 1 THEN v_prev ELSE p_hashes[u.n - 1] END, u.h
          FROM unnest(p_ids, p_hashes) WITH ORDINALITY AS u(id, h, n)
          JOIN trace_pending p ON p.pending_id = u.id
          LEFT JOIN trace_context c ON c.close_id = p.close_id;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    IF v_rows <> v_n THEN
        RAISE EXCEPTION 'trace_seal_claimed: % of % pending events exist', v_rows, v_n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Raising here rolls back the inserts above with the caller's transaction.
    SELECT e.seq INTO v_bad
      FROM unnest(p_canonical) WITH ORDINALITY AS u(canon, n)
      JOIN trace_event e ON e.seq = v_seq + u.n
     WHERE e.hash IS DISTINCT FROM sha256(e.prev_hash || u.canon)
        OR convert_from(u.canon, 'UTF8')::jsonb IS DISTINCT FROM (
               jsonb_build_object('seq', e.seq, 'ts', e.ts, 'close_id', e.close_id, 'actor', e.actor, 'kind', e.kind,
                                  'payload', e.payload, 'version_set', e.version_set)
               || CASE WHEN e.writer IS NULL THEN '{{}}'::jsonb ELSE jsonb_build_object('writer', e.writer) END)
     ORDER BY e.seq LIMIT 1;
    IF FOUND THEN
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

REVOKE UPDATE, DELETE ON trace_pending FROM {engine}, {callbacks};
REVOKE INSERT, UPDATE, DELETE ON trace_event FROM {engine}, {callbacks};
REVOKE UPDATE ON trace_head FROM {engine}, {callbacks};
GRANT SELECT ON trace_head TO {engine}, {callbacks};
"""


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
