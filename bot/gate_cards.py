"""Choosing which card to render for a gate (no I/O: bot/queries.py reads what the card shows)."""

from __future__ import annotations

import re
from typing import Any

from cards import slack as slack_cards
from cards import teams as teams_cards
from cards.model import GateCard, StatusCard
from policy import ESCALATION
from records.states import GateStatus

PERIOD = re.compile(r"\d{4}-(0[1-9]|1[0-2])")  # a month as `close payments` takes it


def slack_gate_message(card: GateCard) -> dict[str, Any]:
    if card.status != GateStatus.OPEN:
        return slack_cards.decided_message(card)
    if card.kind == ESCALATION:
        return slack_cards.halt_message(card)
    return slack_cards.gate_message(card)


def teams_gate_card(card: GateCard) -> dict[str, Any]:
    if card.status != GateStatus.OPEN:
        return teams_cards.decided_message(card)
    if card.kind == ESCALATION:
        return teams_cards.halt_message(card)
    return teams_cards.gate_message(card)


def status_card(status: dict[str, Any]) -> StatusCard:
    return StatusCard.from_status_json(status)
