"""RFC 9162 Merkle proofs against the transparency-dev/merkle vectors, the RFC text, and random trees."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.audit.merkle import (
    EMPTY_ROOT,
    MerkleTree,
    ProofError,
    TreeRangeError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)

VECTORS = Path(__file__).resolve().parents[1] / "data" / "merkle" / "testdata"
INCLUSION_FILES = sorted((VECTORS / "inclusion").rglob("*.json"))
CONSISTENCY_FILES = sorted((VECTORS / "consistency").rglob("*.json"))

# The leaves behind the vectors' roots (transparency-dev/merkle testdata, RFC 6962 test leaves).
REFERENCE_LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
REFERENCE_HASHES = [leaf_hash(leaf) for leaf in REFERENCE_LEAVES]
REFERENCE_ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


def _b64(value: str) -> bytes:
    return base64.b64decode(value, validate=True)


def _proof(vector: dict[str, Any]) -> list[bytes]:
    return [_b64(item) for item in vector["proof"] or []]


def _vector_id(path: Path) -> str:
    return str(path.relative_to(VECTORS))


# Straight from the RFC 9162 §2.1 definitions, recursively: slow, obviously right, for small trees only.
def _mth(hashes: list[bytes]) -> bytes:
    if not hashes:
        return EMPTY_ROOT
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return node_hash(_mth(hashes[:k]), _mth(hashes[k:]))


def _path(m: int, hashes: list[bytes]) -> list[bytes]:
    if len(hashes) == 1:
        return []
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    if m < k:
        return [*_path(m, hashes[:k]), _mth(hashes[k:])]
    return [*_path(m - k, hashes[k:]), _mth(hashes[:k])]


def _subproof(m: int, hashes: list[bytes], complete: bool) -> list[bytes]:
    if m == len(hashes):
        return [] if complete else [_mth(hashes)]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    if m <= k:
        return [*_subproof(m, hashes[:k], complete), _mth(hashes[k:])]
    return [*_subproof(m - k, hashes[k:], False), _mth(hashes[:k])]


def _shape(index: int, size: int) -> tuple[int, int]:
    """transparency-dev/merkle's decompInclProof: what an inclusion proof's hashing depends on besides index."""
    inner = (index ^ (size - 1)).bit_length()
    return inner, bin(index >> inner).count("1")


def test_vector_folders_are_all_present() -> None:
    assert len(INCLUSION_FILES) >= 90
    assert len(CONSISTENCY_FILES) >= 90
    wanted = [_load(path)["wantErr"] for path in INCLUSION_FILES + CONSISTENCY_FILES]
    assert wanted.count(True) > 100
    assert wanted.count(False) >= 10


@pytest.mark.parametrize("path", INCLUSION_FILES, ids=_vector_id)
def test_inclusion_vector(path: Path) -> None:
    vector = _load(path)
    arguments = (_b64(vector["leafHash"]), vector["leafIdx"], vector["treeSize"], _proof(vector), _b64(vector["root"]))
    if vector["wantErr"]:
        with pytest.raises(ProofError):
            verify_inclusion(*arguments)
    else:
        verify_inclusion(*arguments)


@pytest.mark.parametrize("path", CONSISTENCY_FILES, ids=_vector_id)
def test_consistency_vector(path: Path) -> None:
    vector = _load(path)
    arguments = (vector["size1"], vector["size2"], _b64(vector["root1"]), _b64(vector["root2"]), _proof(vector))
    if vector["wantErr"]:
        with pytest.raises(ProofError):
            verify_consistency(*arguments)
    else:
        verify_consistency(*arguments)


def test_empty_tree_root_is_sha256_of_nothing() -> None:
    assert root_from_leaf_hashes([]).hex().startswith("e3b0c442")
    assert root_from_leaf_hashes([]) == MerkleTree([]).root == EMPTY_ROOT


def test_reference_roots_for_every_prefix_of_the_eight_leaves() -> None:
    assert root_from_leaf_hashes(REFERENCE_HASHES).hex().startswith("5dc9da79")
    for size, expected in REFERENCE_ROOTS.items():
        assert root_from_leaf_hashes(REFERENCE_HASHES[:size]).hex() == expected
        assert MerkleTree(REFERENCE_HASHES[:size]).root.hex() == expected


def test_generated_proofs_over_reference_leaves_verify() -> None:
    for size in range(1, 9):
        tree = MerkleTree(REFERENCE_HASHES[:size])
        for index in range(size):
            verify_inclusion(REFERENCE_HASHES[index], index, size, tree.inclusion_proof(index), tree.root)
        for old_size in range(1, size + 1):
            old_root = root_from_leaf_hashes(REFERENCE_HASHES[:old_size])
            verify_consistency(old_size, size, old_root, tree.root, tree.consistency_proof(old_size))


def test_generated_inclusion_proofs_equal_the_vector_proofs() -> None:
    compared = 0
    for path in INCLUSION_FILES:
        vector = _load(path)
        index, size = vector["leafIdx"], vector["treeSize"]
        if vector["wantErr"] or not 0 <= index < size <= len(REFERENCE_HASHES):
            continue
        if _b64(vector["leafHash"]) != REFERENCE_HASHES[index]:
            continue
        assert _b64(vector["root"]) == root_from_leaf_hashes(REFERENCE_HASHES[:size]), path
        assert inclusion_proof(index, REFERENCE_HASHES[:size]) == _proof(vector), path
        compared += 1
    assert compared >= 5


def test_generated_consistency_proofs_equal_the_vector_proofs() -> None:
    compared = 0
    for path in CONSISTENCY_FILES:
        vector = _load(path)
        old_size, size = vector["size1"], vector["size2"]
        if vector["wantErr"] or not 0 < old_size <= size <= len(REFERENCE_HASHES):
            continue
        if _b64(vector["root1"]) != root_from_leaf_hashes(REFERENCE_HASHES[:old_size]):
            continue
        assert _b64(vector["root2"]) == root_from_leaf_hashes(REFERENCE_HASHES[:size]), path
        assert consistency_proof(old_size, REFERENCE_HASHES[:size]) == _proof(vector), path
        compared += 1
    assert compared >= 5


def test_cached_tree_matches_the_rfc_definitions_for_every_proof_up_to_70_leaves() -> None:
    hashes = [leaf_hash(i.to_bytes(2, "big")) for i in range(70)]
    for size in range(1, 71):
        prefix = hashes[:size]
        tree = MerkleTree(prefix)
        assert tree.root == _mth(prefix) == root_from_leaf_hashes(prefix)
        for index in range(size):
            assert tree.inclusion_proof(index) == _path(index, prefix)
        for old_size in range(1, size + 1):
            assert tree.consistency_proof(old_size) == _subproof(old_size, prefix, True)


def test_every_bit_flip_in_a_reference_proof_is_rejected() -> None:
    for size in range(2, 9):
        tree = MerkleTree(REFERENCE_HASHES[:size])
        for index in range(size):
            proof = tree.inclusion_proof(index)
            for position, bit in ((p, b) for p in range(len(proof)) for b in range(256)):
                with pytest.raises(ProofError):
                    verify_inclusion(REFERENCE_HASHES[index], index, size, _flip(proof, position, bit), tree.root)
        for old_size in range(1, size):
            old_root = root_from_leaf_hashes(REFERENCE_HASHES[:old_size])
            proof = tree.consistency_proof(old_size)
            for position, bit in ((p, b) for p in range(len(proof)) for b in range(256)):
                with pytest.raises(ProofError):
                    verify_consistency(old_size, size, old_root, tree.root, _flip(proof, position, bit))


def test_proof_generation_refuses_out_of_range_requests() -> None:
    tree = MerkleTree(REFERENCE_HASHES)
    for index in (-1, 8):
        with pytest.raises(TreeRangeError):
            tree.inclusion_proof(index)
    for old_size in (0, 9):
        with pytest.raises(TreeRangeError):
            tree.consistency_proof(old_size)
    with pytest.raises(TreeRangeError):
        MerkleTree([]).inclusion_proof(0)


def test_leaf_hashes_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError, match="leaf hash 1 is 31 bytes"):
        root_from_leaf_hashes([bytes(32), bytes(31)])


def test_size_change_that_keeps_the_proof_shape_still_verifies_against_the_same_root() -> None:
    """RFC 9162 verification binds the size only through the proof's shape; the signed checkpoint binds the rest.

    Leaf 0 of a 3-leaf tree has PATH [L1, L2]; read as leaf 0 of a 4-leaf tree the same hashes fold the same way.
    """
    tree = MerkleTree(REFERENCE_HASHES[:3])
    verify_inclusion(REFERENCE_HASHES[0], 0, 4, tree.inclusion_proof(0), tree.root)
    with pytest.raises(ProofError):
        verify_inclusion(REFERENCE_HASHES[0], 0, 2, tree.inclusion_proof(0), tree.root)


def _flip(proof: list[bytes], position: int, bit: int) -> list[bytes]:
    changed = bytearray(proof[position])
    changed[bit // 8] ^= 1 << (bit % 8)
    return [*proof[:position], bytes(changed), *proof[position + 1 :]]


distinct_leaves = st.lists(st.binary(min_size=0, max_size=8), min_size=1, max_size=200, unique=True).map(
    lambda entries: [leaf_hash(entry) for entry in entries]
)


@settings(max_examples=60, deadline=None)
@given(hashes=distinct_leaves)
def test_every_generated_proof_verifies(hashes: list[bytes]) -> None:
    tree = MerkleTree(hashes)
    size = len(hashes)
    assert tree.root == root_from_leaf_hashes(hashes)
    for index in range(size):
        verify_inclusion(hashes[index], index, size, tree.inclusion_proof(index), tree.root)
    for old_size in range(1, size + 1):
        old_root = root_from_leaf_hashes(hashes[:old_size])
        verify_consistency(old_size, size, old_root, tree.root, tree.consistency_proof(old_size))


@settings(max_examples=200, deadline=None)
@given(hashes=distinct_leaves, data=st.data())
def test_tampered_inclusion_proof_is_rejected(hashes: list[bytes], data: st.DataObject) -> None:
    size = len(hashes)
    tree = MerkleTree(hashes)
    index = data.draw(st.integers(0, size - 1), label="index")
    proof = tree.inclusion_proof(index)
    if proof:
        position = data.draw(st.integers(0, len(proof) - 1), label="position")
        bit = data.draw(st.integers(0, 255), label="bit")
        with pytest.raises(ProofError):
            verify_inclusion(hashes[index], index, size, _flip(proof, position, bit), tree.root)
    for other_index in (index - 1, index + 1):
        if other_index >= 0:
            with pytest.raises(ProofError):
                verify_inclusion(hashes[index], other_index, size, proof, tree.root)
    for other_size in (size - 1, size + 1):
        if index < other_size and _shape(index, other_size) == _shape(index, size):
            verify_inclusion(hashes[index], index, other_size, proof, tree.root)
        else:
            with pytest.raises(ProofError):
                verify_inclusion(hashes[index], index, other_size, proof, tree.root)


@settings(max_examples=200, deadline=None)
@given(hashes=distinct_leaves.filter(lambda hashes: len(hashes) >= 2), data=st.data())
def test_tampered_consistency_proof_is_rejected(hashes: list[bytes], data: st.DataObject) -> None:
    size = len(hashes)
    tree = MerkleTree(hashes)
    old_size = data.draw(st.integers(1, size - 1), label="old_size")
    old_root = root_from_leaf_hashes(hashes[:old_size])
    proof = tree.consistency_proof(old_size)
    position = data.draw(st.integers(0, len(proof) - 1), label="position")
    bit = data.draw(st.integers(0, 255), label="bit")
    with pytest.raises(ProofError):
        verify_consistency(old_size, size, old_root, tree.root, _flip(proof, position, bit))
    for other_old_size in (old_size - 1, old_size + 1):
        with pytest.raises(ProofError):
            verify_consistency(other_old_size, size, old_root, tree.root, proof)
    for other_size in (size - 1, size + 1):
        if old_size < other_size and _shape(old_size - 1, other_size) == _shape(old_size - 1, size):
            verify_consistency(old_size, other_size, old_root, tree.root, proof)
        else:
            with pytest.raises(ProofError):
                verify_consistency(old_size, other_size, old_root, tree.root, proof)
