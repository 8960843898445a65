"""Each signed checkpoint keeps its Merkle frontier and chain head, so the next is signed without re-reading the log.

`frontier` is the RFC 9162 compact range of the checkpoint's tree: the roots of the perfect subtrees covering leaves
0..tree_size-1, largest first, 32 bytes each, concatenated (one per set bit of tree_size). `chain_head` is the hash
chain's hash of event tree_size. The signer (countersign.audit.transparency_log) extends the previous checkpoint's
frontier with
the events sealed since, so it reads only those (ADR 0039).

The database admits a checkpoint only if what it stores fits together, whoever inserts it: the frontier has one
hash per set bit of the size and folds to the root; the chain head is the hash of the event at that size; sizes only
grow. The row stays frozen as before (trace_checkpoint_append_only refuses UPDATE and DELETE for every role, the
owner too; the service roles hold no UPDATE or DELETE grant). Checkpoints signed before this revision have neither
column; the signer computes both from one full read the first time it signs after them.

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

SQL = r"""
ALTER TABLE public.trace_checkpoint ADD COLUMN frontier bytea;  -- NULL only for checkpoints signed before 0023
ALTER TABLE public.trace_checkpoint ADD COLUMN chain_head bytea CHECK (length(chain_head) = 32);
ALTER TABLE public.trace_checkpoint ADD CONSTRAINT trace_checkpoint_frontier_fits
    CHECK (frontier IS NULL OR length(frontier) = 32 * bit_count(tree_size::bit(64)));

CREATE FUNCTION public.admit_trace_checkpoint() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_hashes integer;
    v_root   bytea;
    v_event  bytea;
    v_last   bigint;
BEGIN
    IF NEW.frontier IS NULL OR NEW.chain_head IS NULL THEN
        RAISE EXCEPTION 'a checkpoint carries its Merkle frontier and chain head (tree size %)', NEW.tree_size
            USING ERRCODE = 'check_violation';
    END IF;
    v_hashes := length(NEW.frontier) / 32;
    IF length(NEW.frontier) <> 32 * bit_count(NEW.tree_size::bit(64)) THEN
        RAISE EXCEPTION 'checkpoint at tree size %: the frontier holds % bytes, not 32 per set bit of the size',
            NEW.tree_size, length(NEW.frontier) USING ERRCODE = 'check_violation';
    END IF;
    -- MTH from the frontier: fold the subtree roots from the right, node hash = SHA-256(0x01 || left || right).
    v_root := substring(NEW.frontier FROM (v_hashes - 1) * 32 + 1 FOR 32);
    FOR i IN REVERSE v_hashes - 1 .. 1 LOOP
        v_root := sha256('\x01'::bytea || substring(NEW.frontier FROM (i - 1) * 32 + 1 FOR 32) || v_root);
    END LOOP;
    IF v_root IS DISTINCT FROM NEW.root THEN
        RAISE EXCEPTION 'checkpoint at tree size %: the frontier does not hash to the root', NEW.tree_size
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT e.hash INTO v_event FROM public.trace_event e WHERE e.seq = NEW.tree_size;
    IF v_event IS DISTINCT FROM NEW.chain_head THEN
        RAISE EXCEPTION 'checkpoint at tree size %: the chain head is not the hash of event %', NEW.tree_size,
            NEW.tree_size USING ERRCODE = 'check_violation';
    END IF;
    SELECT max(c.tree_size) INTO v_last FROM public.trace_checkpoint c;
    IF v_last IS NOT NULL AND NEW.tree_size <= v_last THEN
        RAISE EXCEPTION 'checkpoint at tree size %: the log already signed tree size %', NEW.tree_size, v_last
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION public.admit_trace_checkpoint() FROM PUBLIC;
CREATE TRIGGER trace_checkpoint_admitted BEFORE INSERT ON public.trace_checkpoint
    FOR EACH ROW EXECUTE FUNCTION public.admit_trace_checkpoint();
ALTER TABLE public.trace_checkpoint ENABLE ALWAYS TRIGGER trace_checkpoint_admitted;
"""


def upgrade() -> None:
    op.execute(SQL)


def downgrade() -> None:
    raise NotImplementedError("restore from a backup instead")
