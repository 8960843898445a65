"""A construction set is received when it is loaded: no service role chooses its `loaded_at`.

The day an application was received (the set's `loaded_at`, UTC) is one of the two dates the due date is the later
of (migration 0018), and every notice deadline follows from the due date: the pay-less notice (0018), the payment
notice proper (0025) and the payee's default notice (0031). Until now the engine's role could insert a set with any
`loaded_at` it liked: dated forward, a payer's late payment notice would read as served in time and the payee's
default notice be refused; dated back, a timely notice would read as late. A trigger now sets `loaded_at` to the
time of the inserting transaction for every connecting role but the owner (who writes history by hand in tests and
restores). The column was already frozen after insert (0014's immutability triggers).

Revision ID: 0032
Revises: 0031
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

SQL = """
CREATE FUNCTION public.construction_set_received_now() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF session_user <> (SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c
                         WHERE c.oid = 'public.construction_set'::pg_catalog.regclass) THEN
        NEW.loaded_at := pg_catalog.now();
    END IF;
    RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.construction_set_received_now() FROM PUBLIC;
CREATE TRIGGER construction_set_received_now BEFORE INSERT ON public.construction_set
    FOR EACH ROW EXECUTE FUNCTION public.construction_set_received_now();
ALTER TABLE public.construction_set ENABLE ALWAYS TRIGGER construction_set_received_now;
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
