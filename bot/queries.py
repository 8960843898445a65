"""The bot's reads and its one table: a gate card built from the gate's one typed read (`records.gates`), and the
Slack event ids already handled. The adapters never run these themselves: they reach them through `bot/wiring.py`,
the delivery through its own short connections."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from cards.model import DecisionLine, GateCard
from records.gates import GateRecord, read_gate


class UnknownGate(LookupError):
    pass


async def load_gate(conn: AsyncConnection[Any], gate_id: str) -> GateRecord:
    gate = await read_gate(conn, gate_id)
    if gate is None:
        raise UnknownGate(gate_id)
    return gate


async def load_gate_card(conn: AsyncConnection[Any], gate_id: str) -> GateCard:
    return gate_card(await load_gate(conn, gate_id))


def gate_card(gate: GateRecord) -> GateCard:
    """What a gate card shows, from the gate's one typed read."""
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
    )


async def first_slack_event(conn: AsyncConnection[Any], event_id: str) -> bool:
    """Record a Slack event id; False when it was recorded before (Slack retries an event it thinks was lost)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO slack_event_seen (event_id) VALUES (%s) ON CONFLICT DO NOTHING RETURNING event_id",
            (event_id,),
        )
        return await cur.fetchone() is not None
