"""The trace as a transparency log: Merkle tree over sealed events, signed checkpoints, proofs.

Leaf n is the canonical bytes of event n (seq = n + 1), the same bytes the hash chain covers. Each checkpoint is
stored with its Merkle frontier (the roots of the perfect subtrees covering its leaves, countersign.audit.merkle) and
its chain
head (the hash of its last event). To sign, under the sealer's lock, the signer checks that the previous checkpoint's
frontier folds to the root it signed, reads only the events sealed since (each must link to the chain head before it
and match its own hash), extends the frontier by their leaves and signs the new root: by construction the new tree
extends the signed one, so the log never signs two inconsistent checkpoints (ADR 0039). Events before the previous
checkpoint are not re-read: an edit there is `trace verify`'s to find (the chain and the full tree against every
checkpoint), not the signer's.

The statements (`trace_checkpoint`, the head, the sealer's lock) are countersign/store/trace.py's.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus

from countersign.audit.checkpoint import Checkpoint, CheckpointError, NoteSigner, parse_checkpoint, sign_checkpoint
from countersign.audit.merkle import (
    EMPTY_ROOT,
    FrontierError,
    MerkleTree,
    extend_frontier,
    frontier_from_leaf_hashes,
    frontier_root,
    leaf_hash,
    pack_frontier,
    unpack_frontier,
)
from countersign.audit.trace import (
    GENESIS_HASH,
    VerifyResult,
    append_event,
    chain_problem,
    iter_sealed,
    seal_pending,
    verify_chain,
)
from countersign.states import TraceKind
from countersign.store import trace as store
from countersign.store.trace import TraceHead

HEX = "hex"


class LogInconsistent(Exception):
    """The log no longer matches a checkpoint it signed: events were changed, reordered or removed."""

    def __init__(self, tree_size: int, reason: str) -> None:
        super().__init__(f"log inconsistent with signed checkpoint at tree size {tree_size}: {reason}")
        self.tree_size = tree_size
        self.reason = reason


@dataclass(frozen=True)
class StoredCheckpoint:
    tree_size: int
    root: bytes
    origin: str
    key_name: str
    note: bytes
    frontier: bytes | None = (
        None  # packed (countersign.audit.merkle.pack_frontier); None for checkpoints signed before 0023
    )
    chain_head: bytes | None = None  # the hash of event tree_size; None likewise
    lock_held_s: float | None = field(default=None, compare=False)  # how long signing held the sealer's lock

    @property
    def checkpoint(self) -> Checkpoint:
        return parse_checkpoint(self.note.split(b"\n\n", 1)[0] + b"\n")


async def leaf_hashes(conn: AsyncConnection[Any], *, upto_seq: int | None = None) -> list[bytes]:
    hashes = []
    async for batch in iter_sealed(conn, upto_seq=upto_seq):
        for record in batch:
            if record.canonical is None:
                raise ValueError(f"event {record.seq} cannot be canonicalised: the log was edited (run trace verify)")
            hashes.append(leaf_hash(record.canonical))
    return hashes


async def load_tree(conn: AsyncConnection[Any], *, size: int | None = None) -> MerkleTree:
    """The whole tree (or its first `size` leaves), for proofs: reads every event, so never under the sealer lock."""
    hashes = await leaf_hashes(conn, upto_seq=size)
    if size is not None and len(hashes) != size:
        raise ValueError(f"tree size {size} requested but the log holds {len(hashes)} events")
    return MerkleTree(hashes)


def tree_root(tree: MerkleTree) -> bytes:
    return tree.root if tree.size else EMPTY_ROOT


async def latest_checkpoint(conn: AsyncConnection[Any]) -> StoredCheckpoint | None:
    row = await store.latest_checkpoint(conn)
    if row is None:
        return None
    return StoredCheckpoint(
        row.tree_size,
        bytes(row.root),
        row.origin,
        row.key_name,
        row.note.encode(),
        None if row.frontier is None else bytes(row.frontier),
        None if row.chain_head is None else bytes(row.chain_head),
    )


def check_extends(tree: MerkleTree, previous: StoredCheckpoint | None) -> None:
    """Raise LogInconsistent unless `tree` contains the tree `previous` signed (a full check, for `trace verify`)."""
    if previous is None:
        return
    if tree.size < previous.tree_size:
        raise LogInconsistent(
            previous.tree_size, f"the log holds {tree.size} events, fewer than the {previous.tree_size} signed"
        )
    old_root = MerkleTree([tree.leaf(i) for i in range(previous.tree_size)]).root
    if old_root != previous.root:
        raise LogInconsistent(previous.tree_size, "the first events no longer hash to the signed root")


@dataclass(frozen=True)
class LogState:
    """The tree of the first `size` events as the signer carries it: its frontier and the chain's hash at `size`."""

    size: int
    frontier: list[bytes]
    chain_head: bytes

    @property
    def root(self) -> bytes:
        return frontier_root(self.frontier)


EMPTY_LOG = LogState(0, [], GENESIS_HASH)


async def _read_since(conn: AsyncConnection[Any], start: LogState, *, upto_seq: int | None, signed: int) -> LogState:
    """`start` extended by the sealed events after it (up to `upto_seq`), each checked as the next link of the chain.

    `signed` is the tree size of the checkpoint `start` came from, named in the error when a link is broken.
    """
    frontier, size, head = start.frontier, start.size, start.chain_head
    async for batch in iter_sealed(conn, after_seq=start.size, upto_seq=upto_seq):
        leaves = []
        for record in batch:
            problem = chain_problem(record, size + 1, head)
            if problem is not None:
                raise LogInconsistent(signed, f"event {problem[0]} since the signed tree: {problem[1]}")
            assert record.canonical is not None  # an intact record has its canonical bytes
            leaves.append(leaf_hash(record.canonical))
            head, size = record.hash, size + 1
        frontier, _ = extend_frontier(frontier, size - len(leaves), leaves)
    return LogState(size, frontier, head)


async def _head(conn: AsyncConnection[Any]) -> TraceHead:
    head = await store.read_head(conn)
    assert head is not None  # migration 0001 inserts the singleton; nothing may delete it
    return head


def _stored_state(previous: StoredCheckpoint) -> LogState:
    """The signed tree as its row stores it, once the row is checked against itself and its signed note."""
    try:
        note = previous.checkpoint
    except CheckpointError as exc:
        raise LogInconsistent(previous.tree_size, f"the stored note does not parse: {exc.reason}") from None
    if note.size != previous.tree_size or note.root != previous.root:
        raise LogInconsistent(previous.tree_size, "the stored row does not match its signed note")
    assert previous.frontier is not None and previous.chain_head is not None
    try:
        frontier = unpack_frontier(previous.frontier, previous.tree_size)
    except FrontierError as exc:
        raise LogInconsistent(previous.tree_size, f"the stored {exc}") from None
    if frontier_root(frontier) != previous.root:
        raise LogInconsistent(previous.tree_size, "the stored frontier does not hash to the signed root")
    return LogState(previous.tree_size, frontier, previous.chain_head)


async def _previous_state(conn: AsyncConnection[Any], previous: StoredCheckpoint | None) -> LogState:
    """Where signing starts: the previous checkpoint's frontier, or, for a checkpoint signed before migration 0023
    (no frontier stored), the frontier of its tree from one full read, checked against its root."""
    if previous is None:
        return EMPTY_LOG
    if previous.frontier is not None and previous.chain_head is not None:
        return _stored_state(previous)
    leaves: list[bytes] = []
    head = GENESIS_HASH
    async for batch in iter_sealed(conn, upto_seq=previous.tree_size):
        for record in batch:
            problem = chain_problem(record, len(leaves) + 1, head)
            if problem is not None:
                raise LogInconsistent(previous.tree_size, f"event {problem[0]}: {problem[1]}")
            assert record.canonical is not None
            leaves.append(leaf_hash(record.canonical))
            head = record.hash
    if len(leaves) < previous.tree_size:
        raise LogInconsistent(
            previous.tree_size, f"the log holds {len(leaves)} events, fewer than the {previous.tree_size} signed"
        )
    frontier = frontier_from_leaf_hashes(leaves)
    if frontier_root(frontier) != previous.root:
        raise LogInconsistent(previous.tree_size, "the first events no longer hash to the signed root")
    return LogState(previous.tree_size, frontier, head)


async def current_log_state(conn: AsyncConnection[Any], previous: StoredCheckpoint | None) -> LogState:
    """The whole sealed log as a frontier, proven to extend `previous`. Call under the sealer's lock (nothing seals
    meanwhile): reads only the events after `previous` (all of them the first time, or after a pre-0023 checkpoint)."""
    start = await _previous_state(conn, previous)
    signed = previous.tree_size if previous is not None else 0
    head = await _head(conn)
    if head.seq < start.size:
        raise LogInconsistent(signed, f"the log holds {head.seq} events, fewer than the {start.size} signed")
    state = await _read_since(conn, start, upto_seq=head.seq, signed=signed)
    if state.size != head.seq or state.chain_head != bytes(head.hash):
        raise LogInconsistent(
            signed, f"the head says {head.seq} events but the log links {state.size}: events are missing"
        )
    return state


async def sign_log_checkpoint(
    conn: AsyncConnection[Any],
    signer: NoteSigner,
    origin: str,
    *,
    actor: str,
    close_id: str | None = None,
    min_new_events: int = 1,
) -> StoredCheckpoint | None:
    """Seal, then sign a checkpoint of the whole log if it grew by at least `min_new_events`.

    Returns the new checkpoint, or None when there was nothing new to sign. (Signing appends a
    `checkpoint_signed` event, so a periodic signer passes 2 to avoid signing only its own last event.) Raises
    LogInconsistent, signing nothing, when the stored checkpoint or the events since it do not hold together.
    """
    await seal_pending(conn)
    async with conn.transaction():
        await store.take_seal_lock(conn)  # no sealing while we read and sign
        locked_at = time.perf_counter()
        previous = await latest_checkpoint(conn)
        state = await current_log_state(conn, previous)
        if state.size == 0 or (previous is not None and state.size - previous.tree_size < min_new_events):
            return None
        root = state.root
        checkpoint = Checkpoint(origin, state.size, root)
        note = sign_checkpoint(checkpoint, signer)
        frontier = pack_frontier(state.frontier)
        await store.insert_checkpoint(
            conn,
            tree_size=state.size,
            root=root,
            origin=origin,
            key_name=signer.name,
            note=note.decode(),
            frontier=frontier,
            chain_head=state.chain_head,
        )
        await append_event(
            conn,
            actor=actor,
            close_id=close_id,
            kind=TraceKind.CHECKPOINT_SIGNED,
            payload={"tree_size": state.size, "root": base64.b64encode(root).decode(), "origin": origin},
        )
    lock_held_s = time.perf_counter() - locked_at  # to the commit that released it
    await seal_pending(conn)
    return StoredCheckpoint(state.size, root, origin, signer.name, note, frontier, state.chain_head, lock_held_s)


@dataclass(frozen=True)
class LogVerdict:
    """`trace verify`'s answer: the chain (`chain`, with the Merkle root of the whole log when it is intact), the
    last signed checkpoint, and how many signed checkpoints the log was held against."""

    chain: VerifyResult
    latest: StoredCheckpoint | None
    checkpoints: int


async def verify_log(conn: AsyncConnection[Any]) -> LogVerdict:
    """Verify the chain and every signed checkpoint in one streaming read (one REPEATABLE READ snapshot).

    Each checkpoint's root must be the Merkle root of the log's first `tree_size` events, computed as the read goes
    (a frontier, never the whole tree). Raises LogInconsistent naming the first checkpoint the log no longer gives,
    or the last one when the log is now shorter than it; a broken chain is returned in `chain`, as verify_chain does.
    """
    if conn.info.transaction_status == TransactionStatus.IDLE:
        async with store.snapshot(conn):
            return await _verify_log(conn)
    return await _verify_log(conn)


async def _verify_log(conn: AsyncConnection[Any]) -> LogVerdict:
    signed = await store.signed_roots(conn)
    latest = await latest_checkpoint(conn)
    chain = await verify_chain(conn, signed_roots=signed)
    if not chain.ok:
        return LogVerdict(chain, latest, len(signed))
    if latest is not None and chain.size < latest.tree_size:
        raise LogInconsistent(
            latest.tree_size, f"the log holds {chain.size} events, fewer than the {latest.tree_size} signed"
        )
    if chain.unsigned_at is not None:
        raise LogInconsistent(chain.unsigned_at, "the first events no longer hash to the signed root")
    return LogVerdict(chain, latest, len(signed))


async def check_against_latest_checkpoint(conn: AsyncConnection[Any]) -> StoredCheckpoint | None:
    """Raise LogInconsistent if the log does not extend the last signed checkpoint; return that checkpoint."""
    previous = await latest_checkpoint(conn)
    if previous is None:
        return None
    check_extends(await load_tree(conn), previous)
    return previous


def inclusion_json(tree: MerkleTree, leaf_index: int) -> dict[str, Any]:
    return {
        "leaf_index": leaf_index,
        "tree_size": tree.size,
        "leaf_hash": tree.leaf(leaf_index).hex(),
        "root": tree.root.hex(),
        "proof": [h.hex() for h in tree.inclusion_proof(leaf_index)],
    }


def consistency_json(tree: MerkleTree, from_size: int) -> dict[str, Any]:
    old = MerkleTree([tree.leaf(i) for i in range(from_size)])
    return {
        "from_size": from_size,
        "to_size": tree.size,
        "from_root": tree_root(old).hex(),
        "to_root": tree.root.hex(),
        "proof": [h.hex() for h in tree.consistency_proof(from_size)] if from_size else [],
    }
