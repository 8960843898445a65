"""Where a close's cards are posted: a Slack channel or a Teams conversation, as the settings name them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChannelTarget:
    platform: str  # "slack" | "teams"
    channel: str  # Slack channel id, or Teams conversation id
