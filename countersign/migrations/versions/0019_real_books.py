"""Books from the real world (issue 23): statements with their balances, currencies, rates, supplier bank changes.

- **Statements.** `book_bank_statement` holds each bank statement a feed was imported from: the bank's account
  (an IBAN), the GL account it is booked to, its currency, dates and opening and closing balances, and the file it
  came from with that file's SHA-256. Each bank line may name its statement. A deferred constraint trigger checks, at
  commit, that a statement holds as many lines as it states and that its opening balance plus those lines equals
  its closing balance, whoever inserts them; a statement trigger checks that every line naming a statement belongs to
  one of the same feed, account and currency, and that no line joins a statement loaded before.
- **Currencies.** A book account may carry its own currency (a US dollar bank account in a sterling entity); a GL
  line may carry its transaction currency and amount beside the functional amount; a bank line its currency, value
  date and the bank's own reference.
- **Rates.** `book_rate` holds the rates a close converts at (one per currency pair per book set, with its date and
  source), so the rate a threshold was compared at is a row of the books the close runs on, never a value the engine
  passes along.
- **Supplier bank details.** `book_supplier_bank_change` holds the changes to a supplier's bank details the books
  show (from the ERP's vendor master change log); policy may send any to a person whatever the amount.

Like every book table they are insert-only for the engine and immutable for everyone; a rate or a supplier change
joins a book set only before a close runs on it.

Revision ID: 0019
Revises: 0018
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

ENGINE_ROLE = "countersign_engine"
CALLBACKS_ROLE = "countersign_callbacks"

COLUMNS = r"""
ALTER TABLE public.book_account ADD COLUMN currency char(3) CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE public.book_gl_line ADD COLUMN currency char(3) CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE public.book_gl_line ADD COLUMN currency_amount numeric(18, 2);
ALTER TABLE public.book_gl_line ADD CONSTRAINT book_gl_line_currency_pair
    CHECK ((currency IS NULL) = (currency_amount IS NULL));
ALTER TABLE public.book_bank_line ADD COLUMN currency char(3) CHECK (currency ~ '^[A-Z]{3}$');
ALTER TABLE public.book_bank_line ADD COLUMN value_date date;
ALTER TABLE public.book_bank_line ADD COLUMN bank_reference text NOT NULL DEFAULT '';
ALTER TABLE public.book_bank_line ADD COLUMN statement_id text;
"""

TABLES = r"""
CREATE TABLE public.book_bank_statement (
    book_set_id     bigint NOT NULL,
    feed_version    integer NOT NULL,
    statement_id    text NOT NULL CHECK (length(statement_id) BETWEEN 1 AND 128),
    account         text NOT NULL,
    bank_account    text NOT NULL CHECK (length(bank_account) BETWEEN 1 AND 64),
    currency        char(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    from_date       date NOT NULL,
    to_date         date NOT NULL CHECK (to_date >= from_date),
    opening_balance numeric(18, 2) NOT NULL,
    closing_balance numeric(18, 2) NOT NULL,
    opening_stated  boolean NOT NULL,
    entries         integer NOT NULL CHECK (entries >= 0),
    format          text NOT NULL CHECK (format IN ('camt053', 'mt940', 'ofx', 'csv', 'books')),
    source          text NOT NULL,
    source_sha256   text NOT NULL CHECK (source_sha256 ~ '^[0-9a-f]{64}$'),
    -- banks number statements per account (MT940 :28C:), so two accounts' statements may share an id
    PRIMARY KEY (book_set_id, feed_version, account, statement_id),
    FOREIGN KEY (book_set_id, feed_version) REFERENCES public.bank_feed
);

CREATE TABLE public.book_rate (
    book_set_id   bigint NOT NULL REFERENCES public.book_set,
    from_currency char(3) NOT NULL CHECK (from_currency ~ '^[A-Z]{3}$'),
    to_currency   char(3) NOT NULL CHECK (to_currency ~ '^[A-Z]{3}$' AND to_currency <> from_currency),
    rate          numeric(20, 10) NOT NULL CHECK (rate > 0),
    rate_date     date NOT NULL,
    source        text NOT NULL CHECK (length(source) BETWEEN 1 AND 256),
    PRIMARY KEY (book_set_id, from_currency, to_currency)
);

CREATE TABLE public.book_supplier_bank_change (
    book_set_id  bigint NOT NULL REFERENCES public.book_set,
    change_id    text NOT NULL,
    vendor       text NOT NULL,
    changed_on   date NOT NULL,
    old_account  text NOT NULL,
    new_account  text NOT NULL,
    changed_by   text NOT NULL,
    PRIMARY KEY (book_set_id, change_id)
);

-- Once per statement at commit: it lies in its books' period, its lines are as many as it says, and opening + their
-- sum = closing.
CREATE FUNCTION public.check_bank_statement_balances() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_moved  numeric;
    v_count  bigint;
    v_period text;
BEGIN
    SELECT b.period INTO v_period FROM public.book_set b WHERE b.book_set_id = NEW.book_set_id;
    IF to_char(NEW.from_date, 'YYYY-MM') <> v_period OR to_char(NEW.to_date, 'YYYY-MM') <> v_period THEN
        RAISE EXCEPTION 'statement % of account % covers % to %, outside the period %', NEW.statement_id,
            NEW.bank_account, NEW.from_date, NEW.to_date, v_period USING ERRCODE = 'check_violation';
    END IF;
    SELECT coalesce(sum(l.amount), 0), count(*) INTO v_moved, v_count FROM public.book_bank_line l
     WHERE l.book_set_id = NEW.book_set_id AND l.feed_version = NEW.feed_version
       AND l.account = NEW.account AND l.statement_id = NEW.statement_id;
    IF v_count <> NEW.entries THEN
        RAISE EXCEPTION 'statement % of account % holds % entries, not the % it states', NEW.statement_id,
            NEW.bank_account, v_count, NEW.entries USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.opening_balance + v_moved <> NEW.closing_balance THEN
        RAISE EXCEPTION 'statement % of account %: opening % + movements % is not the closing balance %',
            NEW.statement_id, NEW.bank_account, NEW.opening_balance, v_moved, NEW.closing_balance
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION public.check_bank_statement_balances() FROM PUBLIC;

-- After each statement inserting bank lines: every line naming a statement names one of its own feed, account and
-- currency, and no statement holds more lines than it states. A statement loaded earlier was complete when it
-- committed, so no line can join it later.
CREATE FUNCTION public.check_bank_lines_in_statements() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_bad record;
BEGIN
    SELECT n.bank_line_id, n.statement_id, n.feed_version INTO v_bad FROM new_lines n
     WHERE n.statement_id IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM public.book_bank_statement s
            WHERE s.book_set_id = n.book_set_id AND s.feed_version = n.feed_version
              AND s.statement_id = n.statement_id AND s.account = n.account
              AND s.currency = coalesce(n.currency, s.currency))
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'bank line % names statement %, which feed % does not hold for its account and currency',
            v_bad.bank_line_id, v_bad.statement_id, v_bad.feed_version USING ERRCODE = 'check_violation';
    END IF;
    SELECT s.statement_id, s.entries, count(l.bank_line_id) AS lines INTO v_bad
      FROM public.book_bank_statement s
      JOIN public.book_bank_line l ON l.book_set_id = s.book_set_id AND l.feed_version = s.feed_version
                                  AND l.account = s.account AND l.statement_id = s.statement_id
     WHERE (s.book_set_id, s.feed_version, s.account, s.statement_id) IN (
           SELECT DISTINCT n.book_set_id, n.feed_version, n.account, n.statement_id FROM new_lines n
            WHERE n.statement_id IS NOT NULL)
     GROUP BY s.book_set_id, s.feed_version, s.account, s.statement_id, s.entries
    HAVING count(l.bank_line_id) > s.entries
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'statement % states % entries and cannot hold %: a correction is a new feed',
            v_bad.statement_id, v_bad.entries, v_bad.lines USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION public.check_bank_lines_in_statements() FROM PUBLIC;
CREATE CONSTRAINT TRIGGER book_bank_statement_balances AFTER INSERT ON public.book_bank_statement
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.check_bank_statement_balances();
CREATE TRIGGER book_bank_lines_in_statements AFTER INSERT ON public.book_bank_line
    REFERENCING NEW TABLE AS new_lines FOR EACH STATEMENT
    EXECUTE FUNCTION public.check_bank_lines_in_statements();
ALTER TABLE public.book_bank_statement ENABLE ALWAYS TRIGGER book_bank_statement_balances;
ALTER TABLE public.book_bank_line ENABLE ALWAYS TRIGGER book_bank_lines_in_statements;
"""

# A rate or a supplier change joins a book set only before any close runs on it: what a close judged by is what its
# books held when it started.
BEFORE_ANY_CLOSE = r"""
CREATE FUNCTION public.refuse_book_rows_after_a_close_started() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.close_run r WHERE r.book_set_id = NEW.book_set_id) THEN
        RAISE EXCEPTION '% refused: a close already runs on book set %; load the books again as a new book set',
            TG_TABLE_NAME, NEW.book_set_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION public.refuse_book_rows_after_a_close_started() FROM PUBLIC;
CREATE TRIGGER book_rate_before_any_close BEFORE INSERT ON public.book_rate
    FOR EACH ROW EXECUTE FUNCTION public.refuse_book_rows_after_a_close_started();
CREATE TRIGGER book_supplier_bank_change_before_any_close BEFORE INSERT ON public.book_supplier_bank_change
    FOR EACH ROW EXECUTE FUNCTION public.refuse_book_rows_after_a_close_started();
ALTER TABLE public.book_rate ENABLE ALWAYS TRIGGER book_rate_before_any_close;
ALTER TABLE public.book_supplier_bank_change ENABLE ALWAYS TRIGGER book_supplier_bank_change_before_any_close;
"""

NEW_TABLES = ("book_bank_statement", "book_rate", "book_supplier_bank_change")


def immutability() -> str:
    statements = []
    for table in NEW_TABLES:
        statements += [
            f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON public.{table} "
            "FOR EACH ROW EXECUTE FUNCTION public.refuse_book_change()",
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON public.{table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_book_change()",
            f"ALTER TABLE public.{table} ENABLE ALWAYS TRIGGER {table}_immutable",
            f"ALTER TABLE public.{table} ENABLE ALWAYS TRIGGER {table}_no_truncate",
            f"GRANT SELECT, INSERT ON public.{table} TO {ENGINE_ROLE}",
        ]
    return ";\n".join(statements) + ";"


def upgrade() -> None:
    op.execute(COLUMNS)
    op.execute(TABLES)
    op.execute(BEFORE_ANY_CLOSE)
    op.execute(immutability())


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
