"""HMAC signatures on decision callbacks: `v1=hex(HMAC-SHA256(secret, "v1:{timestamp}:{raw body}"))`."""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_VERSION = "v1"
WINDOW_S = 300
MAX_TIMESTAMP_DIGITS = 12


class SignatureRejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(f"signature rejected: {reason}")
        self.reason = reason


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    base = f"{SIGNATURE_VERSION}:{timestamp}:".encode() + body
    return f"{SIGNATURE_VERSION}=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify(
    secret: str, timestamp: str | None, signature: str | None, body: bytes, *, now_s: float | None = None
) -> None:
    """Raise SignatureRejected unless the signature is ours and the timestamp is inside the window."""
    if not timestamp or not signature:
        raise SignatureRejected("missing X-Countersign-Timestamp or X-Countersign-Signature")
    if len(timestamp) > MAX_TIMESTAMP_DIGITS or not timestamp.isascii() or not timestamp.isdigit():
        raise SignatureRejected("timestamp is not unix seconds")
    stamp = int(timestamp)
    now = time.time() if now_s is None else now_s
    if abs(now - stamp) > WINDOW_S:
        raise SignatureRejected(f"timestamp outside the {WINDOW_S}s window")
    expected = sign(secret, timestamp, body)
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        raise SignatureRejected("signature does not match")
