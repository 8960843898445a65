"""Scripted approvers (the demo, the drills, the benchmark) hold their own Ed25519 keys, like real people.

Each human gets a fresh key pair for the run; its public key is registered with the principal, and every decision
the script makes is signed by that person's private key, exactly as a real client would sign it.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from countersign.audit.person_proof import decision_message, public_key_raw, sign
from countersign.callbacks.person_signature import ed25519_proof
from countersign.callbacks.principals import Principal, normalise_identity


class ScriptedPeople:
    """One private key per human principal, generated in memory for this run and never written anywhere."""

    def __init__(self, people: list[Principal]) -> None:
        self.keys = {p.principal_id: Ed25519PrivateKey.generate() for p in people if p.is_human}

    def registered(self, people: list[Principal]) -> list[Principal]:
        """The same principals with each scripted human's public key set, ready for `upsert_principals`."""
        return [
            dataclasses.replace(p, public_key=public_key_raw(self.keys[p.principal_id]))
            if p.principal_id in self.keys
            else p
            for p in people
        ]

    def key_for(self, principal: str) -> Ed25519PrivateKey:
        """The person's key; a principal the script holds no key for (a machine) signs with a throwaway key."""
        return self.keys.get(normalise_identity(principal)) or Ed25519PrivateKey.generate()

    def body(
        self,
        gate_id: str,
        principal: str,
        decision: str,
        reason: str,
        nonce: str | None = None,
        *,
        summary_digest: str,
    ) -> dict[str, Any]:
        """A complete signed-callback body for `principal`, signed by their own key over the gate summary they read
        (`summary_digest`, as the status read gives it)."""
        nonce = nonce or uuid.uuid4().hex
        signed_at = int(time.time())
        signature = self.sign(gate_id, principal, decision, reason, nonce, signed_at, summary_digest)
        return {
            "principal": principal,
            "decision": decision,
            "reason": reason,
            "nonce": nonce,
            "signed_at": signed_at,
            "signature": signature,
        }

    def proof(
        self, gate_id: str, principal: str, decision: str, reason: str, nonce: str, *, summary_digest: str
    ) -> dict[str, Any]:
        """The `proof` of a `DecisionRequest` made in-process on the signed-callback channel."""
        signed_at = int(time.time())
        signature = self.sign(gate_id, principal, decision, reason, nonce, signed_at, summary_digest)
        return ed25519_proof(signature, signed_at)

    def sign(
        self,
        gate_id: str,
        principal: str,
        decision: str,
        reason: str,
        nonce: str,
        signed_at: int,
        summary_digest: str,
    ) -> str:
        message = decision_message(
            gate_id=str(uuid.UUID(gate_id)),
            principal=normalise_identity(principal),
            decision=decision,
            reason=reason,
            nonce=nonce,
            signed_at=signed_at,
            summary_digest=summary_digest,
        )
        return sign(self.key_for(principal), message)
