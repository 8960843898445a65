"""Reading what a card shows from the database and choosing which card to render."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from cards import slack as slack_cards
from cards import teams as teams_cards
from cards.model import DecisionLine, GateCard, StatusCard

TASK_TITLES = {
    "bank_reconciliation": "Bank reconciliation",
    "ap_reconciliation": "Accounts payable reconciliation",
    "ar_reconciliation": "Accounts receivable reconciliation",
    "accruals": "Period-end accruals",
    "intercompany": "Intercompany reconciliation",
    "variance_analysis": "Variance analysis",
    "close_signoff": "Close sign-off",
}


class UnknownGate(LookupError):
    pass


async def load_gate_card(conn: AsyncConnection[Any], gate_id: str) -> GateCard:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT g.gate_id, g.close_id, c.entity, c.period, g.task, g.kind, g.tier, g.rule, g.quorum, s.approvals,"
            " g.approver_role, s.status, g.due_at, s.overdue, g.summary"
            " FROM gate g JOIN gate_state s USING (gate_id) JOIN close_run c ON c.close_id = g.close_id"
            " WHERE g.gate_id = %s",
            (gate_id,),
        )
        row = await cur.fetchone()
        if row is None:
            raise UnknownGate(gate_id)
        await cur.execute(
            "SELECT d.principal_id, p.display_name, d.decision, d.reason, d.decided_at, d.channel"
            " FROM gate_decision d JOIN principal p USING (principal_id) WHERE d.gate_id = %s"
            " ORDER BY d.decided_at, d.decision_id",
            (gate_id,),
        )
        decisions = tuple(DecisionLine(r[0], r[1], r[2], r[3], r[4].isoformat(), r[5]) for r in await cur.fetchall())
    return GateCard(
        gate_id=str(row[0]),
        close_id=str(row[1]),
        entity=row[2],
        period=row[3],
        task=row[4],
        task_title=TASK_TITLES.get(row[4], row[4]),
        kind=row[5],
        tier=row[6],
        rule=row[7],
        quorum=int(row[8]),
        approvals=int(row[9]),
        approver_role=row[10],
        status=row[11],
        due_at=row[12].isoformat(),
        overdue=bool(row[13]),
        summary=row[14] or {},
        decisions=decisions,
    )


def card_state(card: GateCard) -> str:
    rejections = sum(1 for d in card.decisions if d.decision == "reject")
    return f"{card.status}:{card.approvals}:{rejections}"


def slack_gate_message(card: GateCard) -> dict[str, Any]:
    if card.status != "open":
        return slack_cards.decided_message(card)
    if card.kind == "escalation":
        return slack_cards.halt_message(card)
    return slack_cards.gate_message(card)


def teams_gate_card(card: GateCard) -> dict[str, Any]:
    if card.status != "open":
        return teams_cards.decided_message(card)
    if card.kind == "escalation":
        return teams_cards.halt_message(card)
    return teams_cards.gate_message(card)


def status_card(status: dict[str, Any]) -> StatusCard:
    return StatusCard.from_status_json(status)
