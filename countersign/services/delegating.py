"""Delegations: a person away over a range of days names who stands in; they or an owner set it, and either revokes it.

The CLI calls these (`delegate set`, `delegate list`, `delegate revoke`) as the engine role. The database decides who
may set or revoke one and refuses a back-dated or overlapping range (`set_delegation`, the delegation migration);
what it refuses comes back as `DelegationRefused` with the database's words. A delegation grants nobody a role: it
changes whom an overdue gate is routed to (countersign/policy/routing.py), and each event is traced and sealed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from psycopg import AsyncConnection

from countersign.audit.trace import seal_pending
from countersign.callbacks.principals import normalise_identity
from countersign.services.errors import ServiceError
from countersign.store import delegations as store
from countersign.store.delegations import DelegationRow

__all__ = ["DelegationRefused", "DelegationRow", "list_delegations", "revoke_delegation", "set_delegation"]

MAX_DAYS = 366  # the database's bound on one range


class DelegationRefused(ServiceError):
    """A delegation or revocation that was not recorded; `reason` says why in words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def day_range(first_day: dt.date, last_day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """[first_day 00:00 UTC, the day after last_day 00:00 UTC): away on both days and every day between. Pure."""
    if last_day < first_day:
        raise DelegationRefused(f"--until {last_day.isoformat()} is before --from-date {first_day.isoformat()}")
    if (last_day - first_day).days + 1 > MAX_DAYS:
        raise DelegationRefused(f"a delegation covers at most {MAX_DAYS} days, not {(last_day - first_day).days + 1}")
    start = dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC)
    return start, dt.datetime.combine(last_day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)


def _refusal(exc: psycopg.Error) -> DelegationRefused:
    primary = exc.diag.message_primary if exc.diag is not None else None
    return DelegationRefused(primary or str(exc).splitlines()[0])


async def set_delegation(
    conn: AsyncConnection[Any],
    *,
    principal: str,
    delegate: str,
    first_day: dt.date,
    last_day: dt.date,
    reason: str,
    set_by: str | None = None,
) -> DelegationRow:
    """Record that `principal` is away from `first_day` to `last_day` (inclusive, UTC) and `delegate` stands in,
    set by `set_by` (default: the person themselves). `DelegationRefused` naming what was wrong."""
    who, stand_in = normalise_identity(principal), normalise_identity(delegate)
    by = normalise_identity(set_by) if set_by else who
    if not reason.strip():
        raise DelegationRefused("--reason is empty: say why (it is shown to the people the gates are routed to)")
    starts_at, ends_at = day_range(first_day, last_day)
    try:
        async with conn.transaction():
            delegation_id = await store.insert_delegation(
                conn,
                principal_id=who,
                delegate_id=stand_in,
                starts_at=starts_at,
                ends_at=ends_at,
                set_by=by,
                reason=reason.strip(),
            )
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.CheckViolation) as exc:
        raise _refusal(exc) from exc
    await seal_pending(conn)
    return next(d for d in await store.read_delegations(conn, principal_id=who) if d.delegation_id == delegation_id)


async def revoke_delegation(conn: AsyncConnection[Any], delegation_id: int, *, by: str, reason: str) -> bool:
    """End a delegation by a revocation record; False when it was revoked already. `DelegationRefused` otherwise."""
    if not reason.strip():
        raise DelegationRefused("--reason is empty: say why the delegation ends")
    try:
        async with conn.transaction():
            revoked = await store.insert_revocation(
                conn, delegation_id, revoked_by=normalise_identity(by), reason=reason.strip()
            )
    except (
        psycopg.errors.InsufficientPrivilege,
        psycopg.errors.CheckViolation,
        psycopg.errors.NoDataFound,
    ) as exc:
        raise _refusal(exc) from exc
    await seal_pending(conn)
    return revoked


async def list_delegations(conn: AsyncConnection[Any], *, principal: str | None = None) -> list[DelegationRow]:
    """Every delegation (or one person's), newest first; a revoked one carries who revoked it and when."""
    return await store.read_delegations(conn, principal_id=normalise_identity(principal) if principal else None)
