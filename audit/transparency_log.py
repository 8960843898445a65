"""The trace as a transparency log: Merkle tree over sealed events, signed checkpoints, proofs.

Leaf n is the canonical bytes of event n (seq = n + 1), the same bytes the hash chain covers. A checkpoint is signed
only after checking that the tree it names extends the last signed one (same root over the old size), under the
sealer's lock, so the log never signs two inconsistent checkpoints.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from audit.checkpoint import Checkpoint, NoteSigner, parse_checkpoint, sign_checkpoint
from audit.merkle import EMPTY_ROOT, MerkleTree, leaf_hash
from audit.trace import SEAL_LOCK, append_event, iter_sealed, seal_pending

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
    hashes = await leaf_hashes(conn, upto_seq=size)
    if size is not None and len(hashes) != size:
        raise ValueError(f"tree size {size} requested but the log holds {len(hashes)} events")
    return MerkleTree(hashes)


def tree_root(tree: MerkleTree) -> bytes:
    return tree.root if tree.size else EMPTY_ROOT


@dataclass(frozen=True)
class _CheckpointRow:
    tree_size: int
    root: bytes
    origin: str
    key_name: str
    note: str


async def latest_checkpoint(conn: AsyncConnection[Any]) -> StoredCheckpoint | None:
    async with conn.cursor(row_factory=class_row(_CheckpointRow)) as cur:
        await cur.execute(
            "SELECT tree_size, root, origin, key_name, note FROM trace_checkpoint ORDER BY tree_size DESC LIMIT 1"
        )
        row = await cur.fetchone()
    if row is None:
        return None
    return StoredCheckpoint(row.tree_size, bytes(row.root), row.origin, row.key_name, row.note.encode())


def check_extends(tree: MerkleTree, previous: StoredCheckpoint | None) -> None:
    """Raise LogInconsistent unless `tree` contains the tree `previous` signed."""
    if previous is None:
        return
    if tree.size < previous.tree_size:
        raise LogInconsistent(
            previous.tree_size, f"the log holds {tree.size} events, fewer than the {previous.tree_size} signed"
        )
    old_root = MerkleTree([tree.leaf(i) for i in range(previous.tree_size)]).root
    if old_root != previous.root:
        raise LogInconsistent(previous.tree_size, "the first events no longer hash to the signed root")


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
    `checkpoint_signed` event, so a periodic signer passes 2 to avoid signing only its own last event.)
    """
    await seal_pending(conn)
    async with conn.transaction(), conn.cursor() as cur:
        await cur.execute("SELECT pg_advisory_xact_lock(%s)", (SEAL_LOCK,))  # no sealing while we read and sign
        tree = await load_tree(conn)
        previous = await latest_checkpoint(conn)
        check_extends(tree, previous)
        if tree.size == 0 or (previous is not None and tree.size - previous.tree_size < min_new_events):
            return None
        checkpoint = Checkpoint(origin, tree.size, tree.root)
        note = sign_checkpoint(checkpoint, signer)
        await cur.execute(
            "INSERT INTO trace_checkpoint (tree_size, root, origin, key_name, note) VALUES (%s, %s, %s, %s, %s)",
            (tree.size, tree.root, origin, signer.name, note.decode()),
        )
        await append_event(
            conn,
            actor=actor,
            close_id=close_id,
            kind="checkpoint_signed",
            payload={"tree_size": tree.size, "root": base64.b64encode(tree.root).decode(), "origin": origin},
        )
    await seal_pending(conn)
    return StoredCheckpoint(tree.size, tree.root, origin, signer.name, note)


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


@dataclass(frozen=True)
class LogProgress:
    """How far the log has come: its last sealed sequence number and the age of its last signed checkpoint."""

    head_seq: int | None
    checkpoint_age_s: float | None


async def log_progress(conn: AsyncConnection[Any]) -> LogProgress:
    async with conn.cursor(row_factory=class_row(LogProgress)) as cur:
        await cur.execute(
            "SELECT (SELECT seq FROM trace_head) AS head_seq,"
            " (SELECT extract(epoch FROM now() - max(signed_at))::float8 FROM trace_checkpoint) AS checkpoint_age_s"
        )
        row = await cur.fetchone()
    assert row is not None
    return row


async def checkpoint_note(conn: AsyncConnection[Any], tree_size: int) -> str | None:
    """The signed note of the checkpoint at `tree_size`, if the log signed one there."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT note FROM trace_checkpoint WHERE tree_size = %s", (tree_size,))
        note = await cur.fetchone()
    return None if note is None else str(note)
