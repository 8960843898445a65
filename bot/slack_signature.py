"""Slack request signatures: `v0=` + hex HMAC-SHA256(signing secret, "v0:{timestamp}:{raw body}").

Checked before bolt sees the request (bolt's own check is turned off so there is exactly one gatekeeper): constant-time
comparison, and a timestamp more than five minutes away from now is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

WINDOW_S = 300
MAX_TIMESTAMP_DIGITS = 12


class SlackSignatureRejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify_slack_request(secret: str, headers: Mapping[str, str], body: bytes, *, now_s: float | None = None) -> None:
    timestamp = headers.get("x-slack-request-timestamp") or headers.get("X-Slack-Request-Timestamp")
    signature = headers.get("x-slack-signature") or headers.get("X-Slack-Signature")
    if not timestamp or not signature:
        raise SlackSignatureRejected("missing X-Slack-Request-Timestamp or X-Slack-Signature")
    if len(timestamp) > MAX_TIMESTAMP_DIGITS or not timestamp.isascii() or not timestamp.isdigit():
        raise SlackSignatureRejected("timestamp is not unix seconds")
    stamp = int(timestamp)
    now = time.time() if now_s is None else now_s
    if abs(now - stamp) > WINDOW_S:
        raise SlackSignatureRejected("timestamp is more than five minutes away")
    if not hmac.compare_digest(slack_signature(secret, timestamp, body).encode(), signature.encode()):
        raise SlackSignatureRejected("signature does not match")
