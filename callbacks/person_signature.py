"""The person's own proof on a signed-callback decision: an Ed25519 signature by the deciding principal's key.

The shared callback HMAC only says which system sent the request. This check says which person decided: the
signature must verify against the public key registered for the resolved principal, over the canonical decision
(`policy.person_proof.decision_message`) with the gate id in its canonical UUID form and the principal as
normalised (`normalise_identity`). It runs inside `record_decision`, so a refusal is traced like any other.
"""

from __future__ import annotations

import time
from typing import Any

from callbacks.principals import normalise_identity
from policy.person_proof import decision_message, verify_signature

SIGNED_CALLBACK = "signed_callback"
WINDOW_S = 300  # the same window as the transport timestamp (callbacks/signature.py)
MAX_SIGNED_AT = 10**11  # unix seconds; keeps the window arithmetic in float range
NO_PERSON_KEY = "no_person_key"
PERSON_SIGNATURE_REJECTED = "person_signature_rejected"


class PersonProofRejected(Exception):
    """`code` is NO_PERSON_KEY (no key registered: 403) or PERSON_SIGNATURE_REJECTED (bad proof: 401)."""

    def __init__(self, code: str, message: str) -> None:
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
    now_s: float | None = None,
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
    )
    if not verify_signature(bytes(public_key), message, signature):
        raise PersonProofRejected(
            PERSON_SIGNATURE_REJECTED,
            f"the signature is not {principal_id!r}'s over this gate, decision, reason, nonce and signed_at",
        )
