"""Choosing which card to render for a gate, and for whom (no I/O: countersign/bot/queries.py reads what the card
shows).

A `GateView` is what one rendering needs: the card, the Teams user ids whose cards refresh by themselves, and the
one person it is rendered for when a Teams refresh asks (`Viewer`). `viewer_state` says what that person may still do,
in the words of the decision rules (countersign.callbacks.decision_writer.check_may_decide holds the rules themselves).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from countersign.callbacks.principals import Principal
from countersign.cards import slack as slack_cards
from countersign.cards import teams as teams_cards
from countersign.cards.model import (
    APPROVED_BY_VIEWER,
    MAY_DECIDE,
    NOT_ENTITLED,
    PREPARED_BY_VIEWER,
    REJECTED_BY_VIEWER,
    GateCard,
    StatusCard,
    Viewer,
)
from countersign.policy import ESCALATION
from countersign.states import Decision, GateStatus
from countersign.store.gates import GateRecord

PERIOD = re.compile(r"\d{4}-(0[1-9]|1[0-2])")  # a month as `close payments` takes it


@dataclass(frozen=True)
class GateView:
    card: GateCard
    teams_user_ids: tuple[str, ...] = ()  # who gets an automatic refresh (the gate's possible deciders)
    viewer: Viewer | None = None  # None: the card the whole channel sees


def viewer_state(gate: GateRecord, principal: Principal | None) -> str:
    """What `principal` may still do on `gate`, for their own view of its card."""
    if principal is None or not principal.is_human:
        return NOT_ENTITLED
    own = next((d for d in gate.decisions if d.principal_id == principal.principal_id), None)
    if own is not None:
        return APPROVED_BY_VIEWER if own.decision is Decision.APPROVE else REJECTED_BY_VIEWER
    if principal.principal_id in {gate.prepared_by, *gate.requested_by}:
        return PREPARED_BY_VIEWER
    if gate.approver_role not in principal.roles:
        return NOT_ENTITLED
    return MAY_DECIDE


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
