"""What the board needs from the composition root, and where it is mounted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from countersign.policy.model import Policy
from countersign.services.decide import Connect
from countersign.services.passkeys import OnRecorded, Seal

Deliver = Callable[[list[int]], Awaitable[None]]

PREFIX = "/board"


@dataclass(frozen=True)
class BoardDeps:
    """What the board needs from the composition root: the two pools' connectors, the policy and its settings."""

    connect_callbacks: Connect  # sessions, enrolment, decisions (the callbacks role)
    connect_engine: Connect  # reads (the engine role, as every door reads)
    policy: Policy
    board_url: str  # public base URL, e.g. https://close.example.com: the passkeys' origin and rp id
    locale: str  # CLDR locale for amounts and dates
    seal: Seal | None = None  # the group sealer's seal, as the other doors pass it
    on_recorded: OnRecorded | None = None  # enqueue card updates after a decision, in its transaction
    deliver: Deliver | None = None  # send those card updates now (the chat doors' inline delivery), when chat is on
