"""Slack request signatures, checked by slack-sdk's `SignatureVerifier` before bolt sees the request.

`v0=` + hex HMAC-SHA256(signing secret, "v0:{timestamp}:{raw body}"), compared in constant time; a timestamp more
than five minutes away from now is refused. Bolt's own check is turned off so there is exactly one gatekeeper; the
shape checks here come first so a hostile header becomes a reason, never an exception inside the verifier.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from slack_sdk.signature import Clock, SignatureVerifier

WINDOW_S = 300  # SignatureVerifier's own window (60 * 5)
MAX_TIMESTAMP_DIGITS = 12


class SlackSignatureRejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _FixedClock(Clock):
    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def now(self) -> float:
        return self.now_s


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    assert signature is not None
    return signature


def verify_slack_request(secret: str, headers: Mapping[str, str], body: bytes, *, now_s: float | None = None) -> None:
    timestamp = headers.get("x-slack-request-timestamp") or headers.get("X-Slack-Request-Timestamp")
    signature = headers.get("x-slack-signature") or headers.get("X-Slack-Signature")
    if not timestamp or not signature:
        raise SlackSignatureRejected("missing X-Slack-Request-Timestamp or X-Slack-Signature")
    if len(timestamp) > MAX_TIMESTAMP_DIGITS or not timestamp.isascii() or not timestamp.isdigit():
        raise SlackSignatureRejected("timestamp is not unix seconds")  # the verifier would raise on int()
    if not signature.isascii():
        raise SlackSignatureRejected("signature is not a v0= hex digest")  # compare_digest raises on non-ASCII
    now = time.time() if now_s is None else now_s
    if abs(now - int(timestamp)) > WINDOW_S:
        raise SlackSignatureRejected("timestamp is more than five minutes away")
    try:
        body.decode("utf-8")  # Slack sends UTF-8; the verifier decodes the body and would raise on anything else
    except UnicodeDecodeError:
        raise SlackSignatureRejected("body is not UTF-8") from None
    verifier = SignatureVerifier(secret) if now_s is None else SignatureVerifier(secret, clock=_FixedClock(now_s))
    if not verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
        raise SlackSignatureRejected("signature does not match")
