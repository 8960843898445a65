"""The passkey tables (migration 0017): enrolments, enrolled passkeys, WebAuthn challenges and board sessions.

Reads `passkey_enrolment` (through `passkey_enrolment_for`), `principal_passkey`, `principal_identity` and
`principal`; writes `passkey_enrolment`, `webauthn_challenge` and `board_session`, and calls the database functions
that alone change `principal_passkey` (`redeem_passkey_enrolment`, `record_passkey_use`, `revoke_passkey`: the
service roles hold no INSERT or UPDATE on it). Called by countersign/callbacks/passkeys.py (the ceremonies' steps,
which own the rules: the token digests, the challenges' lifetime and the cap on live sign-ins), by
countersign/callbacks/decision_writer.py (a board decision's sign count) and, for the enrolment notice a person's
direct message carries, by countersign.services.chat_reads.

Tokens arrive here already digested where the table stores a digest (`board_session.session_sha256`,
`passkey_enrolment.token_sha256`); `passkey_enrolment_for` and `redeem_passkey_enrolment` take the token itself and
digest it in the database. Errors the database raises (a refused privilege, a unique or check violation) reach the
caller as psycopg raises them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from countersign.states import ChallengePurpose, PrincipalKind
from countersign.store.principals import Caller


@dataclass(frozen=True)
class EnrolledPasskey:
    label: str
    created_at: datetime


async def enrolled_passkey_for_slack_user(
    conn: AsyncConnection[Any], credential_id: str, slack_user: str
) -> EnrolledPasskey | None:
    """Returns the passkey's label and enrolment time, when `slack_user` is a Slack identity of the passkey's own
    person (identities are stored case-folded, Slack user ids are upper case); None otherwise."""
    async with conn.cursor(row_factory=class_row(EnrolledPasskey)) as cur:
        await cur.execute(
            "SELECT k.label, k.created_at FROM principal_passkey k"
            " JOIN principal_identity i ON i.principal_id = k.principal_id AND i.channel = 'slack'"
            " WHERE k.credential_id = %s AND upper(i.external_id) = %s LIMIT 1",
            (credential_id, slack_user),
        )
        return await cur.fetchone()


# --- enrolments ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Enrolment:
    """A live enrolment as `passkey_enrolment_for` returns it: unused, unexpired, its person an active human."""

    enrolment_id: str
    principal_id: str
    display_name: str
    user_handle: bytes
    expires_at: datetime


async def insert_enrolment(
    conn: AsyncConnection[Any], principal_id: str, token_sha256: bytes, *, issued_by: str, hours: int
) -> str:
    """Store a one-time enrolment for the principal, valid `hours` from now; returns its enrolment id."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO passkey_enrolment (principal_id, token_sha256, issued_by, expires_at)"
            " VALUES (%s, %s, %s, now() + make_interval(hours => %s)) RETURNING enrolment_id::text",
            (principal_id, token_sha256, issued_by, hours),
        )
        enrolment_id: str | None = await cur.fetchone()
    assert enrolment_id is not None  # an INSERT ... RETURNING that did not raise returned its row
    return enrolment_id


async def read_enrolment(conn: AsyncConnection[Any], token: bytes) -> Enrolment | None:
    """The live enrolment this token opens, or None (unknown, used, expired, or the person is no longer active)."""
    async with conn.cursor(row_factory=class_row(Enrolment)) as cur:
        await cur.execute(
            "SELECT enrolment_id::text AS enrolment_id, principal_id, display_name, user_handle, expires_at"
            " FROM passkey_enrolment_for(%s)",
            (token,),
        )
        return await cur.fetchone()


async def redeem_enrolment(
    conn: AsyncConnection[Any], token: bytes, *, credential_id: str, public_key: bytes, label: str
) -> str | None:
    """Add the credential for the token's principal through `redeem_passkey_enrolment` (the database checks the
    token and raises when it refuses); returns the principal."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT redeem_passkey_enrolment(%s, %s, %s, %s)", (token, credential_id, public_key, label))
        principal: str | None = await cur.fetchone()
    return principal


# --- passkeys ------------------------------------------------------------------------------------------------------


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


_PASSKEY_COLUMNS = (
    "k.credential_id, k.principal_id, k.public_key, k.sign_count, k.label, k.created_at, k.last_used_at, k.revoked_at"
)


async def passkeys_of(conn: AsyncConnection[Any], principal_id: str) -> list[Passkey]:
    """Every passkey the principal enrolled, revoked ones too, oldest first."""
    async with conn.cursor(row_factory=class_row(Passkey)) as cur:
        await cur.execute(
            f"SELECT {_PASSKEY_COLUMNS} FROM principal_passkey k WHERE k.principal_id = %s ORDER BY k.created_at",
            (principal_id,),
        )
        return await cur.fetchall()


async def live_passkey(conn: AsyncConnection[Any], credential_id: str) -> Passkey | None:
    """The credential when it is not revoked and its person is an active human; None otherwise."""
    async with conn.cursor(row_factory=class_row(Passkey)) as cur:
        await cur.execute(
            f"SELECT {_PASSKEY_COLUMNS} FROM principal_passkey k JOIN principal p USING (principal_id)"
            " WHERE k.credential_id = %s AND k.revoked_at IS NULL AND p.kind = 'human' AND p.active",
            (credential_id,),
        )
        return await cur.fetchone()


async def record_passkey_use(conn: AsyncConnection[Any], credential_id: str, sign_count: int) -> None:
    """Raise the passkey's sign count to `sign_count` through `record_passkey_use`; the database refuses (raises
    `InsufficientPrivilege`) a count that does not rise, as a replayed assertion's. In a pipeline the statement
    travels with the next one awaited, and so does its refusal."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT record_passkey_use(%s, %s)", (credential_id, sign_count))


async def revoke_passkey(conn: AsyncConnection[Any], principal_id: str, credential_id: str) -> bool:
    """Revoke the principal's own passkey (`revoke_passkey` also ends the sessions it opened); False when it was not
    theirs or was already revoked."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT revoke_passkey(%s, %s)", (principal_id, credential_id))
        return bool(await cur.fetchone())


# --- challenges ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Challenge:
    """A challenge as it was used: what it was issued for and, for a decision, to whom, on which gate, over what."""

    challenge: bytes
    purpose: ChallengePurpose
    principal_id: str | None
    gate_id: str | None
    message: bytes | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "purpose", ChallengePurpose(self.purpose))


async def sweep_expired_challenges(conn: AsyncConnection[Any], rows: int) -> None:
    """Delete at most `rows` expired challenges (used or not)."""
    await conn.execute(
        "DELETE FROM webauthn_challenge WHERE ctid = ANY (ARRAY(SELECT ctid FROM webauthn_challenge"
        " WHERE expires_at < now() LIMIT %s))",
        (rows,),
    )


async def count_live_sign_ins(conn: AsyncConnection[Any], limit: int) -> int:
    """How many sign-in challenges are unused and unexpired, counted up to `limit` (a count past it reads `limit`)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT count(*) FROM (SELECT 1 FROM webauthn_challenge WHERE purpose = 'sign_in' AND used_at IS NULL"
            " AND expires_at > now() LIMIT %s) live",
            (limit,),
        )
        return int(await cur.fetchone() or 0)


async def insert_challenge(
    conn: AsyncConnection[Any],
    challenge: bytes,
    purpose: ChallengePurpose,
    *,
    principal_id: str | None,
    gate_id: str | None,
    message: bytes | None,
    seconds: int,
) -> None:
    """Store a challenge, usable once for `purpose` within `seconds` from now."""
    await conn.execute(
        "INSERT INTO webauthn_challenge (challenge, purpose, principal_id, gate_id, message, expires_at)"
        " VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s))",
        (challenge, ChallengePurpose(purpose).value, principal_id, gate_id, message, seconds),
    )


async def use_challenge(conn: AsyncConnection[Any], challenge: bytes, purpose: ChallengePurpose) -> Challenge | None:
    """Mark the challenge used and return it, once: None when it was already used, expired, issued for another
    purpose or never issued."""
    async with conn.cursor(row_factory=class_row(Challenge)) as cur:
        await cur.execute(
            "UPDATE webauthn_challenge SET used_at = now()"
            " WHERE challenge = %s AND purpose = %s AND used_at IS NULL AND expires_at > now()"
            " RETURNING challenge, purpose, principal_id, gate_id::text AS gate_id, message",
            (challenge, ChallengePurpose(purpose).value),
        )
        return await cur.fetchone()


# --- board sessions ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionViewer:
    """The person behind a live board session, and the session's CSRF token."""

    principal_id: str
    kind: PrincipalKind
    display_name: str
    roles: tuple[str, ...]
    active: bool
    csrf_token: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", PrincipalKind(self.kind))
        object.__setattr__(self, "roles", tuple(self.roles))

    @property
    def caller(self) -> Caller:
        return Caller(self.principal_id, self.kind, self.display_name, self.roles, self.active)


async def insert_session(
    conn: AsyncConnection[Any],
    session_sha256: bytes,
    *,
    principal_id: str,
    credential_id: str,
    csrf_token: str,
    hours: int,
) -> None:
    """Store a board session opened with the credential, valid `hours` from now, as its token's SHA-256."""
    await conn.execute(
        "INSERT INTO board_session (session_sha256, principal_id, credential_id, csrf_token, expires_at)"
        " VALUES (%s, %s, %s, %s, now() + make_interval(hours => %s))",
        (session_sha256, principal_id, credential_id, csrf_token, hours),
    )


async def read_session(conn: AsyncConnection[Any], session_sha256: bytes) -> SessionViewer | None:
    """The live session's person and CSRF token: not ended, not expired, its passkey not revoked, its person an
    active human. None otherwise."""
    async with conn.cursor(row_factory=class_row(SessionViewer)) as cur:
        await cur.execute(
            "SELECT p.principal_id, p.kind, p.display_name, p.roles, p.active, s.csrf_token"
            " FROM board_session s JOIN principal p USING (principal_id)"
            " JOIN principal_passkey k ON k.credential_id = s.credential_id"
            " WHERE s.session_sha256 = %s AND s.ended_at IS NULL AND s.expires_at > now()"
            " AND k.revoked_at IS NULL AND p.kind = 'human' AND p.active",
            (session_sha256,),
        )
        return await cur.fetchone()


async def end_session(conn: AsyncConnection[Any], session_sha256: bytes) -> None:
    """End the session (a session already ended keeps its first end)."""
    await conn.execute(
        "UPDATE board_session SET ended_at = now() WHERE session_sha256 = %s AND ended_at IS NULL",
        (session_sha256,),
    )
