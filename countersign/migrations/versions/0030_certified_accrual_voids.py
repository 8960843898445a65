"""A certification landing after its period's accruals were approved voids that sign-off (issue 36, docs/adr/0046,
docs/adr/0050).

- **The change.** A `certified_accrual` row (written by the database alone when a certification is recorded,
  migration certified_accruals) is a change to what a close's accruals task judged: a certified sum of the close's
  entity and period that its approved journal lacks. An AFTER INSERT statement trigger on `certified_accrual`, owned
  by the owner (SECURITY DEFINER, pinned search_path, qualified names, enabled ALWAYS), records a `sign_off_void` for
  each approved approval gate of the `accruals` task's current attempt in a `close` run not closed, of the
  accrual's entity and period, whose covered accounts (`gate.accounts`: the accounts its journal posts to) include
  the accrual's cost or accrual account. The void names the table (`certified_accrual`), the certificate, the
  contract and certificate number, the account (the cost account when the gate covers it, else the accrual account)
  with its name in the close's books, the certified amount with its currency, and who certified it; it wakes the run
  like every other void, so the engine reopens the task and the new attempt's proposal includes the accrual.
- `sign_off_void.change_table` admits `certified_accrual` as well.

Revision ID: 0030
Revises: 0029
"""

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

FIXED_PATH = "pg_catalog, public, pg_temp"

CHANGE_TABLES = """
ALTER TABLE public.sign_off_void DROP CONSTRAINT sign_off_void_change_table_check;
ALTER TABLE public.sign_off_void ADD CONSTRAINT sign_off_void_change_table_check
    CHECK (change_table IN ('journal_line', 'book_gl_line', 'book_bank_line', 'construction_certificate',
                            'certified_accrual'));
"""

# The close's workflow and task names are the shipped ones (config/workflows/close.yaml), as in certified_accruals.
VOID_ON_ACCRUALS = f"""
CREATE FUNCTION public.void_on_certified_accruals() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = {FIXED_PATH} AS $$
DECLARE
    v_since bigint := (SELECT coalesce(max(v.void_id), 0) FROM public.sign_off_void v);
BEGIN
    INSERT INTO public.sign_off_void (gate_id, close_id, task, attempt, change_table, change_ref, change_line,
                                      account, account_name, description, amount, currency, changed_by)
    SELECT a.gate_id, a.close_id, a.task, a.attempt, 'certified_accrual', n.certificate_id,
           'contract ' || n.contract_id, x.account, ba.name,
           n.contract_title || ', certificate ' || n.certificate_no, n.amount, n.currency,
           coalesce(nullif(pg_catalog.array_to_string(n.certified_by, ', '), ''), session_user)
      FROM new_accruals n
      JOIN public.approved_sign_offs() a ON a.workflow = 'close' AND a.task = 'accruals'
                                         AND a.entity = n.entity AND a.period = n.period
      CROSS JOIN LATERAL (SELECT CASE WHEN n.cost_account = ANY (a.accounts) THEN n.cost_account
                                      ELSE n.accrual_account END AS account) x
      LEFT JOIN public.book_account ba ON ba.book_set_id = a.book_set_id AND ba.account = x.account
     WHERE n.cost_account = ANY (a.accounts) OR n.accrual_account = ANY (a.accounts);
    PERFORM public.wake_voided_runs(v_since);
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION public.void_on_certified_accruals() FROM PUBLIC;
CREATE TRIGGER certified_accrual_voids_sign_offs AFTER INSERT ON public.certified_accrual
    REFERENCING NEW TABLE AS new_accruals FOR EACH STATEMENT EXECUTE FUNCTION public.void_on_certified_accruals();
ALTER TABLE public.certified_accrual ENABLE ALWAYS TRIGGER certified_accrual_voids_sign_offs;
"""


def upgrade() -> None:
    op.execute(CHANGE_TABLES)
    op.execute(VOID_ON_ACCRUALS)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
