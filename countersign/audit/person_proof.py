"""A person's own proof: what a person signs to decide a gate or read a close, and how it is checked.

Pure (no I/O), so the same code checks a proof at the door, in the engine before a decision counts, and offline in
an evidence bundle. The shared callback HMAC authenticates the door that sent a request; these proofs say which
person decided or asked:
- an Ed25519 signature (the signed callback) by a raw 32-byte key, written as standard padded base64 text;
- a passkey (WebAuthn) assertion (the Close Board) whose challenge is the SHA-256 of the decision message.
Both sign the same canonical decision message, and that message carries the SHA-256 of the gate's canonical summary
(`gate_summary_digest`): what the person saw is what the person signed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

DECISION_PURPOSE = "countersign.decision.v2"  # v2: the message carries the gate summary's digest
GATE_SUMMARY_PURPOSE = "countersign.gate-summary.v1"
READ_PURPOSE = "countersign.read.v1"

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
# Base64 of 64 bytes is 88 characters; anything much longer is not a signature and is not decoded.
MAX_SIGNATURE_TEXT_CHARS = 128
MAX_PUBLIC_KEY_TEXT_CHARS = 128


def _canonical(fields: dict[str, str | int]) -> bytes:
    for name, value in fields.items():
        if name == "signed_at":
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"signed_at must be an int (unix seconds), got {type(value).__name__}")
        elif not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def decision_message(
    *,
    gate_id: str,
    principal: str,
    decision: str,
    reason: str,
    nonce: str,
    signed_at: int,
    summary_digest: str,
    amendment_digest: str | None = None,
) -> bytes:
    """The exact bytes a person signs to decide a gate: who, what, why, when, and the digest of what they saw.

    An approval with edits also carries `amendment_digest`, the digest of the sums and line adjustments the person
    certifies (`countersign.certificates.amendment.Amendment.digest`); a plain decision's message has no such key."""
    fields: dict[str, str | int] = {
        "purpose": DECISION_PURPOSE,
        "gate_id": gate_id,
        "principal": principal,
        "decision": decision,
        "reason": reason,
        "nonce": nonce,
        "signed_at": signed_at,
        "summary_digest": summary_digest,
    }
    if amendment_digest is not None:
        fields["amendment_digest"] = amendment_digest
    return _canonical(fields)


def decision_challenge(message: bytes) -> bytes:
    """The WebAuthn challenge of a board decision: the SHA-256 of its canonical decision message."""
    return hashlib.sha256(message).digest()


def summary_from_json(text: str) -> Any:
    """A gate summary as stored (jsonb text), numbers with fractions kept exact: the form its digest is taken of."""
    return json.loads(text, parse_float=Decimal)


def _summary_value(value: Any, path: str) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, Decimal):
        return str(value)  # as the database wrote it: 82213.52 stays "82213.52"
    if isinstance(value, Mapping):
        return {str(k): _summary_value(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_summary_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise TypeError(
        f"gate summary {path}: {type(value).__name__} has no canonical form (read it with summary_from_json)"
    )


def gate_summary_digest(
    *,
    gate_id: str,
    close_id: str,
    task: str,
    attempt: int,
    kind: str,
    tier: str,
    quorum: int,
    approver_role: str,
    rule: str,
    subject: str,
    amount: Decimal | str | None,
    summary: Any,
) -> str:
    """Hex SHA-256 of the gate as a person is shown it: its frozen requirements and its summary (the evidence).

    Every input is a column the database freezes when the gate opens, so the digest of an open gate never changes.
    Numbers with fractions must arrive as Decimal (`summary_from_json`); they are hashed as their decimal text.
    """
    fields = {
        "purpose": GATE_SUMMARY_PURPOSE,
        "gate_id": gate_id,
        "close_id": close_id,
        "task": task,
        "attempt": attempt,
        "kind": kind,
        "tier": tier,
        "quorum": quorum,
        "approver_role": approver_role,
        "rule": rule,
        "subject": subject,
        "amount": None if amount is None else format(Decimal(amount), "f"),
        "summary": _summary_value(summary, "$"),
    }
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_message(*, method: str, path: str, principal: str, signed_at: int) -> bytes:
    """The exact bytes a person signs to read a resource (`GET /closes/{id}` and the like)."""
    return _canonical(
        {
            "purpose": READ_PURPOSE,
            "method": method,
            "path": path,
            "principal": principal,
            "signed_at": signed_at,
        }
    )


def sign(private_key: Ed25519PrivateKey, message: bytes) -> str:
    """Standard padded base64 of the Ed25519 signature of `message`."""
    return base64.b64encode(private_key.sign(message)).decode("ascii")


def verify_signature(public_key_raw: bytes, message: bytes, signature_b64: str) -> bool:
    """True only when `signature_b64` is a valid Ed25519 signature of `message` by that key. Never raises."""
    try:
        if not isinstance(public_key_raw, bytes | bytearray | memoryview) or len(public_key_raw) != PUBLIC_KEY_BYTES:
            return False
        if not isinstance(message, bytes) or not isinstance(signature_b64, str):
            return False
        if len(signature_b64) > MAX_SIGNATURE_TEXT_CHARS:
            return False
        signature = base64.b64decode(signature_b64.encode("ascii"), validate=True)
        if len(signature) != SIGNATURE_BYTES:
            return False
        Ed25519PublicKey.from_public_bytes(bytes(public_key_raw)).verify(signature, message)
    except (InvalidSignature, ValueError, TypeError, binascii.Error, UnicodeEncodeError):
        return False
    return True


def generate_key_pair() -> tuple[bytes, bytes]:
    """A fresh key pair: (PKCS8 PEM of the private key, raw 32-byte public key)."""
    private_key = Ed25519PrivateKey.generate()
    return private_pem(private_key), public_key_raw(private_key)


def private_pem(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )


def public_key_raw(private_key: Ed25519PrivateKey) -> bytes:
    return private_key.public_key().public_bytes(
        encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw
    )


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    """An unencrypted PKCS8 PEM Ed25519 private key; ValueError naming the problem otherwise."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"private key is {type(key).__name__}, expected an Ed25519 key")
    return key


def public_key_text(raw: bytes) -> str:
    """Standard padded base64 of a raw 32-byte Ed25519 public key."""
    if len(raw) != PUBLIC_KEY_BYTES:
        raise ValueError(f"an Ed25519 public key is {PUBLIC_KEY_BYTES} bytes, got {len(raw)}")
    return base64.b64encode(bytes(raw)).decode("ascii")


def parse_public_key(text: str) -> bytes:
    """The raw 32 bytes of a base64 Ed25519 public key; ValueError naming the problem otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"public key must be base64 text, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ValueError("public key is empty")
    if len(stripped) > MAX_PUBLIC_KEY_TEXT_CHARS:
        raise ValueError(f"public key is longer than {MAX_PUBLIC_KEY_TEXT_CHARS} characters")
    try:
        raw = base64.b64decode(stripped.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise ValueError("public key is not valid standard base64") from None
    if len(raw) != PUBLIC_KEY_BYTES:
        raise ValueError(f"public key decodes to {len(raw)} bytes; an Ed25519 public key is {PUBLIC_KEY_BYTES}")
    try:
        Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise ValueError(f"public key is not a valid Ed25519 key: {exc}") from None
    return raw


def passkey_proof_problem(
    *,
    proof: Mapping[str, Any],
    credential_public_key: bytes,
    message: bytes,
    rp_id: str,
    origin: str,
    current_sign_count: int = 0,
) -> str | None:
    """Why a passkey assertion does not prove this decision message, or None when it does. Never raises.

    The assertion must be over the challenge SHA-256(message), by the credential's public key (COSE), for `rp_id` and
    `origin`, with the user verified. `current_sign_count` is the last count the server saw (0 offline: an auditor
    checks the signature, not the counter's history).
    """
    from webauthn import verify_authentication_response
    from webauthn.helpers.exceptions import WebAuthnException

    fields = ("credential_id", "authenticator_data", "client_data_json", "signature")
    if proof.get("kind") != "passkey" or not all(isinstance(proof.get(name), str) for name in fields):
        return "the proof is not a passkey assertion"
    if any(len(str(proof[name])) > MAX_ASSERTION_FIELD_CHARS for name in fields):
        return "the passkey assertion is larger than any authenticator produces"
    credential = {
        "id": proof["credential_id"],
        "rawId": proof["credential_id"],
        "type": "public-key",
        "response": {
            "clientDataJSON": proof["client_data_json"],
            "authenticatorData": proof["authenticator_data"],
            "signature": proof["signature"],
            **({"userHandle": proof["user_handle"]} if isinstance(proof.get("user_handle"), str) else {}),
        },
        "clientExtensionResults": {},
    }
    try:
        verify_authentication_response(
            credential=credential,
            expected_challenge=decision_challenge(message),
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=bytes(credential_public_key),
            credential_current_sign_count=current_sign_count,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, TypeError, KeyError) as exc:
        return f"the passkey assertion does not verify: {exc}"
    except Exception as exc:  # a hostile assertion must never crash a verifier
        return f"the passkey assertion could not be read: {type(exc).__name__}"
    return None


MAX_ASSERTION_FIELD_CHARS = 4096


def digest_of_gate(fields: Mapping[str, Any], summary_json: str) -> str:
    """`gate_summary_digest` of a gate read as its frozen columns and its summary's stored JSON text."""
    return gate_summary_digest(**{**fields, "summary": summary_from_json(summary_json)})
