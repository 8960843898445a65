"""What the chat adapters need from the rest of Countersign, injected by the composition root."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from engine.outbox import ChannelTarget
from policy.model import Policy

Connect = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]
StartClose = Callable[[str, str, str, bool], Awaitable[str]]  # (entity, period, started_by, synthetic) -> close
Deliver = Callable[[list[int]], Awaitable[None]]  # deliver these outbox messages now
Seal = Callable[[], Awaitable[object]]  # seal committed trace events before answering (audit.sealer.GroupSealer.seal)


class NoBooks(Exception):
    """`start_close` found no books for the entity and period and was not asked for synthetic ones."""

    def __init__(self, entity: str, period: str) -> None:
        super().__init__(f"{entity} {period} has no loaded books")
        self.entity = entity
        self.period = period


@dataclass(frozen=True)
class ChatServices:
    connect_callbacks: Connect  # the decision writer's role: record decisions
    connect_engine: Connect  # read status, enqueue outbox messages
    start_close: StartClose
    deliver: Deliver
    policy: Policy  # risk.yaml: its approver roles may run `status` (policy/access.py)
    channels: tuple[ChannelTarget, ...] = ()
    seal: Seal | None = None  # the server's group sealer; None seals on the request's own connection
    slack_team_ids: frozenset[str] = frozenset()  # the only Slack workspaces answered; empty answers none
    teams_tenant_ids: frozenset[str] = frozenset()  # the only Teams tenants answered; empty answers none
