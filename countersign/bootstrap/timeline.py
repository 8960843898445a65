"""The close as a timeline printed at the command line: who handed what to whom (the words are
countersign/audit/timeline.py's)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from countersign.audit.timeline import describe, target_of
from countersign.audit.trace import TraceEvent

__all__ = ["describe", "print_timeline"]


def print_timeline(events: list[TraceEvent], console: Console) -> None:
    console.rule("[bold]Timeline: who handed what to whom[/]")
    for e in events:
        target = target_of(e)
        arrow = f"{e.actor} → {target}" if target else e.actor
        console.print(
            f"{e.seq:>5}  {e.ts[11:23]}  {escape(arrow):<44} {e.kind:<20} {escape(describe(e))}",
            highlight=False,
            soft_wrap=True,
        )
