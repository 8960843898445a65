"""RFC 9162 (Certificate Transparency v2) Merkle tree: hashes, proof generation, proof verification.

Leaves are given as leaf hashes (`leaf_hash(data)`), so the tree never sees the entries themselves. Tree sizes
and indexes are bounded by 2**64 - 1, as in RFC 9162. Verification follows §2.1.3.2 and §2.1.4.2 step by step
and raises `ProofError` on any failure; generation follows §2.1.3.1 (PATH) and §2.1.4.1 (PROOF/SUBPROOF).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

HASH_SIZE = 32
MAX_TREE_SIZE = 2**64 - 1
EMPTY_ROOT = hashlib.sha256(b"").digest()

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"


class ProofError(ValueError):
    """A proof did not verify; `reason` says which check failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TreeRangeError(ValueError):
    """A proof was asked for an index or size the tree cannot prove."""

    def __init__(self, what: str, value: int, tree_size: int) -> None:
        super().__init__(f"{what} {value} is out of range for a tree of size {tree_size}")
        self.what = what
        self.value = value
        self.tree_size = tree_size


class LeafHashError(ValueError):
    def __init__(self, index: int, length: int) -> None:
        super().__init__(f"leaf hash {index} is {length} bytes, expected {HASH_SIZE}")
        self.index = index
        self.length = length


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _check_leaf_hashes(hashes: Sequence[bytes]) -> None:
    if len(hashes) > MAX_TREE_SIZE:
        raise TreeRangeError("tree size", len(hashes), MAX_TREE_SIZE)
    for index, item in enumerate(hashes):
        if len(item) != HASH_SIZE:
            raise LeafHashError(index, len(item))


def _next_level(level: Sequence[bytes]) -> list[bytes]:
    """Hash adjacent pairs; an odd last node is carried up unchanged.

    Carrying the odd node up gives exactly the RFC 9162 tree: the node at level j, index i, is
    MTH(D[i * 2**j : min((i + 1) * 2**j, n)]), the split at the largest power of two below the size.
    """
    sha256 = hashlib.sha256
    pairs = iter(level)
    upper = [sha256(_NODE_PREFIX + left + right).digest() for left, right in zip(pairs, pairs, strict=False)]
    if len(level) % 2:
        upper.append(level[-1])
    return upper


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """MTH (RFC 9162 §2.1.1), computed level by level: about 0.5 s for 1,000,000 leaves in CPython."""
    _check_leaf_hashes(hashes)
    if not hashes:
        return EMPTY_ROOT
    level: Sequence[bytes] = hashes
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def _largest_power_of_two_below(size: int) -> int:
    """k with k < size <= 2k, for size >= 2."""
    return 1 << ((size - 1).bit_length() - 1)


class MerkleTree:
    """A tree over fixed leaf hashes that keeps every level so proofs are O(log n) lookups.

    Level 0 is the caller's leaf hashes (one 8-byte reference each; the bytes objects are shared). Every level
    above is packed into one `bytes` of 32 bytes per node, so the cache costs about 32 * n bytes beyond the
    leaves (about 32 MB for 1,000,000 leaves; building it takes about as long as `root_from_leaf_hashes`).
    """

    __slots__ = ("_leaves", "_packed_levels", "_root", "size")

    def __init__(self, leaf_hashes: Sequence[bytes]) -> None:
        _check_leaf_hashes(leaf_hashes)
        self._leaves: tuple[bytes, ...] = tuple(leaf_hashes)
        self.size = len(self._leaves)
        self._packed_levels: list[bytes] = []
        level: Sequence[bytes] = self._leaves
        while len(level) > 1:
            level = _next_level(level)
            self._packed_levels.append(b"".join(level))
        self._root = level[0] if level else EMPTY_ROOT

    @property
    def root(self) -> bytes:
        return self._root

    def leaf(self, index: int) -> bytes:
        if not 0 <= index < self.size:
            raise TreeRangeError("leaf index", index, self.size)
        return self._leaves[index]

    def _subtree(self, start: int, size: int) -> bytes:
        """MTH(D[start : start + size]) for a range that is a node of this tree (every range a proof needs is)."""
        level = (size - 1).bit_length()
        if level == 0:
            return self._leaves[start]
        offset = (start >> level) * HASH_SIZE
        return self._packed_levels[level - 1][offset : offset + HASH_SIZE]

    def inclusion_proof(self, index: int) -> list[bytes]:
        """PATH(index, D[n]) of RFC 9162 §2.1.3.1, nearest sibling first."""
        if not 0 <= index < self.size:
            raise TreeRangeError("leaf index", index, self.size)
        path: list[bytes] = []
        start, size, m = 0, self.size, index
        while size > 1:
            k = _largest_power_of_two_below(size)
            if m < k:
                path.append(self._subtree(start + k, size - k))
                size = k
            else:
                path.append(self._subtree(start, k))
                start, size, m = start + k, size - k, m - k
        path.reverse()
        return path

    def consistency_proof(self, old_size: int) -> list[bytes]:
        """PROOF(old_size, D[n]) of RFC 9162 §2.1.4.1; empty when old_size equals the tree size."""
        if not 0 < old_size <= self.size:
            raise TreeRangeError("old size", old_size, self.size)
        proof: list[bytes] = []
        start, size, m, complete = 0, self.size, old_size, True
        while m != size:
            k = _largest_power_of_two_below(size)
            if m <= k:
                proof.append(self._subtree(start + k, size - k))
                size = k
            else:
                proof.append(self._subtree(start, k))
                start, size, m, complete = start + k, size - k, m - k, False
        if not complete:
            proof.append(self._subtree(start, size))
        proof.reverse()
        return proof


def inclusion_proof(index: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """One-off PATH; builds the whole tree (O(n)), so keep a `MerkleTree` for many proofs."""
    return MerkleTree(leaf_hashes).inclusion_proof(index)


def consistency_proof(old_size: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """One-off PROOF; builds the whole tree (O(n)), so keep a `MerkleTree` for many proofs."""
    return MerkleTree(leaf_hashes).consistency_proof(old_size)


def _check_size(name: str, value: int) -> None:
    if not 0 <= value <= MAX_TREE_SIZE:
        raise ProofError(f"{name} {value} is outside 0..2**64-1")


def _check_proof_hashes(proof: Sequence[bytes]) -> None:
    for position, item in enumerate(proof):
        if len(item) != HASH_SIZE:
            raise ProofError(f"proof element {position} is {len(item)} bytes, expected {HASH_SIZE}")


def verify_inclusion(leaf_hash: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes) -> None:
    """RFC 9162 §2.1.3.2; returns only if `leaf_hash` is at `index` in the tree of `tree_size` with `root`."""
    _check_size("leaf index", index)
    _check_size("tree size", tree_size)
    if index >= tree_size:
        raise ProofError(f"leaf index {index} is not below tree size {tree_size}")
    if len(leaf_hash) != HASH_SIZE:
        raise ProofError(f"leaf hash is {len(leaf_hash)} bytes, expected {HASH_SIZE}")
    _check_proof_hashes(proof)
    fn, sn, r = index, tree_size - 1, leaf_hash
    for p in proof:
        if sn == 0:
            raise ProofError("inclusion proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("inclusion proof is shorter than the path to the root")
    if r != root:
        raise ProofError("inclusion proof does not lead to the given root")


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> None:
    """RFC 9162 §2.1.4.2; returns only if the tree of `old_size` is a prefix of the tree of `new_size`.

    Equal sizes need an empty proof and equal roots (and the size-0 root must be SHA-256 of nothing). A proof from
    the empty tree is refused as meaningless, as transparency-dev/merkle does, rather than accepted vacuously.
    """
    _check_size("old size", old_size)
    _check_size("new size", new_size)
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is greater than new size {new_size}")
    if old_size == new_size:
        if proof:
            raise ProofError("sizes are equal but the proof is not empty")
        if old_root != new_root:
            raise ProofError("sizes are equal but the roots differ")
        if old_size == 0 and old_root != EMPTY_ROOT:
            raise ProofError("the root of the empty tree must be SHA-256 of the empty string")
        return
    if old_size == 0:
        raise ProofError("a consistency proof from the empty tree is meaningless")
    if not proof:
        raise ProofError("consistency proof is empty")
    _check_proof_hashes(proof)
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("consistency proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("consistency proof is shorter than the path to the root")
    if fr != old_root:
        raise ProofError("consistency proof does not lead to the old root")
    if sr != new_root:
        raise ProofError("consistency proof does not lead to the new root")


# --- the compact range (frontier): the roots of the perfect subtrees that cover leaves 0..n ---------------------


class FrontierError(ValueError):
    """A frontier does not fit its tree size: wrong number of hashes, or a hash of the wrong length."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"frontier: {reason}")
        self.reason = reason


def check_frontier(frontier: Sequence[bytes], size: int) -> None:
    """Raise FrontierError unless `frontier` could be the frontier of a tree of `size` leaves.

    A tree of n leaves is covered by one perfect subtree per set bit of n, largest (leftmost) first (RFC 9162's MTH
    splits at the largest power of two below n, so these are exactly its left spine's complete subtrees).
    """
    if not 0 <= size <= MAX_TREE_SIZE:
        raise FrontierError(f"tree size {size} is outside 0..2**64-1")
    expected = size.bit_count()
    if len(frontier) != expected:
        raise FrontierError(f"{len(frontier)} hashes for tree size {size}, which needs {expected}")
    for position, item in enumerate(frontier):
        if len(item) != HASH_SIZE:
            raise FrontierError(f"hash {position} is {len(item)} bytes, expected {HASH_SIZE}")


def frontier_root(frontier: Sequence[bytes]) -> bytes:
    """MTH of the tree the frontier covers: fold the subtree roots from the right (EMPTY_ROOT for no leaves)."""
    if not frontier:
        return EMPTY_ROOT
    root = frontier[-1]
    for left in reversed(frontier[:-1]):
        root = node_hash(left, root)
    return root


def extend_frontier(frontier: Sequence[bytes], size: int, leaf_hashes: Iterable[bytes]) -> tuple[list[bytes], int]:
    """The frontier and size after appending `leaf_hashes` to a tree of `size` leaves with `frontier`.

    Each leaf costs one hash per trailing one-bit of the size it lands on (amortised one node hash per leaf).
    """
    check_frontier(frontier, size)
    sha256 = hashlib.sha256
    stack = list(frontier)
    for leaf in leaf_hashes:
        if len(leaf) != HASH_SIZE:
            raise LeafHashError(size, len(leaf))
        if size >= MAX_TREE_SIZE:
            raise TreeRangeError("tree size", size + 1, MAX_TREE_SIZE)
        node, carry = leaf, size
        while carry & 1:
            node = sha256(_NODE_PREFIX + stack.pop() + node).digest()
            carry >>= 1
        stack.append(node)
        size += 1
    return stack, size


def frontier_from_leaf_hashes(hashes: Sequence[bytes]) -> list[bytes]:
    """The frontier of the tree over `hashes`, each perfect subtree hashed level by level (fast for a full read)."""
    _check_leaf_hashes(hashes)
    frontier: list[bytes] = []
    start, remaining = 0, len(hashes)
    while remaining:
        width = 1 << (remaining.bit_length() - 1)
        frontier.append(root_from_leaf_hashes(hashes[start : start + width]))
        start, remaining = start + width, remaining - width
    return frontier


def pack_frontier(frontier: Sequence[bytes]) -> bytes:
    """The frontier as stored: its hashes concatenated, largest subtree first (32 bytes each)."""
    return b"".join(frontier)


def unpack_frontier(packed: bytes, size: int) -> list[bytes]:
    """The frontier stored for a tree of `size` leaves; FrontierError if the bytes cannot be one."""
    if len(packed) % HASH_SIZE:
        raise FrontierError(f"{len(packed)} bytes is not a whole number of {HASH_SIZE}-byte hashes")
    frontier = [packed[offset : offset + HASH_SIZE] for offset in range(0, len(packed), HASH_SIZE)]
    check_frontier(frontier, size)
    return frontier
