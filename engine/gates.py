"""Opening gates and reading their outcome. The engine opens gates; it never decides them.

A gate's outcome (approved, rejected) is computed by the `gate_state` view from the decisions the callbacks
service recorded. The engine only reads that view and marks a gate `applied` once it has acted on the outcome.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from audit.trace import append_event
from policy import GateRequirement


@dataclass(frozen=True)
class GateView:
    gate_id: str
    task: str
    attempt: int
    kind: str
    tier: str
    quorum: int
    status: str
    lifecycle: str
    approvals: int
    rejections: int
    overdue: bool
    escalated: bool


async def open_gate(
    conn: AsyncConnection[Any],
    *,
    close_id: str,
    task: str,
    attempt: int,
    requirement: GateRequirement,
    summary: dict[str, Any],
    prepared_by: str,
    requested_by: list[str],
    actor: str,
) -> str:
    """Open the gate for this task attempt once; a second call returns the gate already open."""
    gate_id = str(uuid.uuid4())
    opened_at = datetime.now(UTC)
    due_at = opened_at + timedelta(hours=requirement.due_hours)
    expires_at = opened_at + timedelta(hours=requirement.expire_hours) if requirement.expire_hours else None
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO gate (gate_id, close_id, task, attempt, kind, tier, quorum, approver_role, rule, summary,"
            " prepared_by, requested_by, opened_at, due_at, expires_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (close_id, task, attempt) DO NOTHING RETURNING gate_id",
            (
                gate_id,
                close_id,
                task,
                attempt,
                requirement.kind,
                requirement.tier,
                requirement.quorum,
                requirement.approver_role,
                requirement.rule,
                Jsonb(summary),
                prepared_by,
                sorted(set(requested_by)),
                opened_at,
                due_at,
                expires_at,
            ),
        )
        created = await cur.fetchone()
        if created is None:
            await cur.execute(
                "SELECT gate_id FROM gate WHERE close_id = %s AND task = %s AND attempt = %s",
                (close_id, task, attempt),
            )
            existing = await cur.fetchone()
            assert existing is not None
            return str(existing[0])
    await append_event(
        conn,
        actor=actor,
        close_id=close_id,
        kind="gate_opened",
        payload={
            "gate_id": gate_id,
            "task": task,
            "attempt": attempt,
            "gate_kind": requirement.kind,
            "tier": requirement.tier,
            "quorum": requirement.quorum,
            "approver_role": requirement.approver_role,
            "rule": requirement.rule,
            "prepared_by": prepared_by,
            "requested_by": sorted(set(requested_by)),
            "due_at": due_at.isoformat(),
            "to": f"role:{requirement.approver_role}",
        },
    )
    return gate_id


async def gates_for_close(conn: AsyncConnection[Any], close_id: str) -> list[GateView]:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT s.gate_id, s.task, s.attempt, s.kind, s.tier, s.quorum, s.status, s.lifecycle,"
            " s.approvals, s.rejections, s.overdue, g.escalated_at IS NOT NULL"
            " FROM gate_state s JOIN gate g USING (gate_id)"
            " WHERE s.close_id = %s ORDER BY g.opened_at, s.gate_id",
            (close_id,),
        )
        rows = await cur.fetchall()
    return [
        GateView(str(r[0]), r[1], int(r[2]), r[3], r[4], int(r[5]), r[6], r[7], int(r[8]), int(r[9]), r[10], r[11])
        for r in rows
    ]


async def mark_gate_applied(conn: AsyncConnection[Any], gate_id: str) -> bool:
    """Record that the engine acted on the gate's outcome; False when another process already did."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE gate SET lifecycle = 'applied', applied_at = now() WHERE gate_id = %s AND lifecycle = 'open'"
            " RETURNING gate_id",
            (gate_id,),
        )
        return await cur.fetchone() is not None


async def mark_gate_expired(conn: AsyncConnection[Any], gate_id: str) -> bool:
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE gate SET lifecycle = 'expired', applied_at = now() WHERE gate_id = %s AND lifecycle = 'open'"
            " RETURNING gate_id",
            (gate_id,),
        )
        return await cur.fetchone() is not None


async def mark_gate_escalated(conn: AsyncConnection[Any], gate_id: str) -> bool:
    """Record that an overdue gate was escalated; False when it already was. Never changes its outcome."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE gate SET escalated_at = now() WHERE gate_id = %s AND escalated_at IS NULL AND lifecycle = 'open'"
            " RETURNING gate_id",
            (gate_id,),
        )
        return await cur.fetchone() is not None
