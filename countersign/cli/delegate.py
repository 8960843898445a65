"""`countersign delegate`: who is away, until when, and who stands in (set, list, revoke).

A delegation changes whom an overdue gate is routed to (a direct message on Slack and Teams); it grants nobody a role.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from countersign.cli.common import console, fail, run, runtime, write_json

if TYPE_CHECKING:
    from countersign.services.delegating import DelegationRow

delegate_app = typer.Typer(help="Approvers who are away: delegations by date range.", no_args_is_help=True)


def _day(value: str, option: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        fail(f"{option} {value!r} is not a date; write it YYYY-MM-DD, e.g. 2026-12-14")
        raise AssertionError("unreachable") from None


def _last_day(row: DelegationRow) -> dt.date:
    return (row.ends_at.astimezone(dt.UTC) - dt.timedelta(microseconds=1)).date()


def _words(day: dt.date) -> str:
    return f"{day.day} {day.strftime('%b %Y')}"


def _as_json(row: DelegationRow) -> dict[str, Any]:
    return {
        "delegation_id": row.delegation_id,
        "principal": row.principal_id,
        "delegate": row.delegate_id,
        "first_day": row.starts_at.astimezone(dt.UTC).date().isoformat(),
        "last_day": _last_day(row).isoformat(),
        "starts_at": row.starts_at.isoformat(),
        "ends_at": row.ends_at.isoformat(),
        "set_by": row.set_by,
        "reason": row.reason,
        "created_at": row.created_at.isoformat(),
        "revoked": row.revoked_at is not None,
        "revoked_by": row.revoked_by,
        "revoked_at": row.revoked_at.isoformat() if row.revoked_at else None,
    }


@delegate_app.command("set")
def delegate_set(
    from_: Annotated[str, typer.Option("--from", help="The person who is away (principal id).")],
    to: Annotated[str, typer.Option("--to", help="Who stands in (principal id); they must be eligible themselves.")],
    from_date: Annotated[str, typer.Option("--from-date", help="First day away, YYYY-MM-DD (UTC); not before today.")],
    until: Annotated[str, typer.Option("--until", help="Last day away, YYYY-MM-DD (UTC), inclusive.")],
    reason: Annotated[str, typer.Option("--reason", help="Why: shown to the people gates are routed to.")],
    by: Annotated[
        str | None, typer.Option("--by", help="Who sets it: the person (default) or an owner who is not the delegate.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Record that a person is away over a range of days and who stands in. It grants nobody a role."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.delegating import set_delegation

    first, last = _day(from_date, "--from-date"), _day(until, "--until")
    rt = runtime()

    async def go() -> DelegationRow:
        async with connection(rt) as conn:
            return await set_delegation(
                conn, principal=from_, delegate=to, first_day=first, last_day=last, reason=reason, set_by=by
            )

    row = run(go)
    if as_json:
        write_json(_as_json(row))
        return
    console.print(
        f"delegation {row.delegation_id}: {escape(row.principal_name)} is away from"
        f" {_words(row.starts_at.astimezone(dt.UTC).date())} until {_words(_last_day(row))};"
        f" overdue approvals go to {escape(row.delegate_name)} when they may decide them (set by {escape(row.set_by)})",
        highlight=False,
    )


@delegate_app.command("list")
def delegate_list(
    person: Annotated[str | None, typer.Option("--person", help="Only this person's delegations.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Every delegation, newest first, with who set it and whether it was revoked."""
    from rich.table import Table

    from countersign.bootstrap.runtime import connection
    from countersign.services.delegating import list_delegations

    rt = runtime()

    async def go() -> list[DelegationRow]:
        async with connection(rt) as conn:
            return await list_delegations(conn, principal=person)

    rows = run(go)
    if as_json:
        write_json([_as_json(r) for r in rows])
        return
    if not rows:
        console.print("no delegations; set one with `countersign delegate set`")
        return
    table = Table("id", "away", "stands in", "from", "until", "set by", "reason", "state")
    for r in rows:
        state = f"revoked by {r.revoked_by}" if r.revoked_at else "in force"
        table.add_row(
            str(r.delegation_id),
            escape(r.principal_name),
            escape(r.delegate_name),
            _words(r.starts_at.astimezone(dt.UTC).date()),
            _words(_last_day(r)),
            escape(r.set_by),
            escape(r.reason),
            escape(state),
        )
    console.print(table)


@delegate_app.command("revoke")
def delegate_revoke(
    delegation_id: Annotated[int, typer.Argument(help="The delegation's id (`delegate list`).")],
    by: Annotated[str, typer.Option("--by", help="Who revokes it: the person or an owner who is not the delegate.")],
    reason: Annotated[str, typer.Option("--reason", help="Why it ends.")],
) -> None:
    """End a delegation with a revocation record (nothing is changed or deleted)."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.delegating import revoke_delegation

    rt = runtime()

    async def go() -> bool:
        async with connection(rt) as conn:
            return await revoke_delegation(conn, delegation_id, by=by, reason=reason)

    if run(go):
        console.print(f"delegation {delegation_id} revoked by {escape(by)}", highlight=False)
    else:
        console.print(f"delegation {delegation_id} was already revoked", highlight=False)
