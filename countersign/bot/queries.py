"""The bot's reads and its one table: a gate card built from the gate's one typed read (`countersign.store.gates`), the
Teams
ids of the people who may decide a gate, an enrolled passkey as its person's direct message names it, and the Slack
event ids already handled. The adapters never run these
themselves: they reach them through `countersign/bot/wiring.py`, the delivery through its own short connections."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row

from countersign.bot.gate_cards import GateView, viewer_state
from countersign.callbacks.principals import resolve_identity
from countersign.cards.links import gate_page_url
from countersign.cards.model import DecisionLine, GateCard, Viewer
from countersign.cards.platform_limits import TEAMS_USERS_PER_REFRESH
from countersign.store.gates import GateRecord, read_gate
from countersign.store.states import GateStatus


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


async def teams_decider_ids(conn: AsyncConnection[Any], gate: GateRecord) -> tuple[str, ...]:
    """The Teams ids (as `principal_identity` holds them) of the active humans who hold the gate's role and did not
    prepare its work: whose cards Teams refreshes by themselves. At most TEAMS_USERS_PER_REFRESH, in principal order."""
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT i.external_id FROM principal_identity i JOIN principal p USING (principal_id)"
            " WHERE i.channel = 'teams' AND p.kind = 'human' AND p.active AND %(role)s = ANY(p.roles)"
            " AND p.principal_id <> ALL(%(preparers)s)"
            " ORDER BY p.principal_id, i.tenant, i.external_id LIMIT %(limit)s",
            {
                "role": gate.approver_role,
                "preparers": [gate.prepared_by, *gate.requested_by],
                "limit": TEAMS_USERS_PER_REFRESH,
            },
        )
        return tuple(str(row[0]) for row in await cur.fetchall())


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
    )


async def first_slack_event(conn: AsyncConnection[Any], event_id: str) -> bool:
    """Record a Slack event id; False when it was recorded before (Slack retries an event it thinks was lost)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO slack_event_seen (event_id) VALUES (%s) ON CONFLICT DO NOTHING RETURNING event_id",
            (event_id,),
        )
        return await cur.fetchone() is not None


@dataclass(frozen=True)
class EnrolledPasskey:
    label: str
    created_at: datetime


async def enrolled_passkey_for_slack_user(
    conn: AsyncConnection[Any], credential_id: str, slack_user: str
) -> EnrolledPasskey | None:
    """The passkey's label and enrolment time, when `slack_user` is a Slack identity of the passkey's own person
    (identities are stored case-folded, Slack user ids are upper case); None otherwise."""
    async with conn.cursor(row_factory=class_row(EnrolledPasskey)) as cur:
        await cur.execute(
            "SELECT k.label, k.created_at FROM principal_passkey k"
            " JOIN principal_identity i ON i.principal_id = k.principal_id AND i.channel = 'slack'"
            " WHERE k.credential_id = %s AND upper(i.external_id) = %s LIMIT 1",
            (credential_id, slack_user),
        )
        return await cur.fetchone()
