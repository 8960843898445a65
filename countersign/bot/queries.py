"""The bot's reads: a gate card built from the gate's one typed read (`countersign.store.gates`), and, from
countersign/services/chat_reads.py, the Teams ids of the people who may decide a gate, an enrolled passkey as its
person's direct message names it, and the Slack event ids already handled. The adapters never run these themselves:
they reach them through `countersign/bot/wiring.py`, the delivery through its own short connections."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.bot.gate_cards import GateView, viewer_state
from countersign.callbacks.principals import resolve_identity
from countersign.cards.links import gate_page_url
from countersign.cards.model import DecisionLine, GateCard, Viewer
from countersign.cards.voids import void_sentence
from countersign.services.chat_reads import EnrolledPasskey as EnrolledPasskey
from countersign.services.chat_reads import enrolled_passkey_for_slack_user as enrolled_passkey_for_slack_user
from countersign.services.chat_reads import first_slack_event as first_slack_event
from countersign.services.chat_reads import teams_decider_ids
from countersign.states import GateStatus
from countersign.store.gates import GateRecord, read_gate


class UnknownGate(LookupError):
    pass


async def load_gate(conn: AsyncConnection[Any], gate_id: str) -> GateRecord:
    gate = await read_gate(conn, gate_id)
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
        principal = await resolve_identity(conn, "teams", external_id, tenant)
        viewer = Viewer(viewer_state(gate, principal), prompt)
    deciders = await teams_decider_ids(conn, gate) if gate.status is GateStatus.OPEN else ()
    return GateView(gate_card(gate, board_url), deciders, viewer)


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
        status=gate.status.value,
        due_at=gate.due_at.isoformat(),
        overdue=gate.overdue,
        summary=gate.summary or {},
        decisions=tuple(
            DecisionLine(
                d.principal_id, d.display_name, d.decision.value, d.reason, d.decided_at.isoformat(), d.channel
            )
            for d in gate.decisions
        ),
        page_url=gate_page_url(board_url, gate.gate_id),
        needs_person_key=gate.needs_person_key,
        voided=tuple(void_sentence(void) for void in gate.voids),
    )
