"""The Merkle frontier (RFC 9162 compact range) the checkpoint signer extends: held to the public vectors and to
`root_from_leaf_hashes` for every size up to 300 and for random split points."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.audit.merkle import (
    EMPTY_ROOT,
    FrontierError,
    LeafHashError,
    MerkleTree,
    check_frontier,
    extend_frontier,
    frontier_from_leaf_hashes,
    frontier_root,
    leaf_hash,
    pack_frontier,
    root_from_leaf_hashes,
    unpack_frontier,
    verify_consistency,
)
from tests.audit.test_merkle_vectors import CONSISTENCY_FILES, REFERENCE_HASHES, REFERENCE_ROOTS, _b64

LEAVES = [leaf_hash(i.to_bytes(4, "big")) for i in range(300)]


def _grown(hashes: list[bytes], *splits: int) -> tuple[list[bytes], int]:
    """The frontier of `hashes`, built by extending in pieces cut at `splits`."""
    frontier: list[bytes] = []
    size = 0
    for start, end in zip((0, *splits), (*splits, len(hashes)), strict=True):
        frontier, size = extend_frontier(frontier, size, hashes[start:end])
    return frontier, size


def test_the_frontier_root_of_every_prefix_of_the_reference_leaves_is_the_published_root() -> None:
    assert frontier_root([]) == EMPTY_ROOT
    for size, expected in REFERENCE_ROOTS.items():
        frontier, grown = _grown(REFERENCE_HASHES[:size])
        assert grown == size
        assert frontier_root(frontier).hex() == expected
        assert frontier_root(frontier_from_leaf_hashes(REFERENCE_HASHES[:size])).hex() == expected


def test_extending_the_frontier_from_size1_reaches_root2_of_every_consistency_vector() -> None:
    checked = 0
    for path in CONSISTENCY_FILES:
        vector = json.loads(path.read_text("utf-8"))
        size1, size2 = vector["size1"], vector["size2"]
        if vector["wantErr"] or not 0 < size1 <= size2 <= len(REFERENCE_HASHES):
            continue
        if _b64(vector["root1"]) != root_from_leaf_hashes(REFERENCE_HASHES[:size1]):
            continue  # a vector over other leaves
        old, _ = _grown(REFERENCE_HASHES[:size1])
        assert frontier_root(old) == _b64(vector["root1"]), path
        new, grown = extend_frontier(old, size1, REFERENCE_HASHES[size1:size2])
        assert grown == size2
        assert frontier_root(new) == _b64(vector["root2"]), path
        checked += 1
    assert checked >= 3  # the vectors were read, not skipped


def test_every_size_up_to_300_one_leaf_at_a_time_matches_the_level_by_level_root() -> None:
    frontier: list[bytes] = []
    for size in range(301):
        assert frontier_root(frontier) == root_from_leaf_hashes(LEAVES[:size]), size
        assert frontier == frontier_from_leaf_hashes(LEAVES[:size]), size
        assert len(frontier) == size.bit_count()
        if size < len(LEAVES):
            frontier, grown = extend_frontier(frontier, size, [LEAVES[size]])
            assert grown == size + 1


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=0, max_value=300).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(min_value=0, max_value=n), max_size=6).map(sorted))
    )
)
def test_a_frontier_extended_at_random_split_points_has_the_root_of_the_whole(case: tuple[int, list[int]]) -> None:
    size, splits = case
    frontier, grown = _grown(LEAVES[:size], *splits)
    assert grown == size
    assert frontier_root(frontier) == root_from_leaf_hashes(LEAVES[:size])
    tree = MerkleTree(LEAVES[:size])
    for old_size in splits:  # each intermediate root is one a consistency proof links to the whole
        if 0 < old_size < size:
            old, _ = _grown(LEAVES[:old_size])
            verify_consistency(old_size, size, frontier_root(old), tree.root, tree.consistency_proof(old_size))


def test_a_frontier_packs_and_unpacks_and_refuses_a_wrong_shape() -> None:
    frontier = frontier_from_leaf_hashes(LEAVES[:13])  # 13 = 8 + 4 + 1: three subtree roots
    assert len(frontier) == 3
    assert unpack_frontier(pack_frontier(frontier), 13) == frontier
    with pytest.raises(FrontierError, match="3 hashes for tree size 12, which needs 2"):
        unpack_frontier(pack_frontier(frontier), 12)
    with pytest.raises(FrontierError, match="not a whole number"):
        unpack_frontier(pack_frontier(frontier)[:-1], 13)
    with pytest.raises(FrontierError, match="hash 1 is 31 bytes"):
        check_frontier([frontier[0], frontier[1][:31], frontier[2]], 13)
    with pytest.raises(FrontierError):
        extend_frontier(frontier, 16, [LEAVES[13]])  # a frontier of 13 leaves passed as 16
    with pytest.raises(LeafHashError):
        extend_frontier(frontier, 13, [b"short"])


def test_negative_control_a_changed_subtree_root_changes_the_root() -> None:
    frontier = frontier_from_leaf_hashes(LEAVES[:13])
    changed = [frontier[0], hashlib.sha256(b"not the subtree").digest(), frontier[2]]
    assert frontier_root(changed) != root_from_leaf_hashes(LEAVES[:13])
