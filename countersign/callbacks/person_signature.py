"""The person's own proof on a decision: an Ed25519 signature (signed callback) or a passkey assertion (board).

The shared callback HMAC only says which system sent the request. This check says which person decided: the
signature must verify against the key registered for the resolved principal, over the canonical decision
(`countersign.audit.person_proof.decision_message`) with the gate id in its canonical UUID form, the principal as
normalised
(`normalise_identity`) and the digest of the gate's summary as the database holds it. A passkey assertion's challenge
is the SHA-256 of that message. It runs inside `record_decision`, so a refusal is traced like any other.
"""

from __future__ import annotations

import time
from typing import Any

from countersign.audit.person_proof import decision_message, passkey_proof_problem, verify_signature
from countersign.callbacks.principals import normalise_identity
from countersign.states import Channel, RefusalCode

SIGNED_CALLBACK = Channel.SIGNED_CALLBACK
BOARD = Channel.BOARD
WINDOW_S = 300  # the same window as the transport timestamp (countersign/callbacks/signature.py)
MAX_SIGNED_AT = 10**11  # unix seconds; keeps the window arithmetic in float range
NO_PERSON_KEY = RefusalCode.NO_PERSON_KEY
PERSON_SIGNATURE_REJECTED = RefusalCode.PERSON_SIGNATURE_REJECTED


class PersonProofRejected(Exception):
    """`code` is NO_PERSON_KEY (no key registered: 403) or PERSON_SIGNATURE_REJECTED (bad proof: 401)."""

    def __init__(self, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def ed25519_proof(signature: str, signed_at: int) -> dict[str, Any]:
    """The `proof` recorded with a signed-callback decision."""
    return {"kind": "ed25519", "signature": signature, "signed_at": signed_at}


def check_person_signature(
    *,
    gate_id: str,
    principal: str,
    principal_id: str,
    decision: str,
    reason: str,
    nonce: str,
    proof: dict[str, Any],
    public_key: bytes | None,
    summary_digest: str,
    now_s: float | None = None,
    amendment_digest: str | None = None,
) -> None:
    """Raise PersonProofRejected unless `proof` is a fresh Ed25519 signature by `principal_id`'s registered key."""
    if public_key is None:
        raise PersonProofRejected(
            NO_PERSON_KEY,
            f"principal {principal_id!r} has no registered public key; register one with `countersign principals"
            " import` (field public_key) before deciding over the signed callback",
        )
    signature = proof.get("signature")
    signed_at = proof.get("signed_at")
    if proof.get("kind") != "ed25519" or not isinstance(signature, str):
        raise PersonProofRejected(PERSON_SIGNATURE_REJECTED, "the decision carries no Ed25519 signature")
    if isinstance(signed_at, bool) or not isinstance(signed_at, int) or not 0 <= signed_at <= MAX_SIGNED_AT:
        raise PersonProofRejected(PERSON_SIGNATURE_REJECTED, "signed_at is not unix seconds")
    now = time.time() if now_s is None else now_s
    if abs(now - signed_at) > WINDOW_S:
        raise PersonProofRejected(PERSON_SIGNATURE_REJECTED, f"signed_at is outside the {WINDOW_S}s window")
    message = decision_message(
        gate_id=gate_id,
        principal=normalise_identity(principal),
        decision=decision,
        reason=reason,
        nonce=nonce,
        signed_at=signed_at,
        summary_digest=summary_digest,
        amendment_digest=amendment_digest,
    )
    if not verify_signature(bytes(public_key), message, signature):
        raise PersonProofRejected(
            PERSON_SIGNATURE_REJECTED,
            f"the signature is not {principal_id!r}'s over this gate, its summary (SHA-256 {summary_digest[:12]}…),"
            " decision, reason, nonce and signed_at",
        )


def passkey_sign_count(proof: dict[str, Any]) -> int:
    """The signature counter in the assertion's authenticator data (bytes 33-36, big-endian)."""
    import base64

    text = str(proof.get("authenticator_data", ""))
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(data) < 37:
        raise PersonProofRejected(PERSON_SIGNATURE_REJECTED, "the authenticator data is too short")
    return int.from_bytes(data[33:37], "big")


def check_passkey_assertion(
    *,
    gate_id: str,
    principal_id: str,
    decision: str,
    reason: str,
    nonce: str,
    proof: dict[str, Any],
    passkey_public_key: bytes | None,
    sign_count: int,
    summary_digest: str,
    now_s: float | None = None,
    amendment_digest: str | None = None,
) -> int:
    """Raise PersonProofRejected unless `proof` is a fresh passkey assertion by a live passkey of `principal_id` over
    this decision; return the assertion's sign count (the caller records it, and the database keeps it rising)."""
    if passkey_public_key is None:
        raise PersonProofRejected(NO_PERSON_KEY, f"the proof names no live passkey of principal {principal_id!r}")
    signed_at = proof.get("signed_at")
    if isinstance(signed_at, bool) or not isinstance(signed_at, int) or not 0 <= signed_at <= MAX_SIGNED_AT:
        raise PersonProofRejected(PERSON_SIGNATURE_REJECTED, "signed_at is not unix seconds")
    now = time.time() if now_s is None else now_s
    if abs(now - signed_at) > WINDOW_S:
        raise PersonProofRejected(PERSON_SIGNATURE_REJECTED, f"signed_at is outside the {WINDOW_S}s window")
    rp_id, origin = proof.get("rp_id"), proof.get("origin")
    if not isinstance(rp_id, str) or not isinstance(origin, str):
        raise PersonProofRejected(PERSON_SIGNATURE_REJECTED, "the passkey proof does not name its board")
    message = decision_message(
        gate_id=gate_id,
        principal=principal_id,
        decision=decision,
        reason=reason,
        nonce=nonce,
        signed_at=signed_at,
        summary_digest=summary_digest,
        amendment_digest=amendment_digest,
    )
    problem = passkey_proof_problem(
        proof=proof,
        credential_public_key=passkey_public_key,
        message=message,
        rp_id=rp_id,
        origin=origin,
        current_sign_count=sign_count,
    )
    if problem is not None:
        raise PersonProofRejected(PERSON_SIGNATURE_REJECTED, f"{problem} (principal {principal_id!r})")
    return passkey_sign_count(proof)
