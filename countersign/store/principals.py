"""Principals (humans and machines), their identities per channel and their API tokens: the principal family.

Reads and writes `principal`, `principal_identity` and `api_token`. A principal is read two ways: as a `Principal`
(the directory's view: countersign.callbacks.principals imports, finds and resolves them) and as a `Caller` (the access
rules' view, with `active`: countersign.callbacks.callers resolves chat callers, login lookups and API tokens, and
countersign.store.passkeys returns the person behind a board session); countersign.callbacks.passkeys asks whether a
principal is an active human before it issues an enrolment. The callers' reads are this family's reads (the
same tables, the same lookup), so they live here and there is no store module of their own. `PRINCIPAL_LOOKUP` is
the one lookup of a principal by id or login; the decision writer's context query (countersign.store.decisions) joins
it too.

Every key passed in is already normalised (countersign.callbacks.principals.normalise_identity): the store compares
stored words, it does not normalise them. `kind` is a `PrincipalKind` on every row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import class_row, scalar_row

from countersign.policy.deciders import Person
from countersign.states import IdentityChannel, PrincipalKind


@dataclass(frozen=True)
class Identity:
    channel: IdentityChannel
    tenant: str
    external_id: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "channel", IdentityChannel(self.channel))  # the column's word, as its Enum


@dataclass(frozen=True)
class Principal:
    principal_id: str
    kind: PrincipalKind
    display_name: str
    roles: tuple[str, ...]
    identities: tuple[Identity, ...] = field(default=())
    public_key: bytes | None = None
    """The person's raw 32-byte Ed25519 public key; signed-callback decisions must carry its signature."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", PrincipalKind(self.kind))
        object.__setattr__(self, "roles", tuple(self.roles))

    @property
    def is_human(self) -> bool:
        return self.kind == PrincipalKind.HUMAN

    @property
    def person(self) -> Person:
        """The principal as who-may-decide sees it (`countersign.policy.deciders`); this read carries no `active`."""
        return Person(self.principal_id, self.is_human, frozenset(self.roles))


@dataclass(frozen=True)
class Caller:
    """A known principal as the access rules see it."""

    principal_id: str
    kind: PrincipalKind
    display_name: str
    roles: tuple[str, ...]
    active: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", PrincipalKind(self.kind))
        object.__setattr__(self, "roles", tuple(self.roles))
        object.__setattr__(self, "active", bool(self.active))

    @property
    def is_human(self) -> bool:
        return self.kind == PrincipalKind.HUMAN

    @property
    def person(self) -> Person:
        """The caller as who-may-decide sees it (`countersign.policy.deciders`)."""
        return Person(self.principal_id, self.is_human, frozenset(self.roles), self.active)


# A principal by id (a login name) first, then by a `login` identity; the key is already normalised. Columns:
# principal_id, kind, display_name, roles, active, public_key.
PRINCIPAL_LOOKUP = (
    "SELECT principal_id, kind, display_name, roles, active, public_key FROM principal WHERE principal_id = %(key)s"
    " UNION ALL"
    " SELECT p.principal_id, p.kind, p.display_name, p.roles, p.active, p.public_key FROM principal_identity i"
    " JOIN principal p USING (principal_id) WHERE i.channel = 'login' AND i.tenant = '' AND i.external_id = %(key)s"
    " LIMIT 1"
)

_CALLER_COLUMNS = "p.principal_id, p.kind, p.display_name, p.roles, p.active"


async def read_principal(conn: AsyncConnection[Any], key: str) -> Principal | None:
    """The principal whose id (a login name) is `key`, else the one with `key` as its `login` identity; else None."""
    async with conn.cursor(row_factory=class_row(Principal)) as cur:
        await cur.execute(
            f"SELECT principal_id, kind, display_name, roles FROM ({PRINCIPAL_LOOKUP}) AS found",
            {"key": key},
        )
        return await cur.fetchone()


async def read_principal_by_identity(
    conn: AsyncConnection[Any], channel: IdentityChannel, tenant: str, external_id: str
) -> Principal | None:
    """The principal behind an identity on a channel (a Slack user in a team, a Teams AAD object in a tenant), or
    None when it is unmapped."""
    async with conn.cursor(row_factory=class_row(Principal)) as cur:
        await cur.execute(
            "SELECT p.principal_id, p.kind, p.display_name, p.roles FROM principal_identity i"
            " JOIN principal p USING (principal_id) WHERE i.channel = %s AND i.tenant = %s AND i.external_id = %s",
            (channel, tenant, external_id),
        )
        return await cur.fetchone()


async def upsert_principal(cur: AsyncCursor[Any], principal: Principal) -> bool:
    """Insert the principal or refresh its name, roles and (when given) public key, on the caller's cursor and in the
    caller's transaction. False, writing nothing, when it exists with another kind: a machine never becomes a human."""
    await cur.execute(
        "INSERT INTO principal (principal_id, kind, display_name, roles, public_key)"
        " VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (principal_id) DO UPDATE SET display_name = EXCLUDED.display_name,"
        " roles = EXCLUDED.roles, public_key = COALESCE(EXCLUDED.public_key, principal.public_key)"
        " WHERE principal.kind = EXCLUDED.kind RETURNING principal_id",
        (principal.principal_id, principal.kind, principal.display_name, list(principal.roles), principal.public_key),
    )
    return await cur.fetchone() is not None


async def replace_identities(cur: AsyncCursor[Any], principal_id: str, identities: Sequence[Identity]) -> None:
    """Delete the principal's identities and insert `identities`, on the caller's cursor and in its transaction."""
    await cur.execute("DELETE FROM principal_identity WHERE principal_id = %s", (principal_id,))
    for ident in identities:
        await cur.execute(
            "INSERT INTO principal_identity (principal_id, channel, tenant, external_id) VALUES (%s, %s, %s, %s)",
            (principal_id, ident.channel, ident.tenant, ident.external_id),
        )


# --- callers: the access rules' view of a principal --------------------------------------------------------------


@dataclass(frozen=True)
class CallerWithKey:
    """A caller with its registered Ed25519 public key (None when it has none)."""

    principal_id: str
    kind: PrincipalKind
    display_name: str
    roles: tuple[str, ...]
    active: bool
    public_key: bytes | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", PrincipalKind(self.kind))

    @property
    def caller(self) -> Caller:
        return Caller(self.principal_id, self.kind, self.display_name, self.roles, self.active)


async def read_caller_by_identity(
    conn: AsyncConnection[Any], channel: IdentityChannel, tenant: str, external_id: str
) -> Caller | None:
    """The caller behind an identity on a channel, or None when it is unmapped."""
    async with conn.cursor(row_factory=class_row(Caller)) as cur:
        await cur.execute(
            f"SELECT {_CALLER_COLUMNS} FROM principal_identity i JOIN principal p USING (principal_id)"
            " WHERE i.channel = %s AND i.tenant = %s AND i.external_id = %s",
            (channel, tenant, external_id),
        )
        return await cur.fetchone()


async def read_caller_with_key(conn: AsyncConnection[Any], key: str) -> CallerWithKey | None:
    """The caller found by `PRINCIPAL_LOOKUP` (id first, then login identity) with its public key, or None."""
    async with conn.cursor(row_factory=class_row(CallerWithKey)) as cur:
        await cur.execute(
            f"SELECT principal_id, kind, display_name, roles, active, public_key FROM ({PRINCIPAL_LOOKUP}) AS found",
            {"key": key},
        )
        return await cur.fetchone()


async def read_principal_id(conn: AsyncConnection[Any], principal_id: str) -> str | None:
    """`principal_id` when there is such a principal, else None."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT principal_id FROM principal WHERE principal_id = %s", (principal_id,))
        found: str | None = await cur.fetchone()
    return found


async def read_active_human_id(conn: AsyncConnection[Any], principal_id: str) -> str | None:
    """`principal_id` when it is an active human (who may be given a passkey enrolment), else None."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT principal_id FROM principal WHERE principal_id = %s AND kind = 'human' AND active", (principal_id,)
        )
        found: str | None = await cur.fetchone()
    return found


async def insert_api_token(conn: AsyncConnection[Any], token_sha256: bytes, principal_id: str) -> None:
    """Store a new API token of the principal as its SHA-256."""
    await conn.execute(
        "INSERT INTO api_token (token_sha256, principal_id) VALUES (%s, %s)", (token_sha256, principal_id)
    )


async def revoke_api_tokens(conn: AsyncConnection[Any], principal_id: str) -> int:
    """Revoke every live API token of the principal; returns how many."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE api_token SET revoked_at = now() WHERE principal_id = %s AND revoked_at IS NULL",
            (principal_id,),
        )
        return cur.rowcount


async def read_caller_by_token(conn: AsyncConnection[Any], token_sha256: bytes) -> Caller | None:
    """The caller holding the live (unrevoked) API token whose SHA-256 this is, or None."""
    async with conn.cursor(row_factory=class_row(Caller)) as cur:
        await cur.execute(
            f"SELECT {_CALLER_COLUMNS} FROM api_token t JOIN principal p USING (principal_id)"
            " WHERE t.token_sha256 = %s AND t.revoked_at IS NULL",
            (token_sha256,),
        )
        return await cur.fetchone()


async def teams_ids_of_deciders(
    conn: AsyncConnection[Any], *, role: str, excluded: Sequence[str], limit: int
) -> tuple[str, ...]:
    """Returns the Teams ids (as `principal_identity` holds them) of the active humans holding `role`, none of
    `excluded`: at most `limit`, in principal order. countersign.bot.queries reads the deciders of a gate this way.

    This is who-may-decide's `entitled` (`countersign.policy.deciders`) in SQL, whether or not they decided yet (their
    card refreshes to show their vote): tests/store/test_teams_deciders_query.py compares the two."""
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT i.external_id FROM principal_identity i JOIN principal p USING (principal_id)"
            " WHERE i.channel = 'teams' AND p.kind = 'human' AND p.active AND %(role)s = ANY(p.roles)"
            " AND p.principal_id <> ALL(%(preparers)s)"
            " ORDER BY p.principal_id, i.tenant, i.external_id LIMIT %(limit)s",
            {"role": role, "preparers": list(excluded), "limit": limit},
        )
        return tuple(str(row[0]) for row in await cur.fetchall())


@dataclass(frozen=True)
class PrincipalListing:
    """A principal as `principals list` shows it: who, what they may do, how they are reached and how they prove it."""

    principal_id: str
    kind: PrincipalKind
    display_name: str
    roles: tuple[str, ...]
    active: bool
    channels: tuple[str, ...]
    """The channels with an identity mapped to the principal (login, slack, teams), sorted."""
    has_signing_key: bool
    live_passkeys: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", PrincipalKind(self.kind))
        object.__setattr__(self, "roles", tuple(self.roles))
        object.__setattr__(self, "channels", tuple(self.channels))


async def list_principals(conn: AsyncConnection[Any]) -> list[PrincipalListing]:
    """Every principal, by id, with its mapped channels, whether it has an Ed25519 key and how many live passkeys."""
    async with conn.cursor(row_factory=class_row(PrincipalListing)) as cur:
        await cur.execute(
            "SELECT p.principal_id, p.kind, p.display_name, p.roles, p.active,"
            " ARRAY(SELECT DISTINCT i.channel FROM principal_identity i WHERE i.principal_id = p.principal_id"
            " ORDER BY i.channel) AS channels,"
            " p.public_key IS NOT NULL AS has_signing_key,"
            " (SELECT count(*) FROM principal_passkey k WHERE k.principal_id = p.principal_id"
            " AND k.revoked_at IS NULL)::int AS live_passkeys"
            " FROM principal p ORDER BY p.principal_id"
        )
        return await cur.fetchall()
