"""Payment certificates (issue 14): the loaded construction evidence, and the record of each certificate certified.

- `construction_set` is one load of a construction data directory (contracts.json, certificates.jsonl), identified by
  the digest of its files; `construction_contract` and `construction_certificate` hold each record as loaded, with
  its SHA-256. Loaded evidence never changes, for any role: UPDATE, DELETE and TRUNCATE are refused by triggers
  enabled ALWAYS, as the book tables refuse them. A correction is a new set.
- `payment_certification` records that a certificate was certified for payment, once (the certificate id is the key).
  The database admits a row only for the payment task of the certificate's own run, through that task's applied,
  approved approval gate of its current attempt, for exactly the amount and currency in that gate's summary
  (`summary.certificate.amount_to_certify`): the supervisor's rule for `awaiting_gate -> done` (0011), applied to
  the effect itself. The row stamps when the gate's last approval was made and when it was recorded; neither can be
  supplied by the caller. Certifications are append-only too.
- The engine role may read and insert these tables; the callbacks role gets nothing. The two specialists of the
  payment workflow are machine principals, so the engine may trace events as them.

Revision ID: 0014
Revises: 0013
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"

# The specialists of the payment-certificate workflow (countersign/engine/dispatch.py AGENT_PRINCIPALS).
AGENTS = (
    ("extraction-agent", "Certificate extraction specialist"),
    ("adjudication-agent", "Certificate adjudication specialist"),
)

TABLES = r"""
CREATE TABLE construction_set (
    set_id     bigserial PRIMARY KEY,
    source     text NOT NULL CHECK (length(source) BETWEEN 1 AND 200),
    digest     text NOT NULL UNIQUE CHECK (digest ~ '^[0-9a-f]{64}$'),
    loaded_by  text NOT NULL,
    loaded_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE construction_contract (
    set_id      bigint NOT NULL REFERENCES construction_set,
    contract_id text NOT NULL CHECK (length(contract_id) BETWEEN 1 AND 64),
    form        text NOT NULL,
    doc         jsonb NOT NULL,
    sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    PRIMARY KEY (set_id, contract_id)
);

CREATE TABLE construction_certificate (
    set_id         bigint NOT NULL,
    certificate_id text NOT NULL CHECK (length(certificate_id) BETWEEN 1 AND 64),
    contract_id    text NOT NULL,
    number         integer NOT NULL CHECK (number >= 1),
    period         text NOT NULL CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    submitted_on   date NOT NULL,
    doc            jsonb NOT NULL,
    sha256         text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    PRIMARY KEY (set_id, certificate_id),
    FOREIGN KEY (set_id, contract_id) REFERENCES construction_contract
);
CREATE INDEX construction_certificate_period ON construction_certificate (set_id, period, submitted_on);
CREATE INDEX construction_certificate_contract ON construction_certificate (set_id, contract_id, number);

CREATE TABLE payment_certification (
    certificate_id       text PRIMARY KEY,
    close_id             uuid NOT NULL UNIQUE REFERENCES close_run,
    gate_id              uuid NOT NULL UNIQUE REFERENCES gate,
    amount               numeric(18, 2) NOT NULL,
    currency             char(3) NOT NULL,
    certified_by_gate_at timestamptz NOT NULL,
    recorded_at          timestamptz NOT NULL DEFAULT now()
);

-- Loaded evidence and certifications never change: a correction is a new set, a certification is never undone here.
CREATE FUNCTION refuse_construction_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'construction evidence and certifications are append-only: % on % is not allowed',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;
"""

APPEND_ONLY_TABLES = ("construction_set", "construction_contract", "construction_certificate", "payment_certification")

# Runs as the owner (SECURITY DEFINER) so grants cannot hide the gate from it, with a fixed search_path.
CERTIFICATION_GUARD = r"""
CREATE FUNCTION admit_payment_certification() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    c record;
BEGIN
    SELECT g.close_id, g.task, g.attempt AS gate_attempt, g.kind, g.summary, r.entity, r.workflow,
           t.attempt AS task_attempt
      INTO c
      FROM gate g
      JOIN close_run r ON r.close_id = g.close_id
      LEFT JOIN close_task t ON t.close_id = g.close_id AND t.task = g.task
     WHERE g.gate_id = NEW.gate_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'certification refused: no gate %', NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.close_id IS DISTINCT FROM NEW.close_id OR c.workflow <> 'certificates' OR c.entity <> NEW.certificate_id
       OR c.task <> 'payment' OR c.kind <> 'approval' THEN
        RAISE EXCEPTION 'certification refused: gate % is not the payment approval gate of certificate %''s run %',
            NEW.gate_id, NEW.certificate_id, NEW.close_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF c.gate_attempt IS DISTINCT FROM c.task_attempt
       OR NOT gate_applied_with(c.close_id, 'payment', c.gate_attempt, 'approval', 'approved') THEN
        RAISE EXCEPTION 'certification refused: certificate % has no applied, approved payment gate of its current '
                        'attempt (gate %)', NEW.certificate_id, NEW.gate_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (c.summary #>> '{certificate,amount_to_certify}') IS NULL
       OR (c.summary #>> '{certificate,amount_to_certify}')::numeric IS DISTINCT FROM NEW.amount
       OR (c.summary #>> '{certificate,currency}') IS DISTINCT FROM NEW.currency THEN
        RAISE EXCEPTION 'certification refused: % % is not the amount the approvers saw on gate % (% %)',
            NEW.currency, NEW.amount, NEW.gate_id, c.summary #>> '{certificate,currency}',
            c.summary #>> '{certificate,amount_to_certify}' USING ERRCODE = 'insufficient_privilege';
    END IF;
    NEW.certified_by_gate_at := (SELECT max(decided_at) FROM gate_decision
                                  WHERE gate_id = NEW.gate_id AND decision = 'approve');
    NEW.recorded_at := now();
    RETURN NEW;
END $$;
CREATE TRIGGER payment_certification_admitted BEFORE INSERT ON payment_certification
    FOR EACH ROW EXECUTE FUNCTION admit_payment_certification();
ALTER TABLE payment_certification ENABLE ALWAYS TRIGGER payment_certification_admitted;
REVOKE ALL ON FUNCTION admit_payment_certification() FROM PUBLIC;
"""

GRANTS = f"""
GRANT SELECT, INSERT ON {", ".join(APPEND_ONLY_TABLES)} TO {ENGINE_ROLE};
GRANT USAGE ON SEQUENCE construction_set_set_id_seq TO {ENGINE_ROLE};
"""


def _append_only(table: str) -> str:
    return (
        f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table}"
        f" FOR EACH ROW EXECUTE FUNCTION refuse_construction_change();\n"
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION refuse_construction_change();\n"
        f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_immutable;\n"
        f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_no_truncate;\n"
    )


def _agents() -> str:
    rows = ",\n".join(f"    ('{pid}', 'machine', '{name}', '{{}}')" for pid, name in AGENTS)
    return f"INSERT INTO principal (principal_id, kind, display_name, roles) VALUES\n{rows}\nON CONFLICT DO NOTHING;"


def upgrade() -> None:
    op.execute(TABLES)
    for table in APPEND_ONLY_TABLES:
        op.execute(_append_only(table))
    op.execute(CERTIFICATION_GUARD)
    op.execute(GRANTS)
    op.execute(_agents())


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
