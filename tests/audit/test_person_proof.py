import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.audit.person_proof import (
    DECISION_PURPOSE,
    READ_PURPOSE,
    decision_message,
    generate_key_pair,
    load_private_key,
    parse_public_key,
    public_key_raw,
    public_key_text,
    read_message,
    sign,
    verify_signature,
)


def _key(name: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(name.encode()).digest())


ALICE = _key("alice")
BOB = _key("bob")
ALICE_PUB = public_key_raw(ALICE)
BOB_PUB = public_key_raw(BOB)

FIELDS = {
    "gate_id": "5f0c3a36-0c1e-4a5e-9d51-0d3f6e1f2a10",
    "principal": "alice",
    "decision": "approve",
    "reason": "checked the bank rec",
    "nonce": "n-1",
    "signed_at": 1_700_000_000,
    "summary_digest": "ab" * 32,
}


def test_decision_message_is_canonical_sorted_compact_utf8_json() -> None:
    message = decision_message(**{**FIELDS, "reason": "ça va — ok"})  # type: ignore[arg-type]
    text = message.decode("utf-8")
    assert " " not in text.replace("ça va — ok", "")
    assert "ça va — ok" in text  # ensure_ascii off: the person signs what they read
    data = json.loads(text)
    assert data["purpose"] == DECISION_PURPOSE
    assert data["signed_at"] == 1_700_000_000
    assert list(data) == sorted(data)
    assert text == (
        '{"decision":"approve","gate_id":"5f0c3a36-0c1e-4a5e-9d51-0d3f6e1f2a10","nonce":"n-1",'
        '"principal":"alice","purpose":"countersign.decision.v2","reason":"ça va — ok","signed_at":1700000000,'
        '"summary_digest":"' + "ab" * 32 + '"}'
    )


def test_read_message_has_its_own_purpose() -> None:
    message = read_message(method="GET", path="/closes/x", principal="alice", signed_at=5)
    assert json.loads(message) == {
        "purpose": READ_PURPOSE,
        "method": "GET",
        "path": "/closes/x",
        "principal": "alice",
        "signed_at": 5,
    }


def test_a_decision_signature_does_not_verify_as_a_read() -> None:
    decision = decision_message(**FIELDS)  # type: ignore[arg-type]
    read = read_message(method="GET", path="/closes/x", principal="alice", signed_at=FIELDS["signed_at"])  # type: ignore[arg-type]
    assert not verify_signature(ALICE_PUB, read, sign(ALICE, decision))


@pytest.mark.parametrize("bad", [True, "1700000000", 1.5, None])
def test_signed_at_must_be_an_int(bad: object) -> None:
    with pytest.raises(TypeError, match="signed_at"):
        decision_message(**{**FIELDS, "signed_at": bad})  # type: ignore[arg-type]


def test_text_fields_must_be_strings() -> None:
    with pytest.raises(TypeError, match="reason"):
        decision_message(**{**FIELDS, "reason": 3})  # type: ignore[arg-type]


def test_signature_is_padded_standard_base64_of_64_bytes() -> None:
    signature = sign(ALICE, b"x")
    assert len(base64.b64decode(signature, validate=True)) == 64
    assert signature.endswith("==")


def test_another_persons_key_does_not_verify() -> None:
    message = decision_message(**FIELDS)  # type: ignore[arg-type]
    assert verify_signature(ALICE_PUB, message, sign(ALICE, message))
    assert not verify_signature(BOB_PUB, message, sign(ALICE, message))


@pytest.mark.parametrize(
    ("key", "signature"),
    [
        (b"", "AAAA"),
        (b"\x00" * 31, "AAAA"),
        (b"\x00" * 33, "AAAA"),
        (ALICE_PUB, ""),
        (ALICE_PUB, "not base64!!"),
        (ALICE_PUB, "é" * 10),
        (ALICE_PUB, base64.b64encode(b"\x00" * 63).decode()),
        (ALICE_PUB, base64.b64encode(b"\x00" * 64).decode()),
        (ALICE_PUB, "A" * 10_000),
        (ALICE_PUB, base64.b64encode(b"\x00" * 64).decode().rstrip("=")),
    ],
)
def test_malformed_input_is_false_never_an_exception(key: bytes, signature: str) -> None:
    assert verify_signature(key, b"message", signature) is False


def test_non_str_signature_or_non_bytes_key_is_false() -> None:
    assert verify_signature(ALICE_PUB, b"m", None) is False  # type: ignore[arg-type]
    assert verify_signature("key", b"m", sign(ALICE, b"m")) is False  # type: ignore[arg-type]


def test_generated_pair_round_trips_through_pem_and_text() -> None:
    pem, raw = generate_key_pair()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    private = load_private_key(pem)
    assert public_key_raw(private) == raw
    assert parse_public_key(public_key_text(raw)) == raw
    assert verify_signature(raw, b"m", sign(private, b"m"))


def test_load_private_key_refuses_garbage_and_other_algorithms() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    with pytest.raises(ValueError, match="PEM"):
        load_private_key(b"not a key")
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ValueError, match="Ed25519"):
        load_private_key(other)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("not base64!!", "base64"),
        (base64.b64encode(b"\x01" * 16).decode(), "16 bytes"),
        (base64.b64encode(b"\x01" * 33).decode(), "33 bytes"),
        ("A" * 500, "longer"),
    ],
)
def test_parse_public_key_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_public_key(text)


def test_public_key_text_refuses_wrong_length() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        public_key_text(b"\x00" * 31)


_text = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40)
_fields = st.fixed_dictionaries(
    {
        "gate_id": _text,
        "principal": _text,
        "decision": st.sampled_from(["approve", "reject"]),
        "reason": _text,
        "nonce": _text,
        "signed_at": st.integers(min_value=0, max_value=2**40),
        "summary_digest": st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    }
)


@settings(max_examples=150, deadline=None)
@given(fields=_fields, changed=st.sampled_from(sorted(FIELDS)), data=st.data())
def test_round_trip_verifies_and_any_single_field_change_fails(
    fields: dict[str, object], changed: str, data: st.DataObject
) -> None:
    message = decision_message(**fields)  # type: ignore[arg-type]
    signature = sign(ALICE, message)
    assert verify_signature(ALICE_PUB, message, signature)

    if changed == "signed_at":
        other: object = data.draw(st.integers(min_value=0, max_value=2**40).filter(lambda v: v != fields[changed]))
    elif changed == "decision":
        other = "reject" if fields[changed] == "approve" else "approve"
    elif changed == "summary_digest":  # the person saw another summary: one hex digit differs
        digest = str(fields[changed])
        other = ("1" if digest[0] == "0" else "0") + digest[1:]
    else:
        other = data.draw(_text.filter(lambda v: v != fields[changed]))
    tampered = decision_message(**{**fields, changed: other})  # type: ignore[arg-type]
    assert not verify_signature(ALICE_PUB, tampered, signature)


def test_the_gate_summary_digest_is_exact_and_moves_with_any_fact_a_person_was_shown() -> None:
    from countersign.audit.person_proof import digest_of_gate

    facts = {
        "gate_id": FIELDS["gate_id"],
        "close_id": "0b7e2f1c-58d4-4a55-9a1f-6b2f9f0e1d2c",
        "task": "accruals",
        "attempt": 1,
        "kind": "approval",
        "tier": "high",
        "quorum": 1,
        "approver_role": "controller",
        "rule": "amount GBP 250,000.00 >= threshold",
        "subject": "ACME-UK",
        "amount": "82213.52",
    }
    summary = '{"journal": {"total": 82213.52, "lines": [{"account": "2100", "amount": 0.10}]}, "currency": "GBP"}'
    digest = digest_of_gate(facts, summary)
    assert digest == digest_of_gate(dict(facts), summary)  # deterministic
    assert len(digest) == 64
    # 0.10 stays "0.10" (no float rounding); one cent or one byte anywhere changes the digest.
    assert digest != digest_of_gate(facts, summary.replace("0.10", "0.11"))
    assert digest != digest_of_gate(facts, summary.replace("0.10", "0.1"))
    assert digest != digest_of_gate(facts, summary.replace("GBP", "EUR"))
    for name, other in (("tier", "medium"), ("quorum", 2), ("amount", "82213.53"), ("subject", "ACME-US")):
        assert digest != digest_of_gate({**facts, name: other}, summary), name
