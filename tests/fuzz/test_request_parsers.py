"""The pure parsers in front of the decision writer: body, callback signature, Slack signature.

Each either returns a valid value or raises its own documented error type; nothing else may escape, since anything
else becomes a 500 at the endpoint.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from countersign.bot.slack_signature import SlackSignatureRejected, slack_signature, verify_slack_request
from countersign.callbacks.person_signature import MAX_SIGNED_AT
from countersign.callbacks.signature import WINDOW_S, SignatureRejected, sign, verify
from countersign.certificates.amendment import Amendment
from countersign.web.callbacks import MAX_SIGNATURE_CHARS, MAX_TEXT_CHARS, BodyInvalid, parse_body
from tests.fuzz.strategies import FUZZ, JSON_DATA, mutated

NOW_S = 1_790_000_000.0
VALID_BODY = {
    "principal": "alice.chen",
    "decision": "approve",
    "reason": "reviewed",
    "nonce": "n-1",
    "signed_at": 1_790_000_000,
    "signature": "c2lnbmF0dXJl",
}

# HTTP header values reach the app decoded as latin-1, so every character is below U+0100.
HEADER_TEXT = st.text(alphabet=st.characters(max_codepoint=255), max_size=40)
TIMESTAMPS = st.one_of(
    st.none(),
    HEADER_TEXT,
    st.integers().map(str),
    st.integers(min_value=int(NOW_S) - 2 * WINDOW_S, max_value=int(NOW_S) + 2 * WINDOW_S).map(str),
    st.integers(min_value=10**300, max_value=10**400).map(str),
)

BODIES = st.one_of(
    st.binary(max_size=200),
    JSON_DATA.map(lambda data: json.dumps(data).encode()),
    mutated(VALID_BODY, JSON_DATA).map(lambda data: json.dumps(data).encode()),
    mutated(VALID_BODY, JSON_DATA).map(lambda data: json.dumps(data, ensure_ascii=False).encode("utf-8", "replace")),
)


@settings(FUZZ, max_examples=400)
@given(BODIES)
@example(b"1" * 4301)  # found: ValueError (int digit limit) escapes instead of BodyInvalid
@example(b"[" * 1000)  # found: RecursionError escapes instead of BodyInvalid
def test_parse_body_returns_the_six_fields_and_an_amendment_or_raises_body_invalid(raw: bytes) -> None:
    try:
        body = parse_body(raw)
    except BodyInvalid as exc:
        assert isinstance(exc.field, str) and exc.reason
        return
    assert set(body) == {"principal", "decision", "reason", "nonce", "signed_at", "signature", "amendment"}
    assert body["amendment"] is None or isinstance(body["amendment"], Amendment)  # optional: approve with edits
    assert body["decision"] in ("approve", "reject")
    for name in ("principal", "decision", "reason", "nonce"):
        assert isinstance(body[name], str) and body[name].strip() and len(body[name]) <= MAX_TEXT_CHARS
    assert type(body["signed_at"]) is int and 0 <= body["signed_at"] <= MAX_SIGNED_AT
    assert isinstance(body["signature"], str) and 0 < len(body["signature"]) <= MAX_SIGNATURE_CHARS


@settings(FUZZ, max_examples=400)
@given(secret=st.text(max_size=20), timestamp=TIMESTAMPS, signature=st.one_of(st.none(), HEADER_TEXT), body=BODIES)
@example(secret="s", timestamp="9" * 309, signature="v1=00", body=b"")  # found: OverflowError, not SignatureRejected
def test_callback_signature_verify_accepts_or_raises_signature_rejected(
    secret: str, timestamp: str | None, signature: str | None, body: bytes
) -> None:
    try:
        verify(secret, timestamp, signature, body, now_s=NOW_S)
    except SignatureRejected as exc:
        assert exc.reason
        return
    assert timestamp is not None and signature == sign(secret, timestamp, body)


@settings(FUZZ, max_examples=200)
@given(secret=st.text(max_size=20), offset_s=st.integers(-WINDOW_S, WINDOW_S), body=BODIES)
def test_a_correctly_signed_callback_inside_the_window_is_accepted(secret: str, offset_s: int, body: bytes) -> None:
    stamp = str(int(NOW_S) + offset_s)
    verify(secret, stamp, sign(secret, stamp, body), body, now_s=NOW_S)


@settings(FUZZ, max_examples=400)
@given(
    secret=st.text(max_size=20),
    headers=st.dictionaries(
        st.sampled_from(["x-slack-request-timestamp", "x-slack-signature", "X-Slack-Signature", "content-type"]),
        st.one_of(HEADER_TEXT, TIMESTAMPS.filter(lambda t: t is not None)),
    ),
    body=BODIES,
)
@example(  # found: OverflowError, not SlackSignatureRejected
    secret="s", headers={"x-slack-request-timestamp": "9" * 309, "x-slack-signature": "v0=00"}, body=b""
)
def test_slack_signature_verify_accepts_or_raises_slack_signature_rejected(
    secret: str, headers: dict[str, str], body: bytes
) -> None:
    try:
        verify_slack_request(secret, headers, body, now_s=NOW_S)
    except SlackSignatureRejected as exc:
        assert exc.reason
        return
    signature = headers.get("x-slack-signature") or headers.get("X-Slack-Signature")
    assert signature == slack_signature(secret, headers["x-slack-request-timestamp"], body)


SIGNING_SECRETS = st.text(min_size=1, max_size=20).filter(str.strip)  # settings refuse a blank signing secret


@settings(FUZZ, max_examples=100)
@given(secret=SIGNING_SECRETS, body=st.binary(min_size=1, max_size=200).filter(lambda b: not _utf8(b)))
def test_a_correctly_signed_body_that_is_not_utf8_is_refused_not_a_crash(secret: str, body: bytes) -> None:
    stamp = str(int(NOW_S))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    headers = {"x-slack-request-timestamp": stamp, "x-slack-signature": f"v0={digest}"}
    with pytest.raises(SlackSignatureRejected, match="not UTF-8"):
        verify_slack_request(secret, headers, body, now_s=NOW_S)


def _utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(FUZZ, max_examples=200)
@given(secret=SIGNING_SECRETS, offset_s=st.integers(-WINDOW_S, WINDOW_S), body=BODIES.filter(_utf8))
def test_a_correctly_signed_slack_request_inside_the_window_is_accepted(
    secret: str, offset_s: int, body: bytes
) -> None:
    stamp = str(int(NOW_S) + offset_s)
    headers = {"x-slack-request-timestamp": stamp, "x-slack-signature": slack_signature(secret, stamp, body)}
    verify_slack_request(secret, headers, body, now_s=NOW_S)
