"""Approvers who are away (issue 36): delegation with a date range, and an overdue gate re-routed to people by DM.

- **A delegation changes who is asked, never who may decide.** `delegation` names a person, their delegate and the
  range they are away (`starts_at` inclusive, `ends_at` exclusive), who set it and why. It is written only through
  `set_delegation`, which admits it when `set_by` is the person themselves, or an owner (an active human holding a
  role that owns an escalation reason, `policy_escalation_owner`) who is not also the delegate: nobody appoints
  themselves someone else's stand-in. The range cannot start before today (UTC), must end after it starts and after
  now, is at most 366 days, and may not overlap another live delegation of the same person. `created_at` is the
  database's clock. Nothing about a delegation grants a role: a delegate is routed a gate only when they are
  themselves eligible for it (below).
- **Revoked by a record, never changed.** `delegation_revocation` (one per delegation, through
  `revoke_delegation`, with the same rule on who may) ends a delegation; the three tables here are append-only for
  everyone (UPDATE, DELETE and TRUNCATE raise), and the service roles hold no INSERT on them.
- **Re-routing an overdue gate.** `route_gate_to` (the engine role's only way to write `gate_routing`) records that
  an open gate was routed to a person and why (`overdue`, or `<person> away until <date>` through a delegation),
  after checking the person is an active human holding the gate's approver role who neither prepared nor requested
  its work nor decided it yet, and is not away now. The same call enqueues a direct message
  (outbox notice `gate_routed`) to each of that person's own Slack and Teams identities on the platforms asked, and
  appends `gate_rerouted` to the trace. UNIQUE (gate, person) makes a second run a no-op; a service role cannot
  write a `gate_routed` notice itself, nor move one to another recipient.
- Every event (`delegation_set`, `delegation_revoked`, `gate_rerouted`) is written by these functions, so its
  `writer` is the owner: a service role's forgery would carry its own name.

Revision ID: 0026
Revises: 0025
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"

TABLES = r"""
CREATE TABLE public.delegation (
    delegation_id bigserial PRIMARY KEY,
    principal_id  text NOT NULL REFERENCES public.principal,
    delegate_id   text NOT NULL REFERENCES public.principal,
    starts_at     timestamptz NOT NULL,
    ends_at       timestamptz NOT NULL,
    set_by        text NOT NULL REFERENCES public.principal,
    reason        text NOT NULL CHECK (btrim(reason) <> '' AND length(reason) <= 500),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT delegation_range_valid CHECK (ends_at > starts_at AND ends_at - starts_at <= interval '366 days'),
    CONSTRAINT delegation_to_someone_else CHECK (delegate_id <> principal_id)
);
CREATE INDEX delegation_principal ON public.delegation (principal_id, starts_at);

CREATE TABLE public.delegation_revocation (
    delegation_id bigint PRIMARY KEY REFERENCES public.delegation,
    revoked_by    text NOT NULL REFERENCES public.principal,
    reason        text NOT NULL CHECK (btrim(reason) <> '' AND length(reason) <= 500),
    revoked_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE public.gate_routing (
    routing_id    bigserial PRIMARY KEY,
    gate_id       uuid NOT NULL REFERENCES public.gate,
    routed_to     text NOT NULL REFERENCES public.principal,
    rank          integer NOT NULL CHECK (rank >= 1),
    delegation_id bigint REFERENCES public.delegation,
    away          text REFERENCES public.principal,  -- the person the delegation is for, when routed through one
    away_until    timestamptz,
    why           text NOT NULL,
    routed_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT gate_routing_once UNIQUE (gate_id, routed_to),
    CONSTRAINT gate_routing_away_with_delegation
        CHECK ((delegation_id IS NULL) = (away IS NULL) AND (away IS NULL) = (away_until IS NULL))
);

CREATE FUNCTION public.refuse_delegation_change() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused (revoke a delegation with a revocation record)',
        TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
"""


def _append_only(table: str) -> str:
    return f"""
CREATE TRIGGER {table}_unchanged BEFORE UPDATE OR DELETE ON public.{table}
    FOR EACH ROW EXECUTE FUNCTION public.refuse_delegation_change();
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON public.{table}
    FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_delegation_change();
ALTER TABLE public.{table} ENABLE ALWAYS TRIGGER {table}_unchanged;
ALTER TABLE public.{table} ENABLE ALWAYS TRIGGER {table}_no_truncate;
"""


# Who may set or revoke a delegation of `p_principal`: the person, or an owner who is not the delegate.
MAY_MANAGE = r"""
CREATE FUNCTION public.delegation_manager_problem(p_principal text, p_delegate text, p_by text) RETURNS text
    LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT CASE
        WHEN s.principal_id IS NULL THEN 'no principal ' || p_by
        WHEN s.kind <> 'human' OR NOT s.active THEN p_by || ' is not an active human'
        WHEN p_by = p_principal THEN NULL
        WHEN p_by = p_delegate THEN p_by || ' may not make themselves the delegate of ' || p_principal
        WHEN NOT EXISTS (SELECT 1 FROM public.policy_escalation_owner o WHERE o.approver_role = ANY (s.roles))
            THEN p_by || ' is neither ' || p_principal || ' nor an owner (a role that owns escalations)'
        ELSE NULL END
      FROM (SELECT 1) one
      LEFT JOIN public.principal s ON s.principal_id = p_by
$$;
REVOKE ALL ON FUNCTION public.delegation_manager_problem(text, text, text) FROM PUBLIC;
"""

SET_DELEGATION = r"""
CREATE FUNCTION public.set_delegation(p_principal text, p_delegate text, p_starts timestamptz, p_ends timestamptz,
                                      p_set_by text, p_reason text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    problem text;
    clash bigint;
    new_id bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.principal p
                    WHERE p.principal_id = p_principal AND p.kind = 'human' AND p.active) THEN
        RAISE EXCEPTION 'delegation refused: % is not an active human principal', p_principal
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM public.principal p
                    WHERE p.principal_id = p_delegate AND p.kind = 'human' AND p.active) THEN
        RAISE EXCEPTION 'delegation refused: the delegate % is not an active human principal', p_delegate
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    problem := public.delegation_manager_problem(p_principal, p_delegate, p_set_by);
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'delegation refused: %', problem USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_starts < (date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') THEN
        RAISE EXCEPTION 'delegation refused: it starts %, before today (UTC): a delegation is never back-dated',
            p_starts USING ERRCODE = 'check_violation';
    END IF;
    IF p_ends <= now() THEN
        RAISE EXCEPTION 'delegation refused: it ends %, which has passed', p_ends USING ERRCODE = 'check_violation';
    END IF;
    PERFORM pg_advisory_xact_lock(pg_catalog.hashtext('delegation:' || p_principal));
    SELECT d.delegation_id INTO clash FROM public.delegation d
     WHERE d.principal_id = p_principal AND d.starts_at < p_ends AND d.ends_at > p_starts
       AND NOT EXISTS (SELECT 1 FROM public.delegation_revocation r WHERE r.delegation_id = d.delegation_id)
     LIMIT 1;
    IF clash IS NOT NULL THEN
        RAISE EXCEPTION 'delegation refused: % already has delegation % over those dates; revoke it first',
            p_principal, clash USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO public.delegation (principal_id, delegate_id, starts_at, ends_at, set_by, reason, created_at)
    VALUES (p_principal, p_delegate, p_starts, p_ends, p_set_by, p_reason, now())
    RETURNING delegation_id INTO new_id;
    INSERT INTO public.trace_pending (ts, close_id, actor, kind, payload, version_set)
    VALUES (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), NULL, p_set_by,
            'delegation_set',
            jsonb_build_object('delegation_id', new_id, 'principal', p_principal, 'delegate', p_delegate,
                               'starts_at', p_starts, 'ends_at', p_ends, 'set_by', p_set_by, 'reason', p_reason),
            '{}'::jsonb);
    RETURN new_id;
END $$;
REVOKE ALL ON FUNCTION public.set_delegation(text, text, timestamptz, timestamptz, text, text) FROM PUBLIC;

CREATE FUNCTION public.revoke_delegation(p_delegation bigint, p_by text, p_reason text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    d record;
    problem text;
BEGIN
    SELECT * INTO d FROM public.delegation x WHERE x.delegation_id = p_delegation;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'revocation refused: no delegation %', p_delegation USING ERRCODE = 'no_data_found';
    END IF;
    problem := public.delegation_manager_problem(d.principal_id, d.delegate_id, p_by);
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'revocation refused: %', problem USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO public.delegation_revocation (delegation_id, revoked_by, reason, revoked_at)
    VALUES (p_delegation, p_by, p_reason, now()) ON CONFLICT (delegation_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO public.trace_pending (ts, close_id, actor, kind, payload, version_set)
    VALUES (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), NULL, p_by,
            'delegation_revoked',
            jsonb_build_object('delegation_id', p_delegation, 'principal', d.principal_id,
                               'delegate', d.delegate_id, 'revoked_by', p_by, 'reason', p_reason),
            '{}'::jsonb);
    RETURN true;
END $$;
REVOKE ALL ON FUNCTION public.revoke_delegation(bigint, text, text) FROM PUBLIC;
"""

ROUTE = r"""
CREATE FUNCTION public.route_gate_to(p_gate uuid, p_principal text, p_delegation bigint, p_rank integer,
                                     p_platforms text[]) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    g record;
    p record;
    d record;
    away_id text;
    away_until timestamptz;
    new_id bigint;
    why text := 'overdue';
    engine_actor constant text := 'orchestrator';  -- the event is the engine's act, written by the owner's function
BEGIN
    SELECT gt.close_id, gt.task, gt.approver_role, gt.prepared_by, gt.requested_by, s.status, s.lifecycle
      INTO g
      FROM public.gate gt JOIN public.gate_state s ON s.gate_id = gt.gate_id
     WHERE gt.gate_id = p_gate
       FOR UPDATE OF gt;
    IF NOT FOUND OR g.lifecycle <> 'open' OR g.status <> 'open' THEN
        RAISE EXCEPTION 'routing refused: gate % is not open', p_gate USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT x.principal_id, x.kind, x.active, x.roles INTO p FROM public.principal x WHERE x.principal_id = p_principal;
    IF NOT FOUND OR p.kind <> 'human' OR NOT p.active THEN
        RAISE EXCEPTION 'routing refused: % is not an active human', p_principal
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT (g.approver_role = ANY (p.roles)) THEN
        RAISE EXCEPTION 'routing refused: % lacks role % required by gate %', p_principal, g.approver_role, p_gate
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_principal = g.prepared_by OR p_principal = ANY (g.requested_by) THEN
        RAISE EXCEPTION 'routing refused: % prepared or requested the work under gate %', p_principal, p_gate
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM public.gate_decision x WHERE x.gate_id = p_gate AND x.principal_id = p_principal) THEN
        RAISE EXCEPTION 'routing refused: % already decided gate %', p_principal, p_gate
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM public.delegation x
                WHERE x.principal_id = p_principal AND x.starts_at <= now() AND x.ends_at > now()
                  AND NOT EXISTS (SELECT 1 FROM public.delegation_revocation r
                                   WHERE r.delegation_id = x.delegation_id)) THEN
        RAISE EXCEPTION 'routing refused: % is away now', p_principal USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_delegation IS NOT NULL THEN
        SELECT x.principal_id, x.delegate_id, x.ends_at INTO d FROM public.delegation x
         WHERE x.delegation_id = p_delegation AND x.starts_at <= now() AND x.ends_at > now()
           AND NOT EXISTS (SELECT 1 FROM public.delegation_revocation r WHERE r.delegation_id = x.delegation_id);
        IF NOT FOUND OR d.delegate_id <> p_principal THEN
            RAISE EXCEPTION 'routing refused: delegation % is not a live delegation to %', p_delegation, p_principal
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        away_id := d.principal_id;
        away_until := d.ends_at;
        why := d.principal_id || ' away until '
               || to_char((d.ends_at - interval '1 microsecond') AT TIME ZONE 'UTC', 'YYYY-MM-DD');
    END IF;
    INSERT INTO public.gate_routing (gate_id, routed_to, rank, delegation_id, away, away_until, why, routed_at)
    VALUES (p_gate, p_principal, p_rank, p_delegation, away_id, away_until, why, now())
    ON CONFLICT ON CONSTRAINT gate_routing_once DO NOTHING
    RETURNING routing_id INTO new_id;
    IF new_id IS NULL THEN
        RETURN NULL;  -- routed before: nothing more is sent
    END IF;
    INSERT INTO public.trace_pending (ts, close_id, actor, kind, payload, version_set)
    VALUES (to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), g.close_id,
            engine_actor, 'gate_rerouted',
            jsonb_build_object('gate_id', p_gate::text, 'task', g.task, 'routing_id', new_id, 'routed_to', p_principal,
                               'rank', p_rank, 'why', why, 'delegation_id', p_delegation, 'away', away_id,
                               'platforms', to_jsonb(p_platforms)),
            '{}'::jsonb);
    -- The direct message goes to the person's own identities, and nowhere else.
    INSERT INTO public.outbox_message (dedupe_key, close_id, gate_id, platform, channel, kind, payload, template)
    SELECT 'gate_routed:' || new_id || ':' || i.channel || ':' || i.tenant || ':' || i.external_id,
           g.close_id, p_gate, i.channel,
           CASE i.channel WHEN 'slack' THEN pg_catalog.upper(i.external_id) ELSE i.external_id END,
           'notice', jsonb_build_object('routing_id', new_id), 'gate_routed'
      FROM public.principal_identity i
     WHERE i.principal_id = p_principal AND i.channel IN ('slack', 'teams') AND i.channel = ANY (p_platforms)
    ON CONFLICT (dedupe_key) DO NOTHING;
    RETURN new_id;
END $$;
REVOKE ALL ON FUNCTION public.route_gate_to(uuid, text, bigint, integer, text[]) FROM PUBLIC;
"""

# 0025's definition, with one more notice template.
OUTBOX_FACTS_WITH_ROUTING = r"""
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
            WHEN 'pay_less_notice' THEN gate_id IS NOT NULL AND payload - 'notice_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'notice_id') = 'number'
                AND payload->>'notice_id' ~ '^[1-9][0-9]{0,17}$'
            WHEN 'payment_notice' THEN gate_id IS NOT NULL AND payload - 'notice_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'notice_id') = 'number'
                AND payload->>'notice_id' ~ '^[1-9][0-9]{0,17}$'
            WHEN 'gate_routed' THEN gate_id IS NOT NULL AND payload - 'routing_id' = '{}'::jsonb
                AND jsonb_typeof(payload->'routing_id') = 'number'
                AND payload->>'routing_id' ~ '^[1-9][0-9]{0,17}$'
            ELSE false END
        ELSE false END
$$;
"""

# Only `route_gate_to` writes a direct message about a routed gate (inside it current_user is the owner): neither
# service role may write one, nor move one to another recipient or routing. Delivery still records its outcome.
ROUTED_NOTICES_FROM_ROUTING_ONLY = f"""
CREATE FUNCTION public.outbox_routed_notices_from_routing_only() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF current_user IN ('{ENGINE_ROLE}', '{CALLBACKS_ROLE}')
       AND ((TG_OP = 'INSERT' AND NEW.template = 'gate_routed')
            OR (TG_OP = 'UPDATE' AND 'gate_routed' IN (NEW.template, OLD.template)
                AND (NEW.dedupe_key, NEW.close_id, NEW.gate_id, NEW.platform, NEW.channel, NEW.kind, NEW.payload,
                     NEW.template)
                    IS DISTINCT FROM
                    (OLD.dedupe_key, OLD.close_id, OLD.gate_id, OLD.platform, OLD.channel, OLD.kind, OLD.payload,
                     OLD.template))) THEN
        RAISE EXCEPTION 'only routing a gate sends its direct message (% tried to % a gate_routed notice)',
            current_user, lower(TG_OP) USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER outbox_routed_notices_from_routing_only BEFORE INSERT OR UPDATE ON public.outbox_message
    FOR EACH ROW EXECUTE FUNCTION public.outbox_routed_notices_from_routing_only();
ALTER TABLE public.outbox_message ENABLE ALWAYS TRIGGER outbox_routed_notices_from_routing_only;
"""

GRANTS = f"""
GRANT SELECT ON public.delegation, public.delegation_revocation, public.gate_routing
    TO {ENGINE_ROLE}, {CALLBACKS_ROLE};
GRANT EXECUTE ON FUNCTION public.set_delegation(text, text, timestamptz, timestamptz, text, text),
    public.revoke_delegation(bigint, text, text) TO {ENGINE_ROLE}, {CALLBACKS_ROLE};
GRANT EXECUTE ON FUNCTION public.route_gate_to(uuid, text, bigint, integer, text[]) TO {ENGINE_ROLE};
"""


def upgrade() -> None:
    op.execute(TABLES)
    for table in ("delegation", "delegation_revocation", "gate_routing"):
        op.execute(_append_only(table))
    op.execute(MAY_MANAGE)
    op.execute(SET_DELEGATION)
    op.execute(ROUTE)
    op.execute(OUTBOX_FACTS_WITH_ROUTING)
    op.execute(ROUTED_NOTICES_FROM_ROUTING_ONLY)
    op.execute(GRANTS)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
