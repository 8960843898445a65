"""Passkey ceremonies for the Close Board: enrol with an owner's one-time link, sign in, and sign a decision.

Each ceremony is two steps: options (a fresh challenge, stored and usable once) and the browser's response, verified
with the `webauthn` library against this board's relying-party id and origin (`BoardOrigin`). A decision's challenge
is not random: it is the SHA-256 of the canonical decision message (`countersign.audit.person_proof.decision_message`),
and that
message carries the digest of the gate's summary, so what the person saw is what the person signed. The decision
writer verifies the assertion again before it records the row, and the engine once more before the decision counts.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from psycopg import AsyncConnection
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from countersign.audit.person_proof import decision_challenge, decision_message, digest_of_gate
from countersign.callbacks import passkeys as store
from countersign.callbacks.callers import Caller
from countersign.callbacks.decision_writer import OnRecorded, Seal
from countersign.callbacks.passkeys import PasskeyRefused, Session
from countersign.http_edge.storable import storable_text
from countersign.services.decide import (
    Amendment,
    AmendmentInvalid,
    Decided,
    PlatformIdentity,
    decide_gate,
    parse_amendment,
)
from countersign.services.reading import is_gate_id
from countersign.states import ChallengePurpose, Channel, Decision, GateStatus
from countersign.store.gates import read_gate

__all__ = ["BoardOrigin", "FieldRefused", "OnRecorded", "PasskeyRefused", "Seal", "Session"]

RP_NAME = "Countersign Close Board"
MAX_RESPONSE_CHARS = 16_384
MAX_LABEL_CHARS = 80
MAX_CREDENTIAL_ID_CHARS = 1_366  # base64url of the 1,023 bytes WebAuthn allows a credential id
MAX_TOKEN_CHARS = 128  # our links' and sessions' tokens are 43 characters of base64url
ASSERTION_FIELDS = ("authenticatorData", "clientDataJSON", "signature", "userHandle")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def _base64url(value: object, longest: int) -> str | None:
    """`value` when it is base64url text of at most `longest` characters (so no NUL, no surrogate), else None."""
    if isinstance(value, str) and len(value) <= longest and _BASE64URL.fullmatch(value):
        return value
    return None


class FieldRefused(PasskeyRefused):
    """Input no such thing could hold (a NUL, a lone surrogate, not base64url, not a UUID), refused before it reaches
    the database: the board answers 400 naming `field`."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


def _gate_id(value: str) -> str:
    if not is_gate_id(value):
        raise FieldRefused("gate_id", "a gate id is a UUID, and this is not one")
    return value


def _link_token(value: object) -> str:
    """An enrolment link's token as the browser sent it; PasskeyRefused for anything our links never carry."""
    token = _base64url(value, MAX_TOKEN_CHARS)
    if token is None:
        raise PasskeyRefused("this enrolment link is unknown, already used or expired: ask the owner for a new one")
    return token


MAX_REASON_CHARS = 2_000


@dataclass(frozen=True)
class BoardOrigin:
    """Where the board is served: the passkeys' relying-party id (its host) and the origin browsers report."""

    rp_id: str
    origin: str

    @classmethod
    def from_url(cls, board_url: str) -> BoardOrigin:
        parts = urlsplit(board_url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"COUNTERSIGN_BOARD_URL must be an http(s) URL with a host, got {board_url!r}")
        if parts.scheme == "http" and parts.hostname != "localhost":
            raise ValueError(f"COUNTERSIGN_BOARD_URL must be https (passkeys need a secure origin), got {board_url!r}")
        return cls(rp_id=parts.hostname, origin=f"{parts.scheme}://{parts.netloc}")


def _response(text: Any) -> dict[str, Any]:
    """A browser's PublicKeyCredential JSON, bounded; PasskeyRefused naming what is wrong otherwise."""
    if isinstance(text, str):
        if len(text) > MAX_RESPONSE_CHARS:
            raise PasskeyRefused("the passkey response is larger than any authenticator sends")
        try:
            text = json.loads(text)
        except (ValueError, RecursionError):  # JSONDecodeError, and nesting past Python's recursion limit
            raise PasskeyRefused("the passkey response is not JSON") from None
    if not isinstance(text, dict) or not isinstance(text.get("id"), str) or not isinstance(text.get("response"), dict):
        raise PasskeyRefused("the passkey response has no credential id or response")
    if _base64url(text["id"], MAX_CREDENTIAL_ID_CHARS) is None:
        raise FieldRefused("response.id", "the passkey response's credential id is not base64url text")
    if len(json.dumps(text)) > MAX_RESPONSE_CHARS:
        raise PasskeyRefused("the passkey response is larger than any authenticator sends")
    return text


def _challenge_of(response: dict[str, Any]) -> bytes:
    """The challenge the browser says it answered (the signature covers it; the store says whether we issued it)."""
    try:
        client_data = json.loads(base64url_to_bytes(str(response["response"]["clientDataJSON"])))
        return base64url_to_bytes(str(client_data["challenge"]))
    except (KeyError, TypeError, ValueError):
        raise PasskeyRefused("the passkey response carries no readable client data") from None


# --- enrolment -----------------------------------------------------------------------------------------------------


async def enrolment_options(conn: AsyncConnection[Any], token: str, board: BoardOrigin) -> dict[str, Any]:
    """Creation options for the person the token names; PasskeyRefused when the link is used, expired or unknown."""
    enrolment = await store.enrolment_for(conn, _link_token(token))
    if enrolment is None:
        raise PasskeyRefused("this enrolment link is unknown, already used or expired: ask the owner for a new one")
    existing = await store.passkeys_of(conn, enrolment.principal_id)
    options = generate_registration_options(
        rp_id=board.rp_id,
        rp_name=RP_NAME,
        user_id=enrolment.user_handle,
        user_name=enrolment.principal_id,
        user_display_name=enrolment.display_name,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED, user_verification=UserVerificationRequirement.REQUIRED
        ),
        exclude_credentials=[
            PublicKeyCredentialDescriptor(id=base64url_to_bytes(k.credential_id)) for k in existing if not k.revoked_at
        ],
    )
    await store.store_challenge(conn, options.challenge, ChallengePurpose.ENROL, principal_id=enrolment.principal_id)
    return {"options": json.loads(options_to_json(options)), "display_name": enrolment.display_name}


async def complete_enrolment(
    conn: AsyncConnection[Any], token: str, response_text: Any, label: str, board: BoardOrigin
) -> str:
    """Verify the new credential and redeem the token with it (one transaction); returns the principal enrolled."""
    token = _link_token(token)
    response = _response(response_text)
    label = " ".join(str(label or "").split())[:MAX_LABEL_CHARS] or "passkey"
    if not storable_text(label):
        raise PasskeyRefused("the passkey's name contains a NUL character or an unpaired surrogate")
    async with conn.transaction():
        challenge = await store.use_challenge(conn, _challenge_of(response), ChallengePurpose.ENROL)
        enrolment = await store.enrolment_for(conn, token)
        if enrolment is None or enrolment.principal_id != challenge.principal_id:
            raise PasskeyRefused("this passkey was not created for this enrolment link")
        try:
            verified = verify_registration_response(
                credential=response,
                expected_challenge=challenge.challenge,
                expected_rp_id=board.rp_id,
                expected_origin=board.origin,
                require_user_verification=True,
            )
        except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
            raise PasskeyRefused(f"the new passkey does not verify: {exc}") from None
        return await store.redeem_enrolment(
            conn,
            token,
            credential_id=bytes_to_base64url(verified.credential_id),
            public_key=verified.credential_public_key,
            label=label,
        )


# --- sign-in -------------------------------------------------------------------------------------------------------


async def sign_in_options(conn: AsyncConnection[Any], board: BoardOrigin) -> dict[str, Any]:
    """Request options for a discoverable passkey: the person picks theirs, no name is typed."""
    options = generate_authentication_options(rp_id=board.rp_id, user_verification=UserVerificationRequirement.REQUIRED)
    await store.store_challenge(conn, options.challenge, ChallengePurpose.SIGN_IN)
    return {"options": json.loads(options_to_json(options))}


def _verify_assertion(response: dict[str, Any], challenge: bytes, passkey: store.Passkey, board: BoardOrigin) -> int:
    try:
        verified = verify_authentication_response(
            credential=response,
            expected_challenge=challenge,
            expected_rp_id=board.rp_id,
            expected_origin=board.origin,
            credential_public_key=passkey.public_key,
            credential_current_sign_count=passkey.sign_count,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise PasskeyRefused(f"the passkey assertion does not verify: {exc}") from None
    return int(verified.new_sign_count)


async def complete_sign_in(conn: AsyncConnection[Any], response_text: Any, board: BoardOrigin) -> Session:
    """Verify the assertion and open a session for its person (one transaction)."""
    response = _response(response_text)
    async with conn.transaction():
        challenge = await store.use_challenge(conn, _challenge_of(response), ChallengePurpose.SIGN_IN)
        passkey = await store.live_passkey(conn, str(response["id"]))
        if passkey is None:
            raise PasskeyRefused("this passkey is not enrolled, or it was revoked, or its person is no longer active")
        count = _verify_assertion(response, challenge.challenge, passkey, board)
        await store.record_use(conn, passkey.credential_id, count)
        return await store.open_session(conn, passkey.principal_id, passkey.credential_id)


async def viewer_for(conn: AsyncConnection[Any], token: str | None) -> tuple[Caller, str] | None:
    """The signed-in person and their session's CSRF token, or None."""
    session = _base64url(token, MAX_TOKEN_CHARS)  # a cookie we never set reads as no session, not an error
    return None if session is None else await store.session_viewer(conn, session)


async def sign_out(conn: AsyncConnection[Any], token: str) -> None:
    session = _base64url(token, MAX_TOKEN_CHARS)
    if session is not None:
        await store.end_session(conn, session)


async def passkeys_of(conn: AsyncConnection[Any], principal_id: str) -> list[store.Passkey]:
    return await store.passkeys_of(conn, principal_id)


async def revoke_passkey(conn: AsyncConnection[Any], principal_id: str, credential_id: str) -> bool:
    """Revoke one of the person's own passkeys (and end the sessions it opened); False when it was not theirs.
    FieldRefused for an id no passkey has (not base64url of a credential id's length: a NUL never reaches SQL)."""
    if _base64url(credential_id, MAX_CREDENTIAL_ID_CHARS) is None:
        raise FieldRefused("credential_id", "a passkey's credential id is base64url text, and this is not")
    return await store.revoke(conn, principal_id, credential_id)


# --- a decision signed with a passkey --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionToSign:
    """What the person is asked to sign: the options for the browser and the message, shown in words."""

    options: dict[str, Any]
    message: dict[str, Any]


def _amendment(raw: Any) -> Amendment:
    try:
        return parse_amendment(raw)
    except AmendmentInvalid as exc:
        raise FieldRefused(exc.field, exc.reason) from None


async def decision_options(
    conn: AsyncConnection[Any],
    viewer: Caller,
    gate_id: str,
    decision: str,
    reason: str,
    board: BoardOrigin,
    *,
    amendment: Any = None,
) -> DecisionToSign:
    """The canonical decision message for this person, gate, decision and reason, and request options whose challenge
    is its SHA-256, limited to the person's own passkeys. Nothing is recorded until the signed response returns.

    `amendment` (the body's, as the signed callback takes it) makes the approval certify another sum: the message then
    carries its digest, and the completion must send the same amendment back."""
    gate_id = _gate_id(gate_id)
    amended = None if amendment is None else _amendment(amendment)
    if amended is not None and decision != Decision.APPROVE:
        raise PasskeyRefused("only an approval certifies another sum")
    if amended is not None and not str(reason or "").strip():
        raise PasskeyRefused("certifying another sum needs your reason")
    if decision not in tuple(d.value for d in Decision):
        raise PasskeyRefused(f"decision must be approve or reject, not {decision!r}")
    reason = str(reason or "").strip()
    if not storable_text(reason):  # it is signed as UTF-8 and stored as text: neither holds these
        raise FieldRefused("reason", "contains a NUL character or an unpaired surrogate")
    if len(reason) > MAX_REASON_CHARS:
        raise PasskeyRefused(f"the reason is longer than {MAX_REASON_CHARS} characters")
    if decision == Decision.REJECT and not reason:
        raise PasskeyRefused("a rejection needs your reason")
    gate = await read_gate(conn, gate_id)
    if gate is None:
        raise PasskeyRefused("there is no such gate")
    if gate.status is not GateStatus.OPEN:
        raise PasskeyRefused(f"this gate is {gate.status.value}; there is nothing to sign")
    own = [k for k in await store.passkeys_of(conn, viewer.principal_id) if k.revoked_at is None]
    if not own:
        raise PasskeyRefused("you hold no passkey: ask the owner for an enrolment link")
    fields = {
        "gate_id": gate.gate_id,
        "principal": viewer.principal_id,
        "decision": decision,
        "reason": reason,
        "nonce": f"board-{secrets.token_hex(16)}",
        "signed_at": int(time.time()),
        "summary_digest": digest_of_gate(gate.facts.digest_fields(), gate.facts.summary_json),
    }
    if amended is not None:
        fields["amendment_digest"] = amended.digest()
    message = decision_message(**fields)  # type: ignore[arg-type]
    challenge = decision_challenge(message)
    options = generate_authentication_options(
        rp_id=board.rp_id,
        challenge=challenge,
        allow_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(k.credential_id)) for k in own],
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    await store.store_challenge(
        conn,
        challenge,
        ChallengePurpose.DECIDE,
        principal_id=viewer.principal_id,
        gate_id=gate.gate_id,
        message=message,
    )
    return DecisionToSign(json.loads(options_to_json(options)), fields)


async def complete_decision(
    conn: AsyncConnection[Any],
    viewer: Caller,
    gate_id: str,
    response_text: Any,
    board: BoardOrigin,
    *,
    seal: Seal | None = None,
    on_recorded: OnRecorded | None = None,
    amendment: Any = None,
) -> Decided:
    """Record the decision the person signed, through `decide_gate` like every other door: the challenge must be one
    this board issued to this person for this gate, unused (a replayed assertion is refused); the decision writer
    verifies the assertion before the row. An approval with edits sends its amendment again: it must be the one
    whose digest the person signed."""
    gate_id = _gate_id(gate_id)
    response = _response(response_text)
    inner = response["response"]
    for name in ASSERTION_FIELDS:  # copied into the stored proof (jsonb, which holds no NUL): checked before use
        if inner.get(name) is not None and _base64url(inner[name], MAX_RESPONSE_CHARS) is None:
            raise FieldRefused(f"response.response.{name}", "an assertion's field is base64url text, and this is not")
    challenge = await store.use_challenge(conn, _challenge_of(response), ChallengePurpose.DECIDE)
    if challenge.principal_id != viewer.principal_id or challenge.gate_id != gate_id or challenge.message is None:
        raise PasskeyRefused("this signature was asked for another person or another gate")
    fields = json.loads(challenge.message)
    amended = None if amendment is None else _amendment(amendment)
    if (None if amended is None else amended.digest()) != fields.get("amendment_digest"):
        raise PasskeyRefused("the amendment sent is not the one your passkey signed")
    proof = {
        "kind": "passkey",
        "credential_id": str(response["id"]),
        "authenticator_data": str(inner.get("authenticatorData", "")),
        "client_data_json": str(inner.get("clientDataJSON", "")),
        "signature": str(inner.get("signature", "")),
        "signed_at": int(fields["signed_at"]),
        "rp_id": board.rp_id,
        "origin": board.origin,
    }
    if isinstance(inner.get("userHandle"), str):
        proof["user_handle"] = inner["userHandle"]
    identity = PlatformIdentity(channel=Channel.BOARD, external_id=viewer.principal_id, proof=proof)
    return await decide_gate(
        conn,
        identity,
        gate_id=gate_id,
        decision=str(fields["decision"]),
        reason=str(fields["reason"]),
        nonce=str(fields["nonce"]),
        seal=seal,
        on_recorded=on_recorded,
        amendment=amended,
    )
