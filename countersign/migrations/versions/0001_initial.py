"""Initial schema: books, closes, dispatch, gates, decisions, postings, trace.

Tables are grouped by the package that owns them. The rules a ledger must never break (balanced journals,
closed periods, append-only trace, one decision per gate and principal) live here, in the database, where no
code path can forget them.

Revision ID: 0001
Revises:
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ENGINE_BOOKS = r"""
CREATE TABLE book_set (
    book_set_id   bigserial PRIMARY KEY,
    entity        text NOT NULL CHECK (length(entity) BETWEEN 1 AND 64),
    period        text NOT NULL CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    currency      char(3) NOT NULL,
    source        text NOT NULL,
    manifest      jsonb NOT NULL,
    digest        text NOT NULL,
    loaded_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (entity, period, digest)
);

CREATE TABLE book_account (
    book_set_id bigint NOT NULL REFERENCES book_set,
    account     text NOT NULL,
    name        text NOT NULL,
    type        text NOT NULL CHECK (type IN ('asset', 'liability', 'equity', 'revenue', 'expense')),
    subtype     text NOT NULL,
    PRIMARY KEY (book_set_id, account)
);

CREATE TABLE book_gl_line (
    book_set_id bigint NOT NULL REFERENCES book_set,
    line_id     text NOT NULL,
    journal_id  text NOT NULL,
    line_date   date NOT NULL,
    account     text NOT NULL,
    amount      numeric(18, 2) NOT NULL,
    reference   text NOT NULL,
    description text NOT NULL,
    PRIMARY KEY (book_set_id, line_id)
);
CREATE INDEX book_gl_line_account ON book_gl_line (book_set_id, account);

CREATE TABLE bank_feed (
    book_set_id  bigint NOT NULL REFERENCES book_set,
    feed_version integer NOT NULL CHECK (feed_version >= 1),
    source       text NOT NULL,
    digest       text NOT NULL,
    loaded_by    text NOT NULL,
    loaded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (book_set_id, feed_version),
    UNIQUE (book_set_id, digest)
);

CREATE TABLE book_bank_line (
    book_set_id  bigint NOT NULL,
    feed_version integer NOT NULL,
    bank_line_id text NOT NULL,
    account      text NOT NULL,
    line_date    date NOT NULL,
    amount       numeric(18, 2) NOT NULL,
    reference    text NOT NULL,
    description  text NOT NULL,
    PRIMARY KEY (book_set_id, feed_version, bank_line_id),
    FOREIGN KEY (book_set_id, feed_version) REFERENCES bank_feed
);

CREATE TABLE book_ap_item (
    book_set_id  bigint NOT NULL REFERENCES book_set,
    invoice_id   text NOT NULL,
    vendor       text NOT NULL,
    invoice_date date NOT NULL,
    due_date     date NOT NULL,
    amount       numeric(18, 2) NOT NULL,
    PRIMARY KEY (book_set_id, invoice_id)
);

CREATE TABLE book_ar_item (
    book_set_id  bigint NOT NULL REFERENCES book_set,
    invoice_id   text NOT NULL,
    customer     text NOT NULL,
    invoice_date date NOT NULL,
    due_date     date NOT NULL,
    amount       numeric(18, 2) NOT NULL,
    PRIMARY KEY (book_set_id, invoice_id)
);

CREATE TABLE book_grni (
    book_set_id     bigint NOT NULL REFERENCES book_set,
    receipt_id      text NOT NULL,
    vendor          text NOT NULL,
    po_number       text NOT NULL,
    received_date   date NOT NULL,
    amount          numeric(18, 2) NOT NULL,
    expense_account text NOT NULL,
    description     text NOT NULL,
    PRIMARY KEY (book_set_id, receipt_id)
);

CREATE TABLE book_intercompany (
    book_set_id   bigint NOT NULL REFERENCES book_set,
    counterparty  text NOT NULL,
    account       text NOT NULL,
    our_balance   numeric(18, 2) NOT NULL,
    their_balance numeric(18, 2) NOT NULL,
    PRIMARY KEY (book_set_id, counterparty, account)
);

CREATE TABLE book_pnl_reference (
    book_set_id bigint NOT NULL REFERENCES book_set,
    account     text NOT NULL,
    basis       text NOT NULL CHECK (basis IN ('prior', 'budget')),
    amount      numeric(18, 2) NOT NULL,
    PRIMARY KEY (book_set_id, account, basis)
);

-- Loaded books never change: a correction is a new bank feed version, not an edit.
CREATE FUNCTION refuse_book_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'books are immutable: % on % is not allowed; load a corrected feed instead',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;
"""

BOOK_TABLES = (
    "book_set",
    "book_account",
    "book_gl_line",
    "bank_feed",
    "book_bank_line",
    "book_ap_item",
    "book_ar_item",
    "book_grni",
    "book_intercompany",
    "book_pnl_reference",
)

ENGINE_CLOSES = r"""
CREATE TABLE close_run (
    close_id         uuid PRIMARY KEY,
    entity           text NOT NULL,
    period           text NOT NULL CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    book_set_id      bigint NOT NULL REFERENCES book_set,
    status           text NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'halted', 'awaiting_approval', 'blocked', 'closed')),
    status_reason    text,
    policy_digest    text NOT NULL,
    checklist_digest text NOT NULL,
    started_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (entity, period)
);

CREATE TABLE close_task (
    close_id   uuid NOT NULL REFERENCES close_run,
    task       text NOT NULL,
    attempt    integer NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    status     text NOT NULL DEFAULT 'pending'
               CHECK (status IN ('pending', 'running', 'awaiting_gate', 'halted', 'done', 'rejected', 'failed')),
    result     jsonb,
    reason     text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (close_id, task)
);

CREATE TABLE dispatch (
    dispatch_id     bigserial PRIMARY KEY,
    idempotency_key text NOT NULL UNIQUE,
    close_id        uuid NOT NULL REFERENCES close_run,
    task            text NOT NULL,
    attempt         integer NOT NULL,
    specialist      text NOT NULL,
    input_digest    text NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'completed', 'failed')),
    result          jsonb,
    error           text,
    calls           integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz
);

CREATE TABLE gate (
    gate_id       uuid PRIMARY KEY,
    close_id      uuid NOT NULL REFERENCES close_run,
    task          text NOT NULL,
    attempt       integer NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('approval', 'escalation')),
    tier          text NOT NULL,
    quorum        integer NOT NULL CHECK (quorum >= 1),
    approver_role text NOT NULL,
    rule          text NOT NULL,
    summary       jsonb NOT NULL,
    prepared_by   text NOT NULL,
    opened_at     timestamptz NOT NULL DEFAULT now(),
    due_at        timestamptz NOT NULL,
    lifecycle     text NOT NULL DEFAULT 'open' CHECK (lifecycle IN ('open', 'applied', 'cancelled')),
    applied_at    timestamptz,
    UNIQUE (close_id, task, attempt)
);
"""

ENGINE_POSTINGS = r"""
CREATE TABLE accounting_period (
    entity    text NOT NULL,
    period    text NOT NULL CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    status    text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    closed_at timestamptz,
    closed_by_close uuid,
    PRIMARY KEY (entity, period)
);

-- A closed period stays closed.
CREATE FUNCTION refuse_period_reopen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'closed' THEN
        RAISE EXCEPTION 'period %/% is closed and cannot be changed', OLD.entity, OLD.period
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER accounting_period_stays_closed BEFORE UPDATE OR DELETE ON accounting_period
    FOR EACH ROW EXECUTE FUNCTION refuse_period_reopen();

CREATE TABLE journal (
    journal_id      bigserial PRIMARY KEY,
    idempotency_key text NOT NULL UNIQUE,
    request_hash    text NOT NULL,
    entity          text NOT NULL,
    period          text NOT NULL,
    journal_date    date NOT NULL,
    memo            text NOT NULL,
    source_close    uuid REFERENCES close_run,
    source_task     text,
    posted_by       text NOT NULL,
    posted_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (period = to_char(journal_date, 'YYYY-MM')),
    FOREIGN KEY (entity, period) REFERENCES accounting_period
);

CREATE TABLE journal_line (
    journal_id  bigint NOT NULL REFERENCES journal,
    line_no     integer NOT NULL CHECK (line_no >= 1),
    account     text NOT NULL,
    amount      numeric(18, 2) NOT NULL CHECK (amount <> 0),
    description text NOT NULL,
    PRIMARY KEY (journal_id, line_no)
);

-- Nothing posts into a closed period.
CREATE FUNCTION refuse_posting_into_closed_period() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_entity text;
    v_period text;
BEGIN
    IF TG_TABLE_NAME = 'journal' THEN
        v_entity := NEW.entity;
        v_period := NEW.period;
    ELSE
        SELECT entity, period INTO v_entity, v_period FROM journal WHERE journal_id = NEW.journal_id;
    END IF;
    IF EXISTS (SELECT 1 FROM accounting_period
               WHERE entity = v_entity AND period = v_period AND status = 'closed') THEN
        RAISE EXCEPTION 'period %/% is closed: nothing posts into it', v_entity, v_period
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER journal_period_open BEFORE INSERT ON journal
    FOR EACH ROW EXECUTE FUNCTION refuse_posting_into_closed_period();
CREATE TRIGGER journal_line_period_open BEFORE INSERT ON journal_line
    FOR EACH ROW EXECUTE FUNCTION refuse_posting_into_closed_period();

-- Debits equal credits, checked at commit so a journal's lines can be inserted one by one.
CREATE FUNCTION check_journal_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_journal bigint := COALESCE(NEW.journal_id, OLD.journal_id);
    v_total   numeric;
    v_lines   integer;
BEGIN
    SELECT COALESCE(sum(amount), 0), count(*) INTO v_total, v_lines
      FROM journal_line WHERE journal_id = v_journal;
    IF v_lines < 2 OR v_total <> 0 THEN
        RAISE EXCEPTION 'journal % is unbalanced: % lines summing to %', v_journal, v_lines, v_total
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER journal_balanced AFTER INSERT ON journal
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION check_journal_balanced();
CREATE CONSTRAINT TRIGGER journal_line_balanced AFTER INSERT ON journal_line
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION check_journal_balanced();

-- Posted journals are corrected by reversal, never edited.
CREATE FUNCTION refuse_journal_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'posted journals are immutable: % on % is not allowed; post a reversal',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER journal_immutable BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER journal_line_immutable BEFORE UPDATE OR DELETE ON journal_line
    FOR EACH ROW EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_journal_change();
CREATE TRIGGER journal_line_no_truncate BEFORE TRUNCATE ON journal_line
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_journal_change();
"""

CALLBACKS = r"""
CREATE TABLE principal (
    principal_id text PRIMARY KEY CHECK (principal_id = lower(btrim(principal_id)) AND principal_id <> ''),
    kind         text NOT NULL CHECK (kind IN ('human', 'machine')),
    display_name text NOT NULL,
    roles        text[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now()
);

INSERT INTO principal (principal_id, kind, display_name, roles) VALUES
    ('orchestrator', 'machine', 'Countersign close engine', '{}'),
    ('reconciliation-agent', 'machine', 'Reconciliation specialist', '{}'),
    ('accruals-agent', 'machine', 'Accruals specialist', '{}'),
    ('variance-agent', 'machine', 'Variance specialist', '{}'),
    ('countersign-bot', 'machine', 'Countersign chat bot', '{}');

CREATE TABLE gate_decision (
    decision_id    bigserial PRIMARY KEY,
    gate_id        uuid NOT NULL REFERENCES gate,
    principal_id   text NOT NULL REFERENCES principal,
    decision       text NOT NULL CHECK (decision IN ('approve', 'reject')),
    reason         text NOT NULL,
    nonce          text NOT NULL UNIQUE,
    request_digest text NOT NULL,
    channel        text NOT NULL,
    decided_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (gate_id, principal_id)
);

CREATE FUNCTION refuse_decision_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'gate decisions are immutable: % on gate_decision is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER gate_decision_immutable BEFORE UPDATE OR DELETE ON gate_decision
    FOR EACH ROW EXECUTE FUNCTION refuse_decision_change();
CREATE TRIGGER gate_decision_no_truncate BEFORE TRUNCATE ON gate_decision
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_decision_change();

-- A gate's outcome is a function of its decisions and its quorum: any rejection rejects it.
CREATE VIEW gate_state AS
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
           WHEN count(d.decision_id) FILTER (WHERE d.decision = 'reject') > 0 THEN 'rejected'
           WHEN count(d.decision_id) FILTER (WHERE d.decision = 'approve') >= g.quorum THEN 'approved'
           WHEN g.lifecycle = 'cancelled' THEN 'cancelled'
           ELSE 'open'
       END AS status
  FROM gate g
  LEFT JOIN gate_decision d ON d.gate_id = g.gate_id
 GROUP BY g.gate_id;
"""

AUDIT = r"""
CREATE TABLE trace_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq       bigint NOT NULL CHECK (seq >= 0),
    hash      bytea NOT NULL CHECK (length(hash) = 32)
);
INSERT INTO trace_head (singleton, seq, hash) VALUES (true, 0, decode(repeat('00', 32), 'hex'));

CREATE TABLE trace_event (
    seq         bigint PRIMARY KEY CHECK (seq >= 1),
    ts          text NOT NULL,
    close_id    uuid,
    actor       text NOT NULL,
    kind        text NOT NULL,
    payload     jsonb NOT NULL,
    version_set jsonb NOT NULL,
    prev_hash   bytea NOT NULL CHECK (length(prev_hash) = 32),
    hash        bytea NOT NULL CHECK (length(hash) = 32)
);
CREATE INDEX trace_event_close ON trace_event (close_id, seq);

CREATE FUNCTION refuse_trace_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the close trace is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER trace_event_append_only BEFORE UPDATE OR DELETE ON trace_event
    FOR EACH ROW EXECUTE FUNCTION refuse_trace_change();
CREATE TRIGGER trace_event_no_truncate BEFORE TRUNCATE ON trace_event
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_trace_change();
ALTER TABLE trace_event ENABLE ALWAYS TRIGGER trace_event_append_only;
ALTER TABLE trace_event ENABLE ALWAYS TRIGGER trace_event_no_truncate;
"""


def upgrade() -> None:
    op.execute(ENGINE_BOOKS)
    for table in BOOK_TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION refuse_book_change()"
        )
    op.execute(ENGINE_CLOSES)
    op.execute(ENGINE_POSTINGS)
    op.execute(CALLBACKS)
    op.execute(AUDIT)


def downgrade() -> None:
    raise NotImplementedError("the initial schema is not reversible: restore from a backup instead")
