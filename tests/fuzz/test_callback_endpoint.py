"""Signed random bodies and random signature headers at `POST /callbacks/gates/{gate_id}/decisions`.

Always a 4xx or a 200, never a 5xx; a row lands in gate_decision only for a body `parse_body` accepts and a 200.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from countersign.callbacks.signature import sign
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.web.callbacks import BodyInvalid, parse_body
from tests.fuzz.strategies import FUZZ, JSON_DATA, TEXT, mutated
from tests.support import SECRET, count, person_signature, signed_headers, start_default_close

PEOPLE = ["alice.chen", "bob.osei", "carol.main", "dana.reyes", "orchestrator", "test-starter"]
REAL_GATE = "<the accruals gate>"
ANSWERS = {200, 401, 403, 404, 405, 409, 413, 422}

PERSON_SIGNED = "<signed by the principal's own test key when sent>"
NOW = "<now, in unix seconds>"
DECISION = st.fixed_dictionaries(
    {
        "principal": st.one_of(st.sampled_from(PEOPLE), TEXT),
        "decision": st.one_of(st.sampled_from(["approve", "reject"]), TEXT),
        "reason": st.one_of(st.just("reviewed"), TEXT),
        "nonce": st.one_of(st.uuids().map(str), TEXT),
        "signed_at": st.one_of(st.just(NOW), st.integers(), TEXT),
        "signature": st.one_of(
            st.just(PERSON_SIGNED), TEXT, st.binary(max_size=80).map(base64.b64encode).map(bytes.decode)
        ),
    }
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["decision", "decision", "mutated", "json", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    data = draw(JSON_DATA) if kind == "json" else draw(DECISION)
    if kind == "mutated":
        data = draw(mutated(data, JSON_DATA))
    # ensure_ascii=True turns lone surrogates into \ud800 escapes, which json.loads gives back as they were.
    return json.dumps(data, ensure_ascii=draw(st.booleans())).encode("utf-8", "replace")


SIGNING = st.sampled_from(["good", "good", "good", "wrong_secret", "stale", "missing"])
GATES = st.one_of(st.just(REAL_GATE), st.uuids().map(str), TEXT)


@pytest.fixture
async def gate_id(conn: Any, runtime: Any, engine_ctx: Any, default_books: Any) -> str:
    close_id = await start_default_close(conn, runtime, default_books)
    await advance(conn, close_id, engine_ctx)
    status = await close_status(conn, close_id)
    return str(next(g["gate_id"] for g in status["gates"] if g["task"] == "accruals"))


def _headers(body: bytes, signing: str) -> dict[str, str]:
    if signing == "good":
        return signed_headers(body)
    if signing == "wrong_secret":
        return signed_headers(body, secret=SECRET + "x")
    if signing == "stale":
        return signed_headers(body, timestamp=1_000_000_000)
    return {"content-type": "application/json"}


def _person_signed(body: bytes, gate: str) -> bytes:
    """Fill the NOW and PERSON_SIGNED placeholders the way an honest client would; other bodies go as drawn."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if not isinstance(data, dict) or (data.get("signed_at") != NOW and data.get("signature") != PERSON_SIGNED):
        return body
    if data.get("signed_at") == NOW:
        data["signed_at"] = int(time.time())
    principal, decision, reason, nonce = (data.get(k) for k in ("principal", "decision", "reason", "nonce"))
    signed_at = data.get("signed_at")
    if (
        data.get("signature") == PERSON_SIGNED
        and isinstance(principal, str)
        and isinstance(decision, str)
        and isinstance(reason, str)
        and isinstance(nonce, str)
        and type(signed_at) is int
    ):
        # text that cannot be encoded keeps the placeholder, and is refused at the door
        with contextlib.suppress(ValueError, TypeError):
            data["signature"] = person_signature(gate, principal, decision, reason, nonce, signed_at)
    return json.dumps(data).encode("utf-8", "replace")


def _valid(body: bytes) -> bool:
    try:
        parse_body(body)
    except BodyInvalid:
        return False
    return True


@settings(FUZZ, max_examples=60)
@given(gate=GATES, body=bodies(), signing=SIGNING)
@example(  # found: NUL in a string field reaches PostgreSQL (DataError) -> 500
    gate=REAL_GATE,
    body=b'{"principal": "alice.chen", "decision": "approve", "reason": "r", "nonce": "\\u0000"}',
    signing="good",
)
@example(  # found: a lone surrogate cannot be encoded for PostgreSQL or hashed (UnicodeEncodeError) -> 500
    gate=REAL_GATE,
    body=b'{"principal": "alice.chen", "decision": "approve", "reason": "r", "nonce": "\\ud800"}',
    signing="good",
)
@example(gate=REAL_GATE, body=b"1" * 4301, signing="good")  # found: ValueError from json.loads -> 500
@example(gate=REAL_GATE, body=b"[" * 1000, signing="good")  # found: RecursionError from json.loads -> 500
async def test_signed_random_bodies_get_a_4xx_or_200_and_write_only_when_valid(
    api: Any, conn: Any, gate_id: str, gate: str, body: bytes, signing: str
) -> None:
    target = gate_id if gate == REAL_GATE else gate
    body = _person_signed(body, target)
    before = await count(conn, "SELECT count(*) FROM gate_decision")
    response = await api.post(
        f"/callbacks/gates/{quote(target.encode('utf-8', 'surrogatepass'), safe='')}/decisions",
        content=body,
        headers=_headers(body, signing),
    )
    after = await count(conn, "SELECT count(*) FROM gate_decision")
    assert response.status_code in ANSWERS, response.text
    if response.status_code == 200:
        assert signing == "good" and _valid(body)
        assert after - before == (1 if response.json()["recorded"] else 0)
    else:
        assert after == before


@settings(FUZZ, max_examples=60)
@given(
    timestamp=st.one_of(
        st.text(alphabet=st.characters(max_codepoint=255), max_size=20),
        st.integers().map(str),
        st.integers(min_value=10**300, max_value=10**400).map(str),
    ),
    signature=st.one_of(st.text(alphabet=st.characters(max_codepoint=255), max_size=80), st.just("v1=")),
)
@example(timestamp="9" * 309, signature="v1=00")  # found: OverflowError in verify -> 500 for an unsigned request
async def test_random_signature_headers_get_401_and_write_nothing(
    api: Any, conn: Any, gate_id: str, timestamp: str, signature: str
) -> None:
    nonce, stamp = uuid.uuid4().hex, int(time.time())
    body = json.dumps(
        {
            "principal": "alice.chen",
            "decision": "approve",
            "reason": "r",
            "nonce": nonce,
            "signed_at": stamp,
            "signature": person_signature(gate_id, "alice.chen", "approve", "r", nonce, stamp),
        }
    ).encode()
    headers = {  # header values travel as latin-1 bytes
        "content-type": b"application/json",
        "x-countersign-timestamp": timestamp.encode("latin-1"),
        "x-countersign-signature": signature.encode("latin-1"),
    }
    response = await api.post(f"/callbacks/gates/{gate_id}/decisions", content=body, headers=headers)
    assert response.status_code == 401, response.text
    assert signature != sign(SECRET, timestamp, body)
    assert await count(conn, "SELECT count(*) FROM gate_decision") == 0
