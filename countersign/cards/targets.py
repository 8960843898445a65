"""Where a close's cards are posted: a Slack channel or a Teams conversation, as the settings name them."""

from __future__ import annotations

from dataclasses import dataclass

from countersign.states import ChatPlatform


@dataclass(frozen=True)
class ChannelTarget:
    platform: ChatPlatform
    channel: str  # Slack channel id, or Teams conversation id: an address, not a stored state

    def __post_init__(self) -> None:
        object.__setattr__(self, "platform", ChatPlatform(self.platform))
