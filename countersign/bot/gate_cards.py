"""Choosing which card to render for a gate, and for whom (no I/O: countersign/bot/queries.py reads what the card
shows).

A `GateView` is what one rendering needs: the card, the Teams user ids whose cards refresh by themselves, and the
one person it is rendered for when a Teams refresh asks (`Viewer`). `viewer_state` says what that person may still do,
in the words of the one rule of who may decide (`countersign.policy.deciders`, which the decision writer refuses by).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from countersign.cards import slack as slack_cards
from countersign.cards import teams as teams_cards
from countersign.cards.model import GateCard, StatusCard, Viewer
from countersign.policy import ESCALATION
from countersign.policy.deciders import Bar, Person, bars
from countersign.services.chat_reads import GateRecord
from countersign.states import Decision, GateStatus, ViewerState

PERIOD = re.compile(r"\d{4}-(0[1-9]|1[0-2])")  # a month as `close payments` takes it


@dataclass(frozen=True)
class GateView:
    card: GateCard
    teams_user_ids: tuple[str, ...] = ()  # who gets an automatic refresh (the gate's possible deciders)
    viewer: Viewer | None = None  # None: the card the whole channel sees


def viewer_state(gate: GateRecord, person: Person | None) -> ViewerState:
    """What `person` may still do on `gate`, for their own view of its card: the one rule's bars
    (`countersign.policy.deciders`) in this card's words. Their own decision shows first, then whether they prepared
    the work; the gate's state is the card's own (a decided gate shows everyone the same card)."""
    terms = gate.terms
    found = bars(terms, person)
    if Bar.UNKNOWN_PRINCIPAL in found or Bar.MACHINE_PRINCIPAL in found:
        return ViewerState.NOT_ENTITLED
    if Bar.ALREADY_VOTED in found:
        assert person is not None
        own = terms.votes[person.principal_id]
        return ViewerState.APPROVED if own is Decision.APPROVE else ViewerState.REJECTED
    if Bar.PREPARER in found:
        return ViewerState.PREPARED
    if Bar.MISSING_ROLE in found:
        return ViewerState.NOT_ENTITLED
    return ViewerState.MAY_DECIDE


def slack_gate_message(card: GateCard, *, locale: str | None) -> dict[str, Any]:
    """The gate's Slack message, amounts written in the CLDR `locale` (COUNTERSIGN_LOCALE; None: en_GB)."""
    if card.status != GateStatus.OPEN:
        return slack_cards.decided_message(card, locale=locale)
    if card.kind == ESCALATION:
        return slack_cards.halt_message(card, locale=locale)
    return slack_cards.gate_message(card, locale=locale)


def teams_gate_card(view: GateView, *, locale: str | None) -> dict[str, Any]:
    """The gate's Adaptive Card as `view` asks, amounts in the CLDR `locale` (COUNTERSIGN_LOCALE; None: en_GB)."""
    card = view.card
    if card.status != GateStatus.OPEN:
        return teams_cards.decided_message(card, locale=locale)
    render = teams_cards.halt_message if card.kind == ESCALATION else teams_cards.gate_message
    return render(card, viewer=view.viewer, refresh_user_ids=view.teams_user_ids, locale=locale)


def status_card(status: dict[str, Any]) -> StatusCard:
    return StatusCard.from_status_json(status)
