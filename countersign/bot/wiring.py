"""What the composition root hands each chat door: connections, the policy, delivery, the allow-lists, the Close
Board's public address (every gate card links to its page), and the door's own reads (a gate's card, a person's view
of it, a Slack event seen before).

The adapters parse and render; every read of a close or a payment run goes through `countersign.services.reading`, every
decision through `countersign.services.decide.decide_gate`, every export through
`countersign.services.exports.export_trace`, every start
through `start_close` (the composition root's `start_close_with_books`). No adapter runs a query.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from countersign.bot.gate_cards import GateView
from countersign.bot.queries import UnknownGate, first_slack_event, load_gate_card, load_gate_view
from countersign.cards.model import GateCard
from countersign.cards.targets import ChannelTarget
from countersign.policy.model import Policy
from countersign.services.decide import Connect, OnRecorded, Seal
from countersign.services.errors import NoBooksLoaded
from countersign.services.starting import StartedPaymentRuns

# The errors the adapters map to answers, re-exported so they import nothing that runs SQL.
__all__ = ["ChatWiring", "NoBooksLoaded", "UnknownGate"]

StartClose = Callable[[str, str, str, bool], Awaitable[str]]  # (entity, period, started_by, synthetic) -> close
# (period, started_by) -> the runs started on the latest construction set with that month
StartPaymentRuns = Callable[[str, str], Awaitable[StartedPaymentRuns]]
Deliver = Callable[[list[int]], Awaitable[None]]  # deliver these outbox messages now


@dataclass(frozen=True)
class ChatWiring:
    connect_callbacks: Connect  # the decision writer's role: record decisions, exports, refusals
    connect_engine: Connect  # read status and gate cards
    start_close: StartClose  # raises NoBooksLoaded when there are no books and synthetic ones were not asked for
    start_payment_runs: (
        StartPaymentRuns  # countersign.services.starting.start_payment_runs_for_month under the server's rules
    )
    deliver: Deliver
    policy: Policy  # risk.yaml: its approver roles may run `status` (countersign/policy/command_roles.py)
    on_recorded: OnRecorded  # enqueue a decided gate's card updates, in the decision's transaction
    board_url: str  # COUNTERSIGN_BOARD_URL: the Close Board's public base URL, where each gate has its page
    locale: str | None  # COUNTERSIGN_LOCALE: how the doors' cards write amounts (CLDR; None: en_GB)
    channels: tuple[ChannelTarget, ...] = ()
    seal: Seal | None = None  # the server's group sealer; None seals on the request's own connection
    slack_team_ids: frozenset[str] = frozenset()  # the only Slack workspaces answered; empty answers none
    teams_tenant_ids: frozenset[str] = frozenset()  # the only Teams tenants answered; empty answers none

    async def gate_card(self, gate_id: str) -> GateCard:
        """What the gate's card shows now; UnknownGate when there is no such gate."""
        async with self.connect_engine() as conn:
            return await load_gate_card(conn, gate_id, self.board_url)

    async def teams_gate_view(self, gate_id: str, *, tenant: str, user: str, prompt: str = "") -> GateView:
        """The gate's Teams card as one person (`user`, an AAD object id) sees it; UnknownGate when there is none."""
        async with self.connect_engine() as conn:
            return await load_gate_view(conn, gate_id, self.board_url, teams_viewer=(tenant, user), prompt=prompt)

    async def first_slack_event(self, event_id: str) -> bool:
        """False when this Slack event id was handled before (Slack retries events it thinks were lost)."""
        async with self.connect_engine() as conn:
            return await first_slack_event(conn, event_id)
