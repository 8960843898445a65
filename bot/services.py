"""What the chat adapters need from the rest of Countersign, injected by the composition root.

The adapters parse and render; every read they need goes through a method here, every decision through
`services.decide.decide_gate`, every export through `services.exports.export_trace`, every start through
`start_close` (the composition root's `start_close_with_books`). No adapter runs a query.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.queries import UnknownGate, first_slack_event, load_gate_card
from cards.model import GateCard
from engine.outbox import ChannelTarget
from engine.runs import CloseNotFound, close_status, latest_close_id
from engine.starting import NoBooksLoaded
from engine.workflows.certificates.runs import payment_run_status
from policy.model import Policy
from services.decide import Connect, OnRecorded, Seal

# The errors the adapters map to answers, re-exported so they import nothing that runs SQL.
__all__ = ["ChatServices", "CloseNotFound", "NoBooksLoaded", "UnknownGate"]

StartClose = Callable[[str, str, str, bool], Awaitable[str]]  # (entity, period, started_by, synthetic) -> close
Deliver = Callable[[list[int]], Awaitable[None]]  # deliver these outbox messages now


@dataclass(frozen=True)
class ChatServices:
    connect_callbacks: Connect  # the decision writer's role: record decisions, exports, refusals
    connect_engine: Connect  # read status and gate cards
    start_close: StartClose  # raises NoBooksLoaded when there are no books and synthetic ones were not asked for
    deliver: Deliver
    policy: Policy  # risk.yaml: its approver roles may run `status` (policy/command_roles.py)
    on_recorded: OnRecorded  # enqueue a decided gate's card updates, in the decision's transaction
    channels: tuple[ChannelTarget, ...] = ()
    seal: Seal | None = None  # the server's group sealer; None seals on the request's own connection
    slack_team_ids: frozenset[str] = frozenset()  # the only Slack workspaces answered; empty answers none
    teams_tenant_ids: frozenset[str] = frozenset()  # the only Teams tenants answered; empty answers none

    async def find_close(self, entity_or_close: str | None) -> str | None:
        """A close id as given (a UUID), or the latest close of an entity, or (None) the latest of all."""
        async with self.connect_engine() as conn:
            if entity_or_close is None:
                return await latest_close_id(conn)
            if _is_uuid(entity_or_close):
                return entity_or_close
            return await latest_close_id(conn, entity_or_close)

    async def close_status(self, close_id: str) -> dict[str, Any]:
        """The documented `close status --json` shape; CloseNotFound for an unknown id."""
        async with self.connect_engine() as conn:
            return await close_status(conn, close_id)

    async def payment_runs(self, period: str | None) -> list[dict[str, Any]]:
        """The `payments status --json` rows: every payment run, or those of one month (YYYY-MM)."""
        async with self.connect_engine() as conn:
            return await payment_run_status(conn, period=period)

    async def gate_card(self, gate_id: str) -> GateCard:
        """What the gate's card shows now; UnknownGate when there is no such gate."""
        async with self.connect_engine() as conn:
            return await load_gate_card(conn, gate_id)

    async def first_slack_event(self, event_id: str) -> bool:
        """False when this Slack event id was handled before (Slack retries events it thinks were lost)."""
        async with self.connect_engine() as conn:
            return await first_slack_event(conn, event_id)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
