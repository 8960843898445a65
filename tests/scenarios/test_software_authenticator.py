"""The software authenticator's passkeys verify with the webauthn library, and each of its lies is refused by it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse
from webauthn.helpers.structs import AttestationFormat, PublicKeyCredentialDescriptor

from countersign.scenarios.software_authenticator import Misbehaviour, SoftwareAuthenticator, b64url, from_b64url

RP_ID = "board.example.test"
ORIGIN = "https://board.example.test"
USER_ID = b"principal:controller@example.test"


@dataclass
class Enrolled:
    """An authenticator with one registered credential, and what the server stored for it."""

    authenticator: SoftwareAuthenticator
    credential_id: bytes
    public_key: bytes
    sign_count: int


def registration_options(challenge: bytes = b"registration-challenge-0123456789") -> dict[str, Any]:
    options = generate_registration_options(
        rp_id=RP_ID, rp_name="Close Board", user_name="controller", user_id=USER_ID, challenge=challenge
    )
    parsed: dict[str, Any] = json.loads(options_to_json(options))
    return parsed


def request_options(challenge: bytes, allow: list[bytes] | None = None) -> dict[str, Any]:
    descriptors = [PublicKeyCredentialDescriptor(id=c) for c in allow] if allow is not None else None
    options = generate_authentication_options(rp_id=RP_ID, challenge=challenge, allow_credentials=descriptors)
    parsed: dict[str, Any] = json.loads(options_to_json(options))
    return parsed


def verify_assertion(enrolled: Enrolled, response: dict[str, Any], challenge: bytes, **overrides: Any) -> int:
    """The server's check; on success it stores the new sign count, as a server must."""
    expected: dict[str, Any] = {"expected_rp_id": RP_ID, "expected_origin": ORIGIN, **overrides}
    verified = verify_authentication_response(
        credential=response,
        expected_challenge=challenge,
        credential_public_key=enrolled.public_key,
        credential_current_sign_count=enrolled.sign_count,
        require_user_verification=True,
        **expected,
    )
    enrolled.sign_count = verified.new_sign_count
    return verified.new_sign_count


@pytest.fixture
def enrolled() -> Enrolled:
    authenticator = SoftwareAuthenticator(RP_ID, ORIGIN)
    verified = verify_registration_response(
        credential=authenticator.register(registration_options()),
        expected_challenge=b"registration-challenge-0123456789",
        expected_rp_id=RP_ID,
        expected_origin=ORIGIN,
        require_user_verification=True,
    )
    return Enrolled(authenticator, verified.credential_id, verified.credential_public_key, verified.sign_count)


def test_a_registration_verifies_as_attestation_none_with_a_zero_aaguid_and_a_verified_user() -> None:
    authenticator = SoftwareAuthenticator(RP_ID, ORIGIN)
    response = authenticator.register(registration_options())
    verified = verify_registration_response(
        credential=response,
        expected_challenge=b"registration-challenge-0123456789",
        expected_rp_id=RP_ID,
        expected_origin=ORIGIN,
        require_user_verification=True,
    )
    assert verified.fmt == AttestationFormat.NONE
    assert verified.aaguid == "00000000-0000-0000-0000-000000000000"
    assert verified.user_verified and verified.sign_count == 0
    assert b64url(verified.credential_id) == response["id"] == response["rawId"]
    only = next(iter(authenticator.credentials.values()))
    assert verified.credential_public_key == only.cose_public_key()


def test_a_registration_is_shaped_like_a_browsers_to_json() -> None:
    response = SoftwareAuthenticator(RP_ID, ORIGIN).register(registration_options())
    assert response["type"] == "public-key" and response["clientExtensionResults"] == {}
    assert response["authenticatorAttachment"] == "platform"
    encoded = [
        response["id"],
        *(v for k, v in response["response"].items() if k not in ("transports", "publicKeyAlgorithm")),
    ]
    assert all("=" not in value and "+" not in value and "/" not in value for value in encoded)
    client_data = from_b64url(response["response"]["clientDataJSON"])
    challenge = b64url(b"registration-challenge-0123456789")
    assert (
        client_data
        == (f'{{"type":"webauthn.create","challenge":"{challenge}","origin":"{ORIGIN}","crossOrigin":false}}').encode()
    )


def test_assertions_verify_and_their_sign_count_grows_each_time(enrolled: Enrolled) -> None:
    counts = []
    for n in range(3):
        challenge = f"sign-in-{n}".encode()
        response = enrolled.authenticator.assert_(request_options(challenge, [enrolled.credential_id]))
        counts.append(verify_assertion(enrolled, response, challenge))
        assert from_b64url(response["response"]["userHandle"]) == USER_ID
    assert counts == [1, 2, 3]


def test_an_assertion_over_a_server_derived_challenge_verifies(enrolled: Enrolled) -> None:
    challenge = hashlib.sha256(b'{"decision":"approve","gate":"g-1"}').digest()
    response = enrolled.authenticator.assertion_for_challenge(challenge, enrolled.credential_id)
    assert verify_assertion(enrolled, response, challenge) == 1


def test_the_honest_client_refuses_options_for_another_relying_party_or_an_unknown_credential(
    enrolled: Enrolled,
) -> None:
    other = SoftwareAuthenticator("elsewhere.example.test", "https://elsewhere.example.test")
    with pytest.raises(ValueError, match="relying party"):
        other.register(registration_options())
    with pytest.raises(LookupError):
        enrolled.authenticator.assert_(request_options(b"c", [b"a credential nobody holds"]))


def flip_signature(response: dict[str, Any]) -> None:
    signature = bytearray(from_b64url(response["response"]["signature"]))
    signature[-1] ^= 0x01  # the last byte of s: still well-formed DER, no longer the signature
    response["response"]["signature"] = b64url(bytes(signature))


def flip_authenticator_data(response: dict[str, Any]) -> None:
    data = bytearray(from_b64url(response["response"]["authenticatorData"]))
    data[33] ^= 0x01  # the high byte of the sign count: a larger count passes the replay check, not the signature
    response["response"]["authenticatorData"] = b64url(bytes(data))


def flip_client_data(response: dict[str, Any]) -> None:
    data = from_b64url(response["response"]["clientDataJSON"])
    tampered = data.replace(b'"crossOrigin":false}', b'"crossOrigin":true }')  # same length, still valid JSON
    assert tampered != data
    response["response"]["clientDataJSON"] = b64url(tampered)


@pytest.mark.parametrize("tamper", [flip_signature, flip_authenticator_data, flip_client_data])
def test_a_changed_byte_anywhere_the_signature_covers_is_refused(
    enrolled: Enrolled, tamper: Callable[[dict[str, Any]], None]
) -> None:
    response = enrolled.authenticator.assertion_for_challenge(b"challenge", enrolled.credential_id)
    tamper(response)
    with pytest.raises(InvalidAuthenticationResponse, match="signature"):
        verify_assertion(enrolled, response, b"challenge")


@pytest.mark.parametrize(
    ("lie", "refusal"),
    [
        (Misbehaviour(origin="https://board.example.test.evil.example"), "origin"),
        (Misbehaviour(rp_id="evil.example"), "RP ID"),
        (Misbehaviour(user_verified=False), "User verification is required"),
    ],
)
def test_each_lie_in_an_assertion_is_refused(enrolled: Enrolled, lie: Misbehaviour, refusal: str) -> None:
    response = enrolled.authenticator.assertion_for_challenge(b"challenge", misbehave=lie)
    with pytest.raises(InvalidAuthenticationResponse, match=refusal):
        verify_assertion(enrolled, response, b"challenge")


@pytest.mark.parametrize(
    ("lie", "refusal"),
    [
        (Misbehaviour(origin="https://board.example.test.evil.example"), "origin"),
        (Misbehaviour(rp_id="evil.example"), "RP ID"),
        (Misbehaviour(user_verified=False), "User verification is required"),
    ],
)
def test_each_lie_in_a_registration_is_refused(lie: Misbehaviour, refusal: str) -> None:
    response = SoftwareAuthenticator(RP_ID, ORIGIN).register(registration_options(), misbehave=lie)
    with pytest.raises(InvalidRegistrationResponse, match=refusal):
        verify_registration_response(
            credential=response,
            expected_challenge=b"registration-challenge-0123456789",
            expected_rp_id=RP_ID,
            expected_origin=ORIGIN,
            require_user_verification=True,
        )


def test_a_replayed_assertion_and_a_sign_count_that_did_not_grow_are_refused(enrolled: Enrolled) -> None:
    first = enrolled.authenticator.assertion_for_challenge(b"challenge")
    assert verify_assertion(enrolled, first, b"challenge") == 1
    with pytest.raises(InvalidAuthenticationResponse, match="sign count"):
        verify_assertion(enrolled, first, b"challenge")
    same_count = enrolled.authenticator.assertion_for_challenge(
        b"fresh", misbehave=Misbehaviour(repeat_sign_count=True)
    )
    with pytest.raises(InvalidAuthenticationResponse, match="sign count"):
        verify_assertion(enrolled, same_count, b"fresh")
    assert verify_assertion(enrolled, enrolled.authenticator.assertion_for_challenge(b"next"), b"next") == 2
