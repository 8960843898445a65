# ruff: noqa: E501  (SQL statements; a long line is one statement line)
"""A person's own key: passkeys, enrolment, board sessions, and proof strength per tier (issue 21).

- **Proof strength per tier.** `policy_tier.accepted_proofs` (seeded by the owner from risk.yaml `proofs`) says what
  may prove that a person decided a gate of that tier: `platform_identity` (a Slack or Teams user id), `ed25519`
  (the person's key, over the signed callback) or `passkey` (the person's key, on the Close Board). `admit_gate`
  stamps the tier's list into `gate.accepted_proofs` as the gate opens, whatever the caller wrote, and the list is
  frozen with the gate's other requirements. `admit_gate_decision` refuses a row whose channel's proof is not in
  the gate's list, whoever connects, and a rejection without a reason.
- **Passkeys.** `principal_passkey` holds each person's WebAuthn credentials (COSE public key, sign count). No
  service role may write it: a credential enters only through `redeem_passkey_enrolment`, which needs a one-time,
  expiring token whose SHA-256 the owner stored in `passkey_enrolment` (`countersign principals enroll NAME`);
  a credential leaves only through `revoke_passkey`; its sign count only rises, through `record_passkey_use`.
  Each enrolment and revocation is a trace event the database writes itself; an enrolment also queues a Slack
  direct message to the person (only the enrolment may write that notice).
- **Board state.** `board_session` (a signed-in person: the SHA-256 of the cookie's token, never the token) and
  `webauthn_challenge` (each challenge the board issued, used once) belong to the callbacks role.
- **Board decisions.** The new channel `board` carries a passkey assertion as proof; the database checks that the
  credential belongs to that active principal and is not revoked; the engine re-verifies the assertion before the
  decision counts (countersign/engine/gates.py), as it re-verifies Ed25519 signatures.
- `gate_decided` events now carry the decision's nonce and proof, so an evidence bundle can check it offline.

Revision ID: 0017
Revises: 0016
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"
SERVICE_ROLES = f"{ENGINE_ROLE}, {CALLBACKS_ROLE}"

PROOF_COLUMNS = r"""
ALTER TABLE public.policy_tier ADD COLUMN accepted_proofs text[] NOT NULL DEFAULT ARRAY['ed25519', 'passkey'];
ALTER TABLE public.policy_tier ADD CONSTRAINT policy_tier_accepted_proofs_known
    CHECK (accepted_proofs <@ ARRAY['platform_identity', 'ed25519', 'passkey']
           AND (NOT gated OR cardinality(accepted_proofs) >= 1));
ALTER TABLE public.gate ADD COLUMN accepted_proofs text[];
-- Gates opened before this migration keep what they accepted when they opened: any proof.
UPDATE public.gate SET accepted_proofs = ARRAY['platform_identity', 'ed25519', 'passkey'];
ALTER TABLE public.gate ALTER COLUMN accepted_proofs SET NOT NULL;
ALTER TABLE public.gate ADD CONSTRAINT gate_accepted_proofs_known
    CHECK (accepted_proofs <@ ARRAY['platform_identity', 'ed25519', 'passkey'] AND cardinality(accepted_proofs) >= 1);
"""

PASSKEY_TABLES = f"""
CREATE TABLE public.passkey_enrolment (
    enrolment_id  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    principal_id  text NOT NULL REFERENCES public.principal,
    token_sha256  bytea NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
    user_handle   bytea NOT NULL DEFAULT gen_random_bytes_16() CHECK (length(user_handle) = 16),
    issued_by     text NOT NULL,
    issued_at     timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    redeemed_at   timestamptz,
    CHECK (expires_at > issued_at AND expires_at <= issued_at + interval '7 days')
);
CREATE TABLE public.principal_passkey (
    credential_id text PRIMARY KEY CHECK (credential_id ~ '^[A-Za-z0-9_-]+$' AND length(credential_id) BETWEEN 16 AND 1364),
    principal_id  text NOT NULL REFERENCES public.principal,
    public_key    bytea NOT NULL CHECK (length(public_key) BETWEEN 16 AND 1024),
    sign_count    bigint NOT NULL DEFAULT 0 CHECK (sign_count >= 0),
    label         text NOT NULL CHECK (length(label) BETWEEN 1 AND 80),
    enrolment_id  uuid NOT NULL UNIQUE REFERENCES public.passkey_enrolment,
    user_handle   bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX principal_passkey_by_principal ON public.principal_passkey (principal_id);
GRANT SELECT ON public.principal_passkey TO {SERVICE_ROLES};

CREATE TABLE public.board_session (
    session_sha256 bytea PRIMARY KEY CHECK (length(session_sha256) = 32),
    principal_id   text NOT NULL REFERENCES public.principal,
    credential_id  text NOT NULL REFERENCES public.principal_passkey,
    csrf_token     text NOT NULL CHECK (length(csrf_token) BETWEEN 32 AND 128),
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    ended_at       timestamptz,
    CHECK (expires_at > created_at AND expires_at <= created_at + interval '12 hours')
);
CREATE TABLE public.webauthn_challenge (
    challenge     bytea PRIMARY KEY CHECK (length(challenge) BETWEEN 16 AND 64),
    purpose       text NOT NULL CHECK (purpose IN ('sign_in', 'enrol', 'decide')),
    principal_id  text REFERENCES public.principal,
    gate_id       uuid REFERENCES public.gate,
    message       bytea CHECK (message IS NULL OR length(message) <= 16384),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz,
    CHECK (expires_at > created_at AND expires_at <= created_at + interval '10 minutes'),
    CHECK (purpose <> 'decide' OR (principal_id IS NOT NULL AND gate_id IS NOT NULL AND message IS NOT NULL))
);
GRANT SELECT, INSERT ON public.board_session, public.webauthn_challenge TO {CALLBACKS_ROLE};
GRANT UPDATE (ended_at) ON public.board_session TO {CALLBACKS_ROLE};
GRANT UPDATE (used_at) ON public.webauthn_challenge TO {CALLBACKS_ROLE};
-- Anyone may ask for sign-in options, so challenges are bounded: the board deletes expired ones and caps live ones.
GRANT DELETE ON public.webauthn_challenge TO {CALLBACKS_ROLE};
CREATE INDEX webauthn_challenge_live ON public.webauthn_challenge (purpose, expires_at) WHERE used_at IS NULL;
"""

RANDOM_BYTES = r"""
CREATE FUNCTION public.gen_random_bytes_16() RETURNS bytea
    LANGUAGE sql VOLATILE SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT decode(replace(gen_random_uuid()::text, '-', ''), 'hex') $$;
"""

# Enrolment: the owner stores a token's digest; whoever presents the token (once, in time) adds one credential for
# that principal. SECURITY DEFINER: the service roles cannot write either table themselves.
ENROLMENT_FUNCTIONS = r"""
CREATE FUNCTION public.passkey_enrolment_for(p_token bytea)
    RETURNS TABLE (enrolment_id uuid, principal_id text, display_name text, user_handle bytea, expires_at timestamptz)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    RETURN QUERY
    SELECT e.enrolment_id, e.principal_id, p.display_name, e.user_handle, e.expires_at
      FROM public.passkey_enrolment e JOIN public.principal p ON p.principal_id = e.principal_id
     WHERE e.token_sha256 = pg_catalog.sha256(p_token) AND e.redeemed_at IS NULL AND e.expires_at > now()
       AND p.kind = 'human' AND p.active;
END $$;

CREATE FUNCTION public.redeem_passkey_enrolment(p_token bytea, p_credential_id text, p_public_key bytea, p_label text)
    RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    e record;
BEGIN
    SELECT x.enrolment_id, x.principal_id, x.user_handle, x.expires_at, x.redeemed_at, p.kind, p.active
      INTO e
      FROM public.passkey_enrolment x JOIN public.principal p ON p.principal_id = x.principal_id
     WHERE x.token_sha256 = pg_catalog.sha256(p_token)
       FOR UPDATE OF x;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'enrolment refused: no enrolment has this token' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF e.redeemed_at IS NOT NULL THEN
        RAISE EXCEPTION 'enrolment refused: this enrolment link was already used at %', e.redeemed_at
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF e.expires_at <= now() THEN
        RAISE EXCEPTION 'enrolment refused: this enrolment link expired at %', e.expires_at
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF e.kind <> 'human' OR NOT e.active THEN
        RAISE EXCEPTION 'enrolment refused: principal % is not an active human', e.principal_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE public.passkey_enrolment SET redeemed_at = now() WHERE enrolment_id = e.enrolment_id;
    INSERT INTO public.principal_passkey (credential_id, principal_id, public_key, label, enrolment_id, user_handle)
    VALUES (p_credential_id, e.principal_id, p_public_key, p_label, e.enrolment_id, e.user_handle);
    INSERT INTO public.trace_pending (ts, close_id, actor, kind, payload, version_set)
    VALUES (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), NULL, e.principal_id,
            'passkey_enrolled',
            jsonb_build_object('principal', e.principal_id, 'credential_id', p_credential_id, 'label', p_label,
                               'enrolment_id', e.enrolment_id::text,
                               'public_key_sha256', encode(pg_catalog.sha256(p_public_key), 'hex')),
            '{}'::jsonb);
    -- Tell the person, in a direct message on each Slack identity they have.
    INSERT INTO public.outbox_message (dedupe_key, close_id, gate_id, platform, channel, kind, payload, template)
    SELECT 'passkey_enrolled:' || p_credential_id || ':slack:' || i.tenant || ':' || pg_catalog.upper(i.external_id),
           NULL, NULL, 'slack', pg_catalog.upper(i.external_id), 'notice',
           jsonb_build_object('credential_id', p_credential_id), 'passkey_enrolled'
      FROM public.principal_identity i
     WHERE i.principal_id = e.principal_id AND i.channel = 'slack';
    RETURN e.principal_id;
END $$;

CREATE FUNCTION public.revoke_passkey(p_principal text, p_credential_id text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE public.principal_passkey SET revoked_at = now()
     WHERE credential_id = p_credential_id AND principal_id = p_principal AND revoked_at IS NULL;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE public.board_session SET ended_at = now() WHERE credential_id = p_credential_id AND ended_at IS NULL;
    INSERT INTO public.trace_pending (ts, close_id, actor, kind, payload, version_set)
    VALUES (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), NULL, p_principal,
            'passkey_revoked', jsonb_build_object('principal', p_principal, 'credential_id', p_credential_id),
            '{}'::jsonb);
    RETURN true;
END $$;

-- A sign count only rises (a cloned authenticator shows as a count that did not); 0 stays 0 for authenticators
-- that keep no counter.
CREATE FUNCTION public.record_passkey_use(p_credential_id text, p_sign_count bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_count bigint;
BEGIN
    SELECT k.sign_count INTO v_count FROM public.principal_passkey k
     WHERE k.credential_id = p_credential_id AND k.revoked_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'passkey % is unknown or revoked', p_credential_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (p_sign_count > 0 OR v_count > 0) AND p_sign_count <= v_count THEN
        RAISE EXCEPTION 'passkey %: sign count % is not above %, a replayed or cloned authenticator',
            p_credential_id, p_sign_count, v_count USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE public.principal_passkey SET sign_count = p_sign_count, last_used_at = now()
     WHERE credential_id = p_credential_id;
END $$;
"""

ENROLMENT_GRANTS = f"""
REVOKE ALL ON FUNCTION public.passkey_enrolment_for(bytea), public.redeem_passkey_enrolment(bytea, text, bytea, text),
    public.revoke_passkey(text, text), public.record_passkey_use(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.passkey_enrolment_for(bytea), public.redeem_passkey_enrolment(bytea, text, bytea, text),
    public.revoke_passkey(text, text), public.record_passkey_use(text, bigint) TO {CALLBACKS_ROLE};
"""

# The gate's requirements, now with what proofs it accepts (0015's list plus accepted_proofs).
FROZEN_REQUIREMENTS = r"""
CREATE OR REPLACE FUNCTION public.refuse_gate_requirement_change() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'gates are never deleted (gate %)', OLD.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.gate_id, NEW.close_id, NEW.task, NEW.attempt, NEW.kind, NEW.tier, NEW.quorum, NEW.approver_role,
        NEW.rule, NEW.summary, NEW.prepared_by, NEW.requested_by, NEW.opened_at, NEW.due_at, NEW.expires_at,
        NEW.subject, NEW.amount, NEW.enforced_policy, NEW.accepted_proofs)
       IS DISTINCT FROM
       (OLD.gate_id, OLD.close_id, OLD.task, OLD.attempt, OLD.kind, OLD.tier, OLD.quorum, OLD.approver_role,
        OLD.rule, OLD.summary, OLD.prepared_by, OLD.requested_by, OLD.opened_at, OLD.due_at, OLD.expires_at,
        OLD.subject, OLD.amount, OLD.enforced_policy, OLD.accepted_proofs) THEN
        RAISE EXCEPTION 'gate %: its requirements (run, task, attempt, subject, amount, tier, quorum, approver role, '
                        'rule, summary, preparer, requesters, due and expiry times, accepted proofs) cannot change '
                        'once it is open', OLD.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.lifecycle <> 'open' AND NEW.lifecycle IS DISTINCT FROM OLD.lifecycle THEN
        RAISE EXCEPTION 'gate % is % and cannot become %', OLD.gate_id, OLD.lifecycle, NEW.lifecycle
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
"""

# Stamped when the gate opens, after admit_gate has checked its tier: a trigger that runs second (names sort).
STAMP_PROOFS = r"""
CREATE FUNCTION public.stamp_gate_accepted_proofs() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    SELECT t.accepted_proofs INTO NEW.accepted_proofs FROM public.policy_tier t WHERE t.name = NEW.tier;
    IF NEW.accepted_proofs IS NULL THEN
        RAISE EXCEPTION 'gate refused: tier % accepts no proofs in the enforced policy', NEW.tier
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER gate_admitted_proofs BEFORE INSERT ON public.gate
    FOR EACH ROW EXECUTE FUNCTION public.stamp_gate_accepted_proofs();
ALTER TABLE public.gate ENABLE ALWAYS TRIGGER gate_admitted_proofs;
REVOKE ALL ON FUNCTION public.stamp_gate_accepted_proofs() FROM PUBLIC;
"""

ADMIT_DECISION = r"""
CREATE OR REPLACE FUNCTION public.admit_gate_decision()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET enable_seqscan TO 'off'
AS $function$
DECLARE
    c record;
    v_proof text;
BEGIN
    -- Everything the decision is judged on, in one statement. Locking the gate row serialises decisions on one gate
    -- and keeps them from racing the engine applying its outcome.
    SELECT g.lifecycle, g.expires_at, g.quorum, g.approver_role, g.prepared_by, g.requested_by, g.tier,
           g.accepted_proofs,
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
    IF NEW.decision = 'reject' AND btrim(coalesce(NEW.reason, '')) = '' THEN
        RAISE EXCEPTION 'decision refused: a rejection of gate % needs the person''s reason', NEW.gate_id
            USING ERRCODE = 'check_violation';
    END IF;
    v_proof := CASE NEW.channel WHEN 'slack' THEN 'platform_identity' WHEN 'teams' THEN 'platform_identity'
                                WHEN 'signed_callback' THEN 'ed25519' WHEN 'board' THEN 'passkey' END;
    IF v_proof IS NULL THEN
        RAISE EXCEPTION 'decision refused: unknown channel %', NEW.channel USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT (v_proof = ANY (c.accepted_proofs)) THEN
        RAISE EXCEPTION 'decision refused: gate % (tier %) accepts only % as proof, and a % decision carries %',
            NEW.gate_id, c.tier, array_to_string(c.accepted_proofs, ', '), NEW.channel, v_proof
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
    ELSIF NEW.channel = 'board' THEN
        IF NEW.proof->>'kind' IS DISTINCT FROM 'passkey'
           OR jsonb_typeof(NEW.proof->'authenticator_data') IS DISTINCT FROM 'string'
           OR jsonb_typeof(NEW.proof->'client_data_json') IS DISTINCT FROM 'string'
           OR jsonb_typeof(NEW.proof->'signature') IS DISTINCT FROM 'string'
           OR jsonb_typeof(NEW.proof->'signed_at') IS DISTINCT FROM 'number'
           OR NOT EXISTS (
            SELECT 1 FROM public.principal_passkey k
             WHERE k.credential_id = NEW.proof->>'credential_id'
               AND k.principal_id = NEW.principal_id
               AND k.revoked_at IS NULL) THEN
            RAISE EXCEPTION 'decision refused: the board decision carries no assertion by a live passkey of principal %',
                NEW.principal_id USING ERRCODE = 'insufficient_privilege';
        END IF;
    ELSE
        IF NEW.proof->>'kind' IS DISTINCT FROM NEW.channel OR NOT EXISTS (
            SELECT 1 FROM public.principal_identity i
             WHERE i.channel = NEW.channel
               AND i.tenant = NEW.proof->>'tenant'
               AND i.external_id = NEW.proof->>'external_id'
               AND i.principal_id = NEW.principal_id) THEN
            RAISE EXCEPTION 'decision refused: the % identity in the proof does not belong to principal %',
                NEW.channel, NEW.principal_id USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    NEW.decided_at := now();  -- nobody back-dates a decision
    RETURN NEW;
END $function$;
"""

DECIDED_EVENT = r"""
CREATE OR REPLACE FUNCTION public.trace_gate_decided() RETURNS trigger
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
                'channel', NEW.channel, 'decision_id', NEW.decision_id, 'nonce', NEW.nonce, 'proof', NEW.proof,
                'gate_status', CASE WHEN s.rejections > 0 THEN 'rejected'
                                    WHEN s.approvals >= s.quorum THEN 'approved' ELSE 'open' END,
                'approvals', s.approvals, 'quorum', s.quorum, 'to', 'orchestrator'),
            '{}'::jsonb);
    RETURN NULL;
END $$;
"""


# --- Every enrolment is announced to the person in chat (issue 21) ------------------------------------------------
# A key enrolled by someone else (a compromised web process substituting its own credential during the ceremony) must
# be noticed: redeeming an enrolment also writes one outbox notice per Slack identity of the person, a direct message
# (chat.postMessage to a user id opens the DM; Slack user ids are upper case, identities are stored case-folded). The
# notice carries only the credential id; the deliverer reads the label and time from `principal_passkey` and checks
# that the recipient is that credential's person (countersign/delivery/worker.py). Teams is not announced: a direct message there
# needs a stored conversation reference, which Countersign does not keep (LIMITATIONS.md).

# 0009's definition, with its fixed path and one more notice template.
OUTBOX_FACTS_WITH_PASSKEY_NOTICE = r"""
CREATE OR REPLACE FUNCTION public.outbox_row_is_facts(kind text, template text, gate_id uuid, payload jsonb)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT jsonb_typeof(payload) = 'object' AND CASE kind
        WHEN 'gate_card' THEN template IS NULL AND gate_id IS NOT NULL AND payload = '{}'::jsonb
        WHEN 'card_update' THEN template IS NULL AND gate_id IS NOT NULL AND payload - 'state' = '{}'::jsonb
            AND (NOT payload ? 'state' OR (jsonb_typeof(payload->'state') = 'string'
                 AND payload->>'state' ~ '^[a-z_]{1,16}:[0-9]{1,6}:[0-9]{1,6}$'))
        WHEN 'notice' THEN CASE template
            WHEN 'gate_overdue' THEN gate_id IS NOT NULL AND payload = '{}'::jsonb
            WHEN 'checkpoint' THEN payload - 'tree_size' = '{}'::jsonb
                AND jsonb_typeof(payload->'tree_size') = 'number'
                AND payload->>'tree_size' ~ '^[1-9][0-9]{0,17}$'
            WHEN 'passkey_enrolled' THEN gate_id IS NULL AND payload - 'credential_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'credential_id') = 'string'
                AND payload->>'credential_id' ~ '^[A-Za-z0-9_-]+$'
                AND length(payload->>'credential_id') BETWEEN 16 AND 1364
            ELSE false END
        ELSE false END
$$;
"""

# Only the enrolment itself announces a key: neither service role may write such a notice, nor move one to another
# recipient or credential (inside the SECURITY DEFINER function current_user is the owner). Delivery still records
# its attempts and outcome on the row.
OUTBOX_PASSKEY_NOTICES_FROM_ENROLMENT_ONLY = f"""
CREATE FUNCTION public.outbox_passkey_notices_from_enrolment_only() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF current_user IN ('{ENGINE_ROLE}', '{CALLBACKS_ROLE}')
       AND ((TG_OP = 'INSERT' AND NEW.template = 'passkey_enrolled')
            OR (TG_OP = 'UPDATE' AND 'passkey_enrolled' IN (NEW.template, OLD.template)
                AND (NEW.dedupe_key, NEW.close_id, NEW.gate_id, NEW.platform, NEW.channel, NEW.kind, NEW.payload,
                     NEW.template)
                    IS DISTINCT FROM
                    (OLD.dedupe_key, OLD.close_id, OLD.gate_id, OLD.platform, OLD.channel, OLD.kind, OLD.payload,
                     OLD.template))) THEN
        RAISE EXCEPTION 'only an enrolment announces a passkey (% tried to % a passkey_enrolled notice)',
            current_user, lower(TG_OP) USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER outbox_passkey_notices_from_enrolment_only BEFORE INSERT OR UPDATE ON public.outbox_message
    FOR EACH ROW EXECUTE FUNCTION public.outbox_passkey_notices_from_enrolment_only();
ALTER TABLE public.outbox_message ENABLE ALWAYS TRIGGER outbox_passkey_notices_from_enrolment_only;
REVOKE ALL ON FUNCTION public.outbox_passkey_notices_from_enrolment_only() FROM PUBLIC;
"""


def announce_enrolments() -> None:
    """Run last in upgrade(): every enrolment is announced to the person in chat."""
    op.execute(OUTBOX_FACTS_WITH_PASSKEY_NOTICE)
    op.execute(OUTBOX_PASSKEY_NOTICES_FROM_ENROLMENT_ONLY)


def upgrade() -> None:
    op.execute(PROOF_COLUMNS)
    op.execute(RANDOM_BYTES)
    op.execute(PASSKEY_TABLES)
    op.execute(ENROLMENT_FUNCTIONS)
    op.execute(ENROLMENT_GRANTS)
    op.execute(FROZEN_REQUIREMENTS)
    op.execute(STAMP_PROOFS)
    op.execute(ADMIT_DECISION)
    op.execute(DECIDED_EVENT)
    announce_enrolments()


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
