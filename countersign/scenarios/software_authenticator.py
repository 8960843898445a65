"""A software FIDO2/WebAuthn authenticator and client, so the demo and the tests can use passkeys without a browser.

This is a software authenticator for demos and tests. Its private keys (ES256, P-256) live in memory for the life
of the object and are never written anywhere; it is not a security device and must never stand in for one. It
plays both halves a browser and a passkey play: it reads the options JSON a server sends (as
`webauthn.options_to_json` writes it) and returns the JSON `PublicKeyCredential.toJSON()` would return, with
attestation "none", an all-zero AAGUID, user present and user verified set, and a sign count per credential that
grows on every assertion. `Misbehaviour` makes it lie in one named way, so negative tests can show a server refuse.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

ES256 = -7  # COSE algorithm: ECDSA over P-256 with SHA-256
FLAG_USER_PRESENT = 0x01
FLAG_USER_VERIFIED = 0x04
FLAG_ATTESTED_CREDENTIAL_DATA = 0x40
ZERO_AAGUID = bytes(16)
CREDENTIAL_ID_BYTES = 32


def b64url(data: bytes) -> str:
    """Base64url without padding, the encoding of every binary field in WebAuthn JSON."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def from_b64url(text: str) -> bytes:
    """The bytes of a base64url string, padded or not."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Misbehaviour:
    """One way to lie, for negative tests; the default lies in no way at all."""

    origin: str | None = None  # claim this origin in clientDataJSON instead of the real one
    rp_id: str | None = None  # hash this RP id into authenticatorData instead of the real one
    user_verified: bool = True  # False clears the user-verified flag
    repeat_sign_count: bool = False  # sign with the last sign count again instead of increasing it


HONEST = Misbehaviour()


@dataclass
class Credential:
    """One passkey: its id, its private key (memory only), the user it belongs to and its sign count."""

    credential_id: bytes
    private_key: ec.EllipticCurvePrivateKey
    user_handle: bytes
    sign_count: int = 0

    def cose_public_key(self) -> bytes:
        """The COSE_Key (EC2, ES256, P-256) a server stores for this credential."""
        numbers = self.private_key.public_key().public_numbers()
        key = {1: 2, 3: ES256, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")}
        return cbor2.dumps(key, canonical=True)

    def spki_public_key(self) -> bytes:
        """The public key as DER SubjectPublicKeyInfo, what a browser reports as `getPublicKey()`."""
        return self.private_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )


class SoftwareAuthenticator:
    """A platform passkey and its browser for one relying party (`rp_id`) seen from one `origin`."""

    def __init__(self, rp_id: str, origin: str) -> None:
        self.rp_id = rp_id
        self.origin = origin
        self.credentials: dict[bytes, Credential] = {}

    def register(self, options: dict[str, Any], misbehave: Misbehaviour = HONEST) -> dict[str, Any]:
        """`navigator.credentials.create()`: a new credential for the creation options, as RegistrationResponseJSON."""
        rp_id = options.get("rp", {}).get("id", self.rp_id)
        if rp_id != self.rp_id:
            raise ValueError(f"the options name relying party {rp_id!r}, this authenticator serves {self.rp_id!r}")
        if not any(p.get("alg") == ES256 for p in options.get("pubKeyCredParams", [])):
            raise ValueError("the server accepts no ES256 key, the only kind this authenticator makes")
        excluded = {from_b64url(c["id"]) for c in options.get("excludeCredentials", [])}
        if excluded & self.credentials.keys():
            raise ValueError("this authenticator already holds a credential the server excludes")
        credential = Credential(
            credential_id=secrets.token_bytes(CREDENTIAL_ID_BYTES),
            private_key=ec.generate_private_key(ec.SECP256R1()),
            user_handle=from_b64url(options["user"]["id"]),
        )
        self.credentials[credential.credential_id] = credential
        client_data = self._client_data("webauthn.create", from_b64url(options["challenge"]), misbehave)
        attested = ZERO_AAGUID + len(credential.credential_id).to_bytes(2, "big") + credential.credential_id
        auth_data = self._authenticator_data(
            misbehave, FLAG_ATTESTED_CREDENTIAL_DATA, 0, attested + credential.cose_public_key()
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data}, canonical=True)
        return {
            "id": b64url(credential.credential_id),
            "rawId": b64url(credential.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation),
                "authenticatorData": b64url(auth_data),
                "transports": ["internal"],
                "publicKey": b64url(credential.spki_public_key()),
                "publicKeyAlgorithm": ES256,
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    def assert_(self, options: dict[str, Any], misbehave: Misbehaviour = HONEST) -> dict[str, Any]:
        """`navigator.credentials.get()`: an assertion for the request options, as AuthenticationResponseJSON."""
        rp_id = options.get("rpId", self.rp_id)
        if rp_id != self.rp_id:
            raise ValueError(f"the options name relying party {rp_id!r}, this authenticator serves {self.rp_id!r}")
        allowed = [from_b64url(c["id"]) for c in options.get("allowCredentials", [])]
        held = [credential_id for credential_id in allowed if credential_id in self.credentials]
        if allowed and not held:
            raise LookupError("this authenticator holds none of the credentials the server allows")
        return self.assertion_for_challenge(from_b64url(options["challenge"]), held[0] if held else None, misbehave)

    get = assert_

    def assertion_for_challenge(
        self, challenge: bytes, credential_id: bytes | None = None, misbehave: Misbehaviour = HONEST
    ) -> dict[str, Any]:
        """An assertion over `challenge` by one credential (by default the newest), as AuthenticationResponseJSON.

        Board decisions use this: their challenge is derived by the server from the decision message, not sent.
        """
        if not self.credentials:
            raise LookupError("this authenticator holds no credential yet; register one first")
        if credential_id is not None and credential_id not in self.credentials:
            raise LookupError("this authenticator does not hold the credential asked for")
        credential = (
            self.credentials[credential_id] if credential_id is not None else list(self.credentials.values())[-1]
        )
        if not misbehave.repeat_sign_count:
            credential.sign_count += 1
        client_data = self._client_data("webauthn.get", challenge, misbehave)
        auth_data = self._authenticator_data(misbehave, 0, credential.sign_count, b"")
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = credential.private_key.sign(signed, ec.ECDSA(hashes.SHA256()))  # DER, as WebAuthn wants
        return {
            "id": b64url(credential.credential_id),
            "rawId": b64url(credential.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": b64url(credential.user_handle),
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    def _client_data(self, kind: str, challenge: bytes, misbehave: Misbehaviour) -> bytes:
        """clientDataJSON as a browser serialises it: these four members, in this order, without spaces."""
        member = {"type": kind, "challenge": b64url(challenge), "origin": misbehave.origin or self.origin}
        return json.dumps({**member, "crossOrigin": False}, separators=(",", ":")).encode("utf-8")

    def _authenticator_data(self, misbehave: Misbehaviour, flags: int, sign_count: int, rest: bytes) -> bytes:
        """rpIdHash || flags || signCount (big-endian, 4 bytes) || attested credential data, if any."""
        flags |= FLAG_USER_PRESENT | (FLAG_USER_VERIFIED if misbehave.user_verified else 0)
        rp_id_hash = hashlib.sha256((misbehave.rp_id or self.rp_id).encode("utf-8")).digest()
        return rp_id_hash + bytes([flags]) + sign_count.to_bytes(4, "big") + rest
