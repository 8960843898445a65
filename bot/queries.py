"""The bot's reads and its one table: a gate card built from the engine's gate row, and the Slack event ids already
handled. The adapters never run these themselves: they reach them through `bot/services.py`, the delivery through its
own short connections."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from cards.model import DecisionLine, GateCard
from engine.gates import gate_for_card


class UnknownGate(LookupError):
    pass


async def load_gate_card(conn: AsyncConnection[Any], gate_id: str) -> GateCard:
    gate = await gate_for_card(conn, gate_id)
    if gate is None:
        raise UnknownGate(gate_id)
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
            DecisionLine(d.principal_id, d.display_name, d.decision, d.reason, d.decided_at.isoformat(), d.channel)
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
