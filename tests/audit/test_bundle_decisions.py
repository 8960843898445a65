"""decisions.json in an evidence bundle, checked offline: every Ed25519 and passkey decision proof is re-verified
over the rebuilt decision message, the gate's facts are held to the digest its `gate_opened` event recorded, and
each failure names the decision. Pure: events are hash-chained and signed in memory, no database."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import time
import zipfile
from dataclasses import replace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from countersign.audit.bundle import FILES, FILES_V1, FORMAT_V1, BundleInvalid, _archive, build_bundle, verify_bundle
from countersign.audit.canonical import canonical_bytes
from countersign.audit.checkpoint import Checkpoint, encode_verifier_key, generate_signer, sign_checkpoint
from countersign.audit.decision_proofs import (
    ED25519,
    PASSKEY,
    DecisionKey,
    GateEvidence,
    ed25519_key_text,
    gate_digest,
    passkey_key_text,
)
from countersign.audit.merkle import MerkleTree, leaf_hash
from countersign.audit.person_proof import decision_challenge, decision_message, public_key_raw, sign
from countersign.audit.trace import TraceEvent, chain_hash, event_body
from countersign.scenarios.software_authenticator import SoftwareAuthenticator, b64url

CLOSE = "00000000-0000-0000-0000-00000000c105"
GATE = "5f0c9a2e-1111-4222-8333-444455556666"
ORIGIN = "countersign.test/close-trace"
BOARD = "http://localhost:8000"
BOB = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"bob").digest())

FACTS: dict[str, Any] = {
    "gate_id": GATE,
    "close_id": CLOSE,
    "task": "accruals",
    "attempt": 1,
    "kind": "approval",
    "tier": "high",
    "quorum": 2,
    "approver_role": "controller",
    "rule": "tier high: 2 controller approvals",
    "subject": "accruals",
    "amount": "82213.52",
    "summary_json": '{"currency": "GBP", "total": 82213.52, "lines": [{"account": "2100", "amount": 0.10}]}',
}


def _device() -> tuple[SoftwareAuthenticator, bytes, str]:
    device = SoftwareAuthenticator("localhost", BOARD)
    device.register(
        {
            "rp": {"id": "localhost"},
            "user": {"id": b64url(b"\x07" * 16)},
            "challenge": b64url(b"\x00" * 32),
            "pubKeyCredParams": [{"type": "public-key", "alg": -7}],
        }
    )
    credential = next(iter(device.credentials.values()))
    return device, credential.cose_public_key(), b64url(credential.credential_id)


DEVICE, COSE, CREDENTIAL_ID = _device()


def _message(principal: str, decision: str, reason: str, nonce: str, signed_at: int, facts: dict[str, Any]) -> bytes:
    return decision_message(
        gate_id=GATE,
        principal=principal,
        decision=decision,
        reason=reason,
        nonce=nonce,
        signed_at=signed_at,
        summary_digest=gate_digest(facts),
    )


def ed25519_decision(decision_id: int, principal: str = "bob.osei", *, signed_as: str | None = None) -> dict[str, Any]:
    signed_at = int(time.time())
    nonce = f"n{decision_id}"
    message = _message(signed_as or principal, "approve", "reviewed", nonce, signed_at, FACTS)
    proof = {"kind": "ed25519", "signature": sign(BOB, message), "signed_at": signed_at}
    return _decided(decision_id, principal, "signed_callback", nonce, proof)


def passkey_decision(decision_id: int, principal: str = "carol.main") -> dict[str, Any]:
    signed_at = int(time.time())
    nonce = f"n{decision_id}"
    message = _message(principal, "approve", "reviewed", nonce, signed_at, FACTS)
    assertion = DEVICE.assertion_for_challenge(decision_challenge(message))
    proof = {
        "kind": "passkey",
        "credential_id": assertion["id"],
        "authenticator_data": assertion["response"]["authenticatorData"],
        "client_data_json": assertion["response"]["clientDataJSON"],
        "signature": assertion["response"]["signature"],
        "user_handle": assertion["response"]["userHandle"],
        "signed_at": signed_at,
        "rp_id": "localhost",
        "origin": BOARD,
    }
    return _decided(decision_id, principal, "board", nonce, proof)


def slack_decision(decision_id: int) -> dict[str, Any]:
    proof = {"kind": "slack", "tenant": "t01acme", "external_id": "u0alice"}
    return _decided(decision_id, "alice.chen", "slack", f"n{decision_id}", proof)


def _decided(decision_id: int, principal: str, channel: str, nonce: str, proof: dict[str, Any]) -> dict[str, Any]:
    payload = {
        "gate_id": GATE,
        "task": "accruals",
        "decision": "approve",
        "reason": "reviewed",
        "channel": channel,
        "decision_id": decision_id,
        "nonce": nonce,
        "proof": proof,
    }
    return {"actor": principal, "kind": "gate_decided", "payload": payload}


def opened(digest: str | None = None) -> dict[str, Any]:
    payload = {"gate_id": GATE, "task": "accruals", "summary_digest": digest or gate_digest(FACTS)}
    return {"actor": "orchestrator", "kind": "gate_opened", "payload": payload}


BOB_KEY = DecisionKey(17, "bob.osei", ("bob.osei",), ED25519, ed25519_key_text(public_key_raw(BOB)))
CAROL_KEY = DecisionKey(18, "carol.main", ("carol.main",), PASSKEY, passkey_key_text(COSE), CREDENTIAL_ID)


def bundle(specs: list[dict[str, Any]], gates: list[GateEvidence]) -> bytes:
    """A bundle of these events (hash-chained, in a tree signed now), built the way the exporter builds one."""
    events, prev = [], b"\x00" * 32
    for seq, spec in enumerate(specs, start=1):
        body = event_body(seq, "2026-10-31T12:00:00.000000Z", CLOSE, spec["actor"], spec["kind"], spec["payload"], {})
        digest = chain_hash(prev, canonical_bytes(body))
        events.append(TraceEvent(**body, prev_hash=prev, hash=digest))
        prev = digest
    tree = MerkleTree([leaf_hash(e.canonical()) for e in events])
    signer = generate_signer(ORIGIN)
    note = sign_checkpoint(Checkpoint(ORIGIN, tree.size, tree.root), signer)
    return build_bundle(
        close_id=CLOSE,
        events=events,
        tree=tree,
        checkpoint_note=note,
        verifier_key=encode_verifier_key(signer.verifier()),
        gates=gates,
    )


def good_gate(*keys: DecisionKey) -> GateEvidence:
    return GateEvidence(FACTS, keys or (BOB_KEY, CAROL_KEY))


def test_every_person_key_decision_verifies_and_platform_identities_are_counted_apart() -> None:
    data = bundle([opened(), ed25519_decision(17), passkey_decision(18), slack_decision(19)], [good_gate()])
    report = verify_bundle(data)
    assert (report.ed25519_decisions, report.passkey_decisions, report.platform_identity_decisions) == (1, 1, 1)
    assert report.decision_proofs == 2 and report.unchecked_decisions == 0 and report.notes == ()


def test_decisions_json_holds_the_facts_and_keys_in_the_documented_shape() -> None:
    data = bundle([opened(), ed25519_decision(17), passkey_decision(18)], [good_gate()])
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        document = json.loads(archive.read("decisions.json"))
    (gate,) = document["gates"]
    assert gate["facts"] == FACTS
    assert gate["decisions"] == [
        {
            "decision_id": 17,
            "principal": "bob.osei",
            "signed_under": ["bob.osei"],
            "key": {"kind": "ed25519", "public_key": base64.b64encode(public_key_raw(BOB)).decode()},
        },
        {
            "decision_id": 18,
            "principal": "carol.main",
            "signed_under": ["carol.main"],
            "key": {"kind": "passkey", "credential_id": CREDENTIAL_ID, "public_key": passkey_key_text(COSE)},
        },
    ]


def _flip_signature(spec: dict[str, Any]) -> dict[str, Any]:
    proof = dict(spec["payload"]["proof"])
    text = proof["signature"]
    proof["signature"] = text[:10] + ("A" if text[10] != "A" else "B") + text[11:]
    return {**spec, "payload": {**spec["payload"], "proof": proof}}


def test_an_ed25519_signature_changed_before_hashing_fails_naming_the_decision() -> None:
    data = bundle([opened(), _flip_signature(ed25519_decision(17)), passkey_decision(18)], [good_gate()])
    with pytest.raises(BundleInvalid) as invalid:
        verify_bundle(data)
    assert invalid.value.reason.startswith("decision 17 by bob.osei on gate 5f0c9a2e…: ")
    assert "Ed25519 signature does not verify" in invalid.value.reason


def test_a_passkey_assertion_changed_before_hashing_fails_naming_the_decision() -> None:
    data = bundle([opened(), ed25519_decision(17), _flip_signature(passkey_decision(18))], [good_gate()])
    with pytest.raises(BundleInvalid) as invalid:
        verify_bundle(data)
    assert invalid.value.reason.startswith("decision 18 by carol.main on gate 5f0c9a2e…: ")
    assert "the passkey assertion does not verify" in invalid.value.reason


def test_a_decision_signed_over_another_summary_fails_on_its_signature() -> None:
    other = {**FACTS, "amount": "1.00"}
    spec = ed25519_decision(17)
    signed_at = spec["payload"]["proof"]["signed_at"]
    message = _message("bob.osei", "approve", "reviewed", "n17", signed_at, other)
    spec["payload"]["proof"]["signature"] = sign(BOB, message)
    with pytest.raises(BundleInvalid, match=r"^decision 17 by bob.osei .*Ed25519 signature does not verify"):
        verify_bundle(bundle([opened(), spec], [good_gate(BOB_KEY)]))


def test_another_key_in_decisions_json_fails_naming_the_decision() -> None:
    stranger = ed25519_key_text(public_key_raw(Ed25519PrivateKey.generate()))
    gate = good_gate(replace(BOB_KEY, public_key=stranger), CAROL_KEY)
    with pytest.raises(BundleInvalid, match=r"^decision 17 by bob.osei .*does not verify against the key"):
        verify_bundle(bundle([opened(), ed25519_decision(17), passkey_decision(18)], [gate]))
    _, other_cose, _ = _device()
    gate = good_gate(BOB_KEY, replace(CAROL_KEY, public_key=passkey_key_text(other_cose)))
    with pytest.raises(BundleInvalid, match=r"^decision 18 by carol.main .*the passkey assertion does not verify"):
        verify_bundle(bundle([opened(), ed25519_decision(17), passkey_decision(18)], [gate]))


def test_a_changed_gate_summary_is_not_the_one_signed_and_says_which_digests_differ() -> None:
    edited = {**FACTS, "summary_json": FACTS["summary_json"].replace("82213.52", "82213.53")}
    specs = [opened(), ed25519_decision(17), passkey_decision(18)]
    with pytest.raises(BundleInvalid) as invalid:
        verify_bundle(bundle(specs, [GateEvidence(edited, (BOB_KEY, CAROL_KEY))]))
    assert invalid.value.reason.startswith("decision 17 by bob.osei on gate 5f0c9a2e…: the gate summary in")
    assert f"SHA-256 {gate_digest(edited)} in decisions.json, {gate_digest(FACTS)} when the gate opened" in (
        invalid.value.reason
    )
    # Without its gate_opened event the bundle still refuses it: the signature covers the digest.
    with pytest.raises(BundleInvalid, match=r"^decision 17 by bob.osei .*Ed25519 signature does not verify"):
        verify_bundle(bundle(specs[1:], [GateEvidence(edited, (BOB_KEY, CAROL_KEY))]))


def test_a_gate_or_key_missing_from_decisions_json_fails_naming_the_decision() -> None:
    specs = [opened(), ed25519_decision(17), passkey_decision(18)]
    with pytest.raises(BundleInvalid, match=r"^decision 17 by bob.osei on gate 5f0c9a2e…: .* holds no facts"):
        verify_bundle(bundle(specs, []))
    with pytest.raises(BundleInvalid, match=r"^decision 18 by carol.main .*holds no key for it"):
        verify_bundle(bundle(specs, [good_gate(BOB_KEY)]))
    with pytest.raises(BundleInvalid, match=r"^decision 17 by bob.osei .*gives the key of carol.main"):
        verify_bundle(bundle(specs, [good_gate(replace(BOB_KEY, principal="carol.main"), CAROL_KEY)]))


def test_a_signature_under_a_login_alias_verifies_only_when_decisions_json_names_the_alias() -> None:
    specs = [opened(), ed25519_decision(17, signed_as="bob@acme.example")]
    aliased = replace(BOB_KEY, signed_under=("bob.osei", "bob@acme.example"))
    assert verify_bundle(bundle(specs, [good_gate(aliased)])).ed25519_decisions == 1
    with pytest.raises(BundleInvalid, match=r"^decision 17 by bob.osei .*does not verify"):
        verify_bundle(bundle(specs, [good_gate(BOB_KEY)]))


def _files(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _manifest(files: dict[str, bytes], **changes: Any) -> dict[str, bytes]:
    manifest = json.loads(files["manifest.json"])
    manifest.update(changes)
    manifest["sha256"] = {n: hashlib.sha256(d).hexdigest() for n, d in sorted(files.items()) if n != "manifest.json"}
    return {**files, "manifest.json": (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()}


def test_a_version_1_bundle_still_verifies_and_says_it_holds_no_decision_proofs() -> None:
    files = _files(bundle([opened(), ed25519_decision(17), slack_decision(19)], [good_gate(BOB_KEY)]))
    del files["decisions.json"]
    report = verify_bundle(_archive(_manifest(files, format=FORMAT_V1), FILES_V1))
    assert report.format == FORMAT_V1
    assert (report.decision_proofs, report.unchecked_decisions, report.platform_identity_decisions) == (0, 1, 1)
    assert report.notes == (
        "no decision proofs in a version 1 bundle (not checked: 1 decisions made with a person's own key)",
    )


def test_a_version_2_bundle_without_decisions_json_is_refused() -> None:
    files = _files(bundle([opened(), ed25519_decision(17)], [good_gate(BOB_KEY)]))
    del files["decisions.json"]
    with pytest.raises(BundleInvalid, match=r"missing decisions\.json"):
        verify_bundle(_archive(_manifest(files), FILES_V1))


def test_an_unmodified_rebuilt_bundle_passes_and_a_malformed_decisions_json_is_named() -> None:
    files = _files(bundle([opened(), ed25519_decision(17)], [good_gate(BOB_KEY)]))
    assert verify_bundle(_archive(_manifest(files), FILES)).ed25519_decisions == 1  # the negative control
    files["decisions.json"] = b'{"gates": [{"facts": {}}]}\n'
    with pytest.raises(BundleInvalid, match=r"decisions\.json is malformed"):
        verify_bundle(_archive(_manifest(files), FILES))


def test_a_decision_traced_before_its_proof_was_is_noted_as_unchecked_not_passed_as_verified() -> None:
    old = ed25519_decision(17)
    old["payload"] = {k: v for k, v in old["payload"].items() if k not in ("proof", "nonce")}
    report = verify_bundle(bundle([opened(), old], [good_gate(BOB_KEY)]))
    assert (report.ed25519_decisions, report.unchecked_decisions) == (0, 1)
    assert report.notes == ("not checked: 1 decisions recorded before the trace carried their proofs",)
