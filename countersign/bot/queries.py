"""The bot's reads, all through countersign/services/chat_reads.py: a gate card built from the gate's one typed read,
the person a Teams card is rendered for, the Teams ids of the people who may decide a gate, an enrolled passkey as its
person's direct message names it, and the Slack event ids already handled. The adapters never run these themselves:
they reach them through `countersign/bot/wiring.py`, the delivery through its own short connections."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.bot.gate_cards import GateView, viewer_state
from countersign.cards.links import gate_page_url
from countersign.cards.model import DecisionLine, GateCard, Viewer
from countersign.cards.voids import void_sentence
from countersign.certificates.amendment import from_minor
from countersign.services.chat_reads import DecisionRecord as DecisionRecord
from countersign.services.chat_reads import EnrolledPasskey as EnrolledPasskey
from countersign.services.chat_reads import GateRecord as GateRecord
from countersign.services.chat_reads import enrolled_passkey_for_slack_user as enrolled_passkey_for_slack_user
from countersign.services.chat_reads import first_slack_event as first_slack_event
from countersign.services.chat_reads import gate_for_card, teams_decider_ids, teams_person
from countersign.states import GateStatus


class UnknownGate(LookupError):
    pass


async def load_gate(conn: AsyncConnection[Any], gate_id: str) -> GateRecord:
    gate = await gate_for_card(conn, gate_id)
    if gate is None:
        raise UnknownGate(gate_id)
    return gate


async def load_gate_card(conn: AsyncConnection[Any], gate_id: str, board_url: str) -> GateCard:
    return gate_card(await load_gate(conn, gate_id), board_url)


async def load_gate_view(
    conn: AsyncConnection[Any],
    gate_id: str,
    board_url: str,
    *,
    teams_viewer: tuple[str, str] | None = None,
    prompt: str = "",
) -> GateView:
    """The gate's card as Teams shows it: to the channel, or (`teams_viewer` = (tenant, AAD object id)) to one person,
    with `prompt` for them; with the Teams ids of the gate's deciders while it is open."""
    gate = await load_gate(conn, gate_id)
    return await gate_view(conn, gate, board_url, teams_viewer=teams_viewer, prompt=prompt)


async def gate_view(
    conn: AsyncConnection[Any],
    gate: GateRecord,
    board_url: str,
    *,
    teams_viewer: tuple[str, str] | None = None,
    prompt: str = "",
) -> GateView:
    viewer = None
    if teams_viewer is not None:
        tenant, external_id = teams_viewer
        viewer = Viewer(viewer_state(gate, await teams_person(conn, tenant, external_id)), prompt)
    deciders = await teams_decider_ids(conn, gate) if gate.status is GateStatus.OPEN else ()
    return GateView(gate_card(gate, board_url), deciders, viewer)


def _amended(d: DecisionRecord) -> tuple[str, str, str]:
    """An approval with edits as the card shows it: (certified, proposed, currency), or blanks."""
    if d.certified_minor is None or d.proposed_minor is None or d.amend_currency is None:
        return ("", "", "")
    currency = d.amend_currency.strip()
    return (str(from_minor(d.certified_minor, currency)), str(from_minor(d.proposed_minor, currency)), currency)


def gate_card(gate: GateRecord, board_url: str) -> GateCard:
    """What a gate card shows, from the gate's one typed read; `board_url` is the Close Board's public base URL."""
    return GateCard(
        gate_id=gate.gate_id,
        close_id=gate.close_id,
        entity=gate.entity,
        period=gate.period,
        task=gate.task,
        task_title=gate.title or gate.task,
        kind=gate.kind,
        tier=gate.tier,
        rule=gate.rule,
        quorum=gate.quorum,
        approvals=gate.approvals,
        approver_role=gate.approver_role,
        status=gate.status,
        due_at=gate.due_at.isoformat(),
        overdue=gate.overdue,
        summary=gate.summary or {},
        decisions=tuple(
            DecisionLine(
                d.principal_id,
                d.display_name,
                d.decision,
                d.reason,
                d.decided_at.isoformat(),
                d.channel,
                *_amended(d),
            )
            for d in gate.decisions
        ),
        page_url=gate_page_url(board_url, gate.gate_id),
        needs_person_key=gate.needs_person_key,
        voided=tuple(void_sentence(void) for void in gate.voids),
    )
