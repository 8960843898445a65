"""Slack request signatures go through slack-sdk's SignatureVerifier; every refusal has a reason, never an exception."""

from __future__ import annotations

import pytest

from countersign.bot.slack_signature import SlackSignatureRejected, slack_signature, verify_slack_request

# Slack's documented example (python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py).
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TIMESTAMP = "1531420618"
BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
EXPECTED = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def _headers(signature: str = EXPECTED, timestamp: str = TIMESTAMP) -> dict[str, str]:
    return {"x-slack-request-timestamp": timestamp, "x-slack-signature": signature}


def test_slacks_documented_example_verifies() -> None:
    assert slack_signature(SECRET, TIMESTAMP, BODY) == EXPECTED
    verify_slack_request(SECRET, _headers(), BODY, now_s=int(TIMESTAMP) + 299)


@pytest.mark.parametrize(
    ("headers", "body", "now_s", "reason"),
    [
        (_headers(), BODY + b"&x=1", int(TIMESTAMP), "signature does not match"),
        (_headers(EXPECTED[:-1] + "0"), BODY, int(TIMESTAMP), "signature does not match"),
        (_headers(), BODY, int(TIMESTAMP) + 301, "more than five minutes"),
        (_headers(), BODY, int(TIMESTAMP) - 301, "more than five minutes"),
        (_headers(timestamp="15314206l8"), BODY, int(TIMESTAMP), "not unix seconds"),
        (_headers(signature="v0=\u00e9" * 3), BODY, int(TIMESTAMP), "not a v0= hex digest"),
        ({"x-slack-signature": EXPECTED}, BODY, int(TIMESTAMP), "missing"),
    ],
)
def test_a_wrong_stale_or_malformed_signature_is_refused_with_a_reason(
    headers: dict[str, str], body: bytes, now_s: int, reason: str
) -> None:
    with pytest.raises(SlackSignatureRejected, match=reason):
        verify_slack_request(SECRET, headers, body, now_s=now_s)
