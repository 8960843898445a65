"""The passkey ceremonies' steps: enrolments, credentials, WebAuthn challenges and board sessions (migration 0017).

Credentials are never written here directly: the service roles may neither insert into nor update
`principal_passkey`, so a credential enters through `redeem_passkey_enrolment` (which needs the owner's one-time
token), leaves through `revoke_passkey`, and its sign count rises through `record_passkey_use`, each a database
function. Sessions and challenges belong to the callbacks role; tokens are stored as their SHA-256, never as
themselves. The statements are countersign.store.passkeys (its rows are re-exported here); this module holds the
rules around them: the tokens and their digests, the lifetimes, the cap on live sign-ins, and the refusals the
person reads.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, errors

from countersign.audit.trace import append_event
from countersign.callbacks.callers import Caller
from countersign.states import ChallengePurpose, TraceKind
from countersign.store import passkeys as passkey_store
from countersign.store.passkeys import Challenge as Challenge
from countersign.store.passkeys import Enrolment as Enrolment
from countersign.store.passkeys import Passkey as Passkey
from countersign.store.principals import read_active_human_id

CHALLENGE_TTL_S = 300
MAX_LIVE_SIGN_INS = 10_000  # open sign-in challenges (anyone may ask for one); past this, new ones are refused
EXPIRED_SWEEP_ROWS = 500  # expired challenges deleted per new one, so a flood cannot grow the table
SESSION_TTL_H = 8
ENROLMENT_TTL_H = 24


class PasskeyRefused(Exception):
    """A ceremony step the database or the rules refused; the message is for the person."""


def token_digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


async def issue_enrolment(
    conn: AsyncConnection[Any], principal_id: str, *, issued_by: str, hours: int = ENROLMENT_TTL_H
) -> str:
    """As the owner: a one-time enrolment token for an active human (returned once, stored as its SHA-256)."""
    token = secrets.token_urlsafe(32)
    if await read_active_human_id(conn, principal_id) is None:
        raise PasskeyRefused(f"principal {principal_id!r} is not an active human; import them first")
    enrolment_id = await passkey_store.insert_enrolment(
        conn, principal_id, token_digest(token.encode()), issued_by=issued_by, hours=hours
    )
    await append_event(
        conn,
        actor=issued_by,
        close_id=None,
        kind=TraceKind.PASSKEY_ENROLMENT_ISSUED,
        payload={"principal": principal_id, "enrolment_id": enrolment_id, "valid_hours": hours},
    )
    return token


async def enrolment_for(conn: AsyncConnection[Any], token: str) -> Enrolment | None:
    """The live enrolment this token opens, or None (unknown, used, expired, or the person is no longer active)."""
    return await passkey_store.read_enrolment(conn, token.encode())


async def redeem_enrolment(
    conn: AsyncConnection[Any], token: str, *, credential_id: str, public_key: bytes, label: str
) -> str:
    """Add the credential for the token's principal (the database checks the token); returns the principal."""
    try:
        principal = await passkey_store.redeem_enrolment(
            conn, token.encode(), credential_id=credential_id, public_key=public_key, label=label
        )
    except (errors.InsufficientPrivilege, errors.UniqueViolation, errors.CheckViolation) as exc:
        raise PasskeyRefused(exc.diag.message_primary or str(exc)) from None
    assert principal is not None
    return principal


async def passkeys_of(conn: AsyncConnection[Any], principal_id: str) -> list[Passkey]:
    return await passkey_store.passkeys_of(conn, principal_id)


async def live_passkey(conn: AsyncConnection[Any], credential_id: str) -> Passkey | None:
    """The credential when it is not revoked and its person is an active human."""
    return await passkey_store.live_passkey(conn, credential_id)


async def record_use(conn: AsyncConnection[Any], credential_id: str, sign_count: int) -> None:
    try:
        await passkey_store.record_passkey_use(conn, credential_id, sign_count)
    except errors.InsufficientPrivilege as exc:
        raise PasskeyRefused(exc.diag.message_primary or str(exc)) from None


async def revoke(conn: AsyncConnection[Any], principal_id: str, credential_id: str) -> bool:
    return await passkey_store.revoke_passkey(conn, principal_id, credential_id)


async def store_challenge(
    conn: AsyncConnection[Any],
    challenge: bytes,
    purpose: ChallengePurpose,
    *,
    principal_id: str | None = None,
    gate_id: str | None = None,
    message: bytes | None = None,
) -> None:
    await passkey_store.sweep_expired_challenges(conn, EXPIRED_SWEEP_ROWS)
    cap = MAX_LIVE_SIGN_INS
    if purpose == ChallengePurpose.SIGN_IN and await passkey_store.count_live_sign_ins(conn, cap) >= cap:
        raise PasskeyRefused("too many sign-ins are in flight; try again in a few minutes")
    await passkey_store.insert_challenge(
        conn,
        challenge,
        purpose,
        principal_id=principal_id,
        gate_id=gate_id,
        message=message,
        seconds=CHALLENGE_TTL_S,
    )


async def use_challenge(conn: AsyncConnection[Any], challenge: bytes, purpose: ChallengePurpose) -> Challenge:
    """Mark the challenge used, once: a second use (a replayed assertion), an expired or unknown one is refused."""
    row = await passkey_store.use_challenge(conn, challenge, purpose)
    if row is None:
        raise PasskeyRefused(
            "this passkey response answers no open request: it was already used, it expired, or it was never issued"
        )
    return row


@dataclass(frozen=True)
class Session:
    token: str
    csrf_token: str
    principal_id: str


async def open_session(conn: AsyncConnection[Any], principal_id: str, credential_id: str) -> Session:
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    await passkey_store.insert_session(
        conn,
        token_digest(token.encode()),
        principal_id=principal_id,
        credential_id=credential_id,
        csrf_token=csrf,
        hours=SESSION_TTL_H,
    )
    return Session(token, csrf, principal_id)


async def session_viewer(conn: AsyncConnection[Any], token: str) -> tuple[Caller, str] | None:
    """The live session's person and CSRF token: not ended, not expired, its passkey not revoked, its person an
    active human. None otherwise."""
    if not token or len(token) > 128:
        return None
    row = await passkey_store.read_session(conn, token_digest(token.encode()))
    if row is None:
        return None
    return row.caller, row.csrf_token


async def end_session(conn: AsyncConnection[Any], token: str) -> None:
    await passkey_store.end_session(conn, token_digest(token.encode()))
