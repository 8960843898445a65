"""The passkey tables' queries: enrolments, credentials, WebAuthn challenges and board sessions (migration 0017).

Credentials are never written here directly: the service roles hold no INSERT or UPDATE on `principal_passkey`, so
a credential enters through `redeem_passkey_enrolment` (which needs the owner's one-time token), leaves through
`revoke_passkey`, and its sign count rises through `record_passkey_use`, each a database function. Sessions and
challenges belong to the callbacks role; tokens are stored as their SHA-256, never as themselves.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, errors
from psycopg.rows import class_row, scalar_row

from countersign.audit.trace import append_event
from countersign.callbacks.callers import Caller
from countersign.states import PrincipalKind

CHALLENGE_TTL_S = 300
MAX_LIVE_SIGN_INS = 10_000  # open sign-in challenges (anyone may ask for one); past this, new ones are refused
EXPIRED_SWEEP_ROWS = 500  # expired challenges deleted per new one, so a flood cannot grow the table
SESSION_TTL_H = 8
ENROLMENT_TTL_H = 24


class PasskeyRefused(Exception):
    """A ceremony step the database or the rules refused; the message is for the person."""


def token_digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


@dataclass(frozen=True)
class Enrolment:
    enrolment_id: str
    principal_id: str
    display_name: str
    user_handle: bytes
    expires_at: datetime


@dataclass(frozen=True)
class Passkey:
    credential_id: str
    principal_id: str
    public_key: bytes
    sign_count: int
    label: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class Challenge:
    challenge: bytes
    purpose: str
    principal_id: str | None
    gate_id: str | None
    message: bytes | None


async def issue_enrolment(
    conn: AsyncConnection[Any], principal_id: str, *, issued_by: str, hours: int = ENROLMENT_TTL_H
) -> str:
    """As the owner: a one-time enrolment token for an active human (returned once, stored as its SHA-256)."""
    token = secrets.token_urlsafe(32)
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT principal_id FROM principal WHERE principal_id = %s AND kind = 'human' AND active", (principal_id,)
        )
        if await cur.fetchone() is None:
            raise PasskeyRefused(f"principal {principal_id!r} is not an active human; import them first")
        await cur.execute(
            "INSERT INTO passkey_enrolment (principal_id, token_sha256, issued_by, expires_at)"
            " VALUES (%s, %s, %s, now() + make_interval(hours => %s)) RETURNING enrolment_id::text",
            (principal_id, token_digest(token.encode()), issued_by, hours),
        )
        enrolment_id = await cur.fetchone()
    await append_event(
        conn,
        actor=issued_by,
        close_id=None,
        kind="passkey_enrolment_issued",
        payload={"principal": principal_id, "enrolment_id": enrolment_id, "valid_hours": hours},
    )
    return token


async def enrolment_for(conn: AsyncConnection[Any], token: str) -> Enrolment | None:
    """The live enrolment this token opens, or None (unknown, used, expired, or the person is no longer active)."""
    async with conn.cursor(row_factory=class_row(Enrolment)) as cur:
        await cur.execute(
            "SELECT enrolment_id::text AS enrolment_id, principal_id, display_name, user_handle, expires_at"
            " FROM passkey_enrolment_for(%s)",
            (token.encode(),),
        )
        return await cur.fetchone()


async def redeem_enrolment(
    conn: AsyncConnection[Any], token: str, *, credential_id: str, public_key: bytes, label: str
) -> str:
    """Add the credential for the token's principal (the database checks the token); returns the principal."""
    try:
        async with conn.cursor(row_factory=scalar_row) as cur:
            await cur.execute(
                "SELECT redeem_passkey_enrolment(%s, %s, %s, %s)", (token.encode(), credential_id, public_key, label)
            )
            principal: str | None = await cur.fetchone()
    except (errors.InsufficientPrivilege, errors.UniqueViolation, errors.CheckViolation) as exc:
        raise PasskeyRefused(exc.diag.message_primary or str(exc)) from None
    assert principal is not None
    return principal


async def passkeys_of(conn: AsyncConnection[Any], principal_id: str) -> list[Passkey]:
    async with conn.cursor(row_factory=class_row(Passkey)) as cur:
        await cur.execute(
            "SELECT credential_id, principal_id, public_key, sign_count, label, created_at, last_used_at, revoked_at"
            " FROM principal_passkey WHERE principal_id = %s ORDER BY created_at",
            (principal_id,),
        )
        return await cur.fetchall()


async def live_passkey(conn: AsyncConnection[Any], credential_id: str) -> Passkey | None:
    """The credential when it is not revoked and its person is an active human."""
    async with conn.cursor(row_factory=class_row(Passkey)) as cur:
        await cur.execute(
            "SELECT k.credential_id, k.principal_id, k.public_key, k.sign_count, k.label, k.created_at,"
            " k.last_used_at, k.revoked_at FROM principal_passkey k JOIN principal p USING (principal_id)"
            " WHERE k.credential_id = %s AND k.revoked_at IS NULL AND p.kind = 'human' AND p.active",
            (credential_id,),
        )
        return await cur.fetchone()


async def record_use(conn: AsyncConnection[Any], credential_id: str, sign_count: int) -> None:
    try:
        await conn.execute("SELECT record_passkey_use(%s, %s)", (credential_id, sign_count))
    except errors.InsufficientPrivilege as exc:
        raise PasskeyRefused(exc.diag.message_primary or str(exc)) from None


async def revoke(conn: AsyncConnection[Any], principal_id: str, credential_id: str) -> bool:
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT revoke_passkey(%s, %s)", (principal_id, credential_id))
        return bool(await cur.fetchone())


async def store_challenge(
    conn: AsyncConnection[Any],
    challenge: bytes,
    purpose: str,
    *,
    principal_id: str | None = None,
    gate_id: str | None = None,
    message: bytes | None = None,
) -> None:
    await conn.execute(
        "DELETE FROM webauthn_challenge WHERE ctid = ANY (ARRAY(SELECT ctid FROM webauthn_challenge"
        " WHERE expires_at < now() LIMIT %s))",
        (EXPIRED_SWEEP_ROWS,),
    )
    if purpose == "sign_in":
        async with conn.cursor(row_factory=scalar_row) as cur:
            await cur.execute(
                "SELECT count(*) FROM (SELECT 1 FROM webauthn_challenge WHERE purpose = 'sign_in' AND used_at IS NULL"
                " AND expires_at > now() LIMIT %s) live",
                (MAX_LIVE_SIGN_INS,),
            )
            if (await cur.fetchone() or 0) >= MAX_LIVE_SIGN_INS:
                raise PasskeyRefused("too many sign-ins are in flight; try again in a few minutes")
    await conn.execute(
        "INSERT INTO webauthn_challenge (challenge, purpose, principal_id, gate_id, message, expires_at)"
        " VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s))",
        (challenge, purpose, principal_id, gate_id, message, CHALLENGE_TTL_S),
    )


async def use_challenge(conn: AsyncConnection[Any], challenge: bytes, purpose: str) -> Challenge:
    """Mark the challenge used, once: a second use (a replayed assertion), an expired or unknown one is refused."""
    async with conn.cursor(row_factory=class_row(Challenge)) as cur:
        await cur.execute(
            "UPDATE webauthn_challenge SET used_at = now()"
            " WHERE challenge = %s AND purpose = %s AND used_at IS NULL AND expires_at > now()"
            " RETURNING challenge, purpose, principal_id, gate_id::text AS gate_id, message",
            (challenge, purpose),
        )
        row = await cur.fetchone()
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
    await conn.execute(
        "INSERT INTO board_session (session_sha256, principal_id, credential_id, csrf_token, expires_at)"
        " VALUES (%s, %s, %s, %s, now() + make_interval(hours => %s))",
        (token_digest(token.encode()), principal_id, credential_id, csrf, SESSION_TTL_H),
    )
    return Session(token, csrf, principal_id)


@dataclass(frozen=True)
class _SessionRow:
    principal_id: str
    kind: str
    display_name: str
    roles: list[str]
    active: bool
    csrf_token: str


async def session_viewer(conn: AsyncConnection[Any], token: str) -> tuple[Caller, str] | None:
    """The live session's person and CSRF token: not ended, not expired, its passkey not revoked, its person an
    active human. None otherwise."""
    if not token or len(token) > 128:
        return None
    async with conn.cursor(row_factory=class_row(_SessionRow)) as cur:
        await cur.execute(
            "SELECT p.principal_id, p.kind, p.display_name, p.roles, p.active, s.csrf_token"
            " FROM board_session s JOIN principal p USING (principal_id)"
            " JOIN principal_passkey k ON k.credential_id = s.credential_id"
            " WHERE s.session_sha256 = %s AND s.ended_at IS NULL AND s.expires_at > now()"
            " AND k.revoked_at IS NULL AND p.kind = 'human' AND p.active",
            (token_digest(token.encode()),),
        )
        row = await cur.fetchone()
    if row is None:
        return None
    caller = Caller(row.principal_id, PrincipalKind(row.kind), row.display_name, tuple(row.roles), row.active)
    return caller, row.csrf_token


async def end_session(conn: AsyncConnection[Any], token: str) -> None:
    await conn.execute(
        "UPDATE board_session SET ended_at = now() WHERE session_sha256 = %s AND ended_at IS NULL",
        (token_digest(token.encode()),),
    )
