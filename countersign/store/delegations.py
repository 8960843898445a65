"""Delegations (who is away, until when, and who stands in) and the routing of overdue gates: their statements.

Reads `delegation`, `delegation_revocation` and `gate_routing`; writes them only through the database's functions
(`set_delegation`, `revoke_delegation`, `route_gate_to`, the delegation migration), which decide who may set a
delegation, whether a person may be routed a gate, and enqueue the direct messages themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from countersign.policy.deciders import Person
from countersign.states import IdentityChannel, PrincipalKind


@dataclass(frozen=True)
class DelegationRow:
    delegation_id: int
    principal_id: str
    principal_name: str
    delegate_id: str
    delegate_name: str
    starts_at: datetime
    ends_at: datetime
    set_by: str
    reason: str
    created_at: datetime
    revoked_at: datetime | None
    revoked_by: str | None


@dataclass(frozen=True)
class RoutingRow:
    routing_id: int
    gate_id: str
    routed_to: str
    routed_to_name: str
    rank: int
    delegation_id: int | None
    away: str | None
    away_name: str | None
    away_until: datetime | None
    why: str
    routed_at: datetime


@dataclass(frozen=True)
class Candidate:
    """A human who might be routed a gate, as who-may-decide sees them."""

    principal_id: str
    kind: PrincipalKind
    roles: tuple[str, ...]
    active: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", PrincipalKind(self.kind))
        object.__setattr__(self, "roles", tuple(self.roles))

    @property
    def person(self) -> Person:
        return Person(self.principal_id, self.kind == PrincipalKind.HUMAN, frozenset(self.roles), self.active)


_DELEGATION_QUERY = (
    "SELECT d.delegation_id, d.principal_id, p.display_name AS principal_name, d.delegate_id,"
    " q.display_name AS delegate_name, d.starts_at, d.ends_at, d.set_by, d.reason, d.created_at,"
    " r.revoked_at, r.revoked_by"
    " FROM delegation d JOIN principal p ON p.principal_id = d.principal_id"
    " JOIN principal q ON q.principal_id = d.delegate_id"
    " LEFT JOIN delegation_revocation r ON r.delegation_id = d.delegation_id"
)


async def insert_delegation(
    conn: AsyncConnection[Any],
    *,
    principal_id: str,
    delegate_id: str,
    starts_at: datetime,
    ends_at: datetime,
    set_by: str,
    reason: str,
) -> int:
    """Through `set_delegation`; the database refuses (InsufficientPrivilege, CheckViolation) naming what was wrong."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT public.set_delegation(%s, %s, %s, %s, %s, %s)",
            (principal_id, delegate_id, starts_at, ends_at, set_by, reason),
        )
        found = await cur.fetchone()
        assert found is not None
        return int(found)


async def insert_revocation(conn: AsyncConnection[Any], delegation_id: int, *, revoked_by: str, reason: str) -> bool:
    """Through `revoke_delegation`; False when it was already revoked."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT public.revoke_delegation(%s, %s, %s)", (delegation_id, revoked_by, reason))
        return bool(await cur.fetchone())


async def read_delegations(conn: AsyncConnection[Any], *, principal_id: str | None = None) -> list[DelegationRow]:
    """Every delegation (or one person's), newest first, revoked ones with their revocation."""
    where = " WHERE d.principal_id = %s" if principal_id else ""
    async with conn.cursor(row_factory=class_row(DelegationRow)) as cur:
        await cur.execute(
            _DELEGATION_QUERY + where + " ORDER BY d.starts_at DESC, d.delegation_id DESC",
            (principal_id,) if principal_id else (),
        )
        return await cur.fetchall()


async def read_live_delegations(conn: AsyncConnection[Any]) -> list[DelegationRow]:
    """The delegations in force now (the database's clock): started, not ended, not revoked."""
    async with conn.cursor(row_factory=class_row(DelegationRow)) as cur:
        await cur.execute(
            _DELEGATION_QUERY + " WHERE d.starts_at <= now() AND d.ends_at > now() AND r.delegation_id IS NULL"
            " ORDER BY d.principal_id, d.delegation_id"
        )
        return await cur.fetchall()


async def read_candidates(conn: AsyncConnection[Any], role: str) -> list[Candidate]:
    """Every principal holding `role`, by id: who-may-decide judges them (`countersign.policy.deciders`)."""
    async with conn.cursor(row_factory=class_row(Candidate)) as cur:
        await cur.execute(
            "SELECT principal_id, kind, roles, active FROM principal WHERE %s = ANY(roles) ORDER BY principal_id",
            (role,),
        )
        return await cur.fetchall()


async def route_gate(
    conn: AsyncConnection[Any],
    gate_id: str,
    principal_id: str,
    *,
    delegation_id: int | None,
    rank: int,
    platforms: Sequence[str],
) -> int | None:
    """Through `route_gate_to`: the routing row, its trace event and its direct messages; None when it was routed
    before. The database refuses a person who may not decide the gate or is away."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT public.route_gate_to(%s::uuid, %s, %s, %s, %s::text[])",
            (gate_id, principal_id, delegation_id, rank, list(platforms)),
        )
        found = await cur.fetchone()
        return None if found is None else int(found)


_ROUTING_QUERY = (
    "SELECT r.routing_id, r.gate_id::text AS gate_id, r.routed_to, p.display_name AS routed_to_name, r.rank,"
    " r.delegation_id, r.away, a.display_name AS away_name, r.away_until, r.why, r.routed_at"
    " FROM gate_routing r JOIN principal p ON p.principal_id = r.routed_to"
    " LEFT JOIN principal a ON a.principal_id = r.away"
)


async def read_routing(conn: AsyncConnection[Any], routing_id: int) -> RoutingRow | None:
    async with conn.cursor(row_factory=class_row(RoutingRow)) as cur:
        await cur.execute(_ROUTING_QUERY + " WHERE r.routing_id = %s", (routing_id,))
        return await cur.fetchone()


async def read_routings_of_gate(conn: AsyncConnection[Any], gate_id: str) -> list[RoutingRow]:
    async with conn.cursor(row_factory=class_row(RoutingRow)) as cur:
        await cur.execute(_ROUTING_QUERY + " WHERE r.gate_id = %s::uuid ORDER BY r.rank, r.routing_id", (gate_id,))
        return await cur.fetchall()


async def identity_tenant(
    conn: AsyncConnection[Any], principal_id: str, channel: IdentityChannel, external_id: str
) -> str | None:
    """The tenant (Slack team, Teams tenant) of one of the person's identities, or None when it is not theirs."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT tenant FROM principal_identity WHERE principal_id = %s AND channel = %s"
            " AND lower(external_id) = lower(%s) ORDER BY tenant LIMIT 1",
            (principal_id, channel, external_id),
        )
        found = await cur.fetchone()
        return None if found is None else str(found)


async def database_now(conn: AsyncConnection[Any]) -> datetime:
    """The database's clock (the transaction's start): the moment the routing functions judge "away" at."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT now()")
        found = await cur.fetchone()
        assert isinstance(found, datetime)
        return found
