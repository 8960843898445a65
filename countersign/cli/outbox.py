"""`countersign outbox`: what waits to reach Slack and Teams, and putting dead letters back.

Only typer and rich at import: `countersign --help` must not pay for the database driver (the rest is imported inside
each command).
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer

from countersign.states import ChatPlatform

outbox_app = typer.Typer(help="The chat outbox: its state, and dead letters put back.", no_args_is_help=True)

PLATFORMS = tuple(platform.value for platform in ChatPlatform)
AGO = re.compile(r"^(\d{1,6})([smhd])$")
AGO_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class BadOption(ValueError):
    """An option a person wrote wrongly; its message names the option."""


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """`--since`: an ISO 8601 date or time (UTC when it names no offset), or a span ago: 90m, 6h, 2d."""
    ago = AGO.match(text.strip())
    if ago:
        return (now or datetime.now(UTC)) - timedelta(**{AGO_UNITS[ago[2]]: int(ago[1])})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadOption(
            f"--since: not a time: {text!r} (an ISO 8601 date or time such as 2025-01-31T09:00Z, or 90m, 6h, 2d ago)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def parse_gate(text: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise BadOption(f"--gate: not a gate id (a UUID, as `close status` shows): {text!r}") from None


def parse_platform(text: str) -> ChatPlatform:
    if text not in PLATFORMS:
        raise BadOption(f"--platform: must be one of {', '.join(PLATFORMS)}, not {text!r}")
    return ChatPlatform(text)


@outbox_app.command("redrive")
def outbox_redrive(
    gate: Annotated[str | None, typer.Option("--gate", help="Only this gate's messages (its id).")] = None,
    platform: Annotated[str | None, typer.Option("--platform", help="Only slack or only teams.")] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only those dead-lettered since: an ISO date or time, or 90m, 6h, 2d ago."),
    ] = None,
) -> None:
    """Put dead-lettered messages back to pending with a fresh retry budget; the worker delivers them once.

    Cards are rendered from the tables when they are posted, so a card for a gate decided meanwhile shows its decision.
    Running it again redrives nothing more.
    """
    from countersign.bootstrap.runtime import connection
    from countersign.cli.common import console, fail, run, runtime
    from countersign.services.operating import redrive_outbox

    try:
        gate_id = parse_gate(gate) if gate is not None else None
        only = parse_platform(platform) if platform is not None else None
        after = parse_since(since) if since is not None else None
    except BadOption as exc:
        fail(str(exc))
        return
    rt = runtime(roles=("engine",))

    async def go() -> list[int]:
        async with connection(rt) as conn:
            return await redrive_outbox(conn, gate_id=gate_id, platform=only, since=after)

    redriven = run(go)
    if not redriven:
        console.print("nothing to redrive: no dead-lettered message matches")
        return
    console.print(
        f"redrove {len(redriven)} dead-lettered message{'s' if len(redriven) != 1 else ''}"
        f" with a fresh budget of {rt.settings.outbox_budget_hours:g} h; the worker delivers them on its next pass"
    )


@outbox_app.command("status")
def outbox_status(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object instead of a table.")] = False,
) -> None:
    """Messages by status and platform, the oldest pending one's age, and how many are past their budget."""
    from rich.table import Table

    from countersign.bootstrap.runtime import connection
    from countersign.cli.common import console, run, runtime
    from countersign.services.operating import OutboxSummary, outbox_counts

    rt = runtime(roles=("engine",))

    async def go() -> OutboxSummary:
        async with connection(rt) as conn:
            return await outbox_counts(conn, budget_hours=rt.settings.outbox_budget_hours)

    summary = run(go)
    if as_json:
        payload: dict[str, Any] = {
            "counts": summary.counts,
            "oldest_pending_age_s": summary.oldest_pending_age_s,
            "past_budget": summary.past_budget,
            "budget_hours": summary.budget_hours,
        }
        typer.echo(json.dumps(payload, sort_keys=True))
        return
    table = Table("status", *PLATFORMS, title="outbox")
    for status, by_platform in summary.counts.items():
        table.add_row(status, *(str(by_platform.get(p, 0)) for p in PLATFORMS))
    console.print(table)
    age = summary.oldest_pending_age_s
    console.print(
        "oldest pending: " + ("none" if age is None else f"{timedelta(seconds=round(age))} since its budget started")
    )
    console.print(f"past the {summary.budget_hours:g} h budget and still pending: {summary.past_budget}")


if __name__ == "__main__":
    outbox_app()
