"""A person's own proof: Ed25519 signatures over canonical decision and read messages.

Pure (no I/O). The shared callback HMAC authenticates the door that sent a request; these signatures prove which
person decided or asked. Keys are raw 32-byte Ed25519 public keys, written as standard padded base64 text.
"""

from __future__ import annotations

import base64
import binascii
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

DECISION_PURPOSE = "countersign.decision.v1"
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


def decision_message(*, gate_id: str, principal: str, decision: str, reason: str, nonce: str, signed_at: int) -> bytes:
    """The exact bytes a person signs to decide a gate."""
    return _canonical(
        {
            "purpose": DECISION_PURPOSE,
            "gate_id": gate_id,
            "principal": principal,
            "decision": decision,
            "reason": reason,
            "nonce": nonce,
            "signed_at": signed_at,
        }
    )


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
