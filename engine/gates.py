"""Opening gates and reading their outcome. The engine opens gates; it never decides them.

A gate's outcome (approved, rejected) is computed by the `gate_state` view from the decisions the callbacks
service recorded. The engine only reads that view and marks a gate `applied` once it has acted on the outcome.
Before acting, it re-checks each decision's person-level proof (`unproven_decisions`): a decision counts only when
it carries the person's own Ed25519 signature or a chat identity that belongs to that person.
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
from policy.person_proof import decision_message, verify_signature


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


@dataclass(frozen=True)
class UnprovenDecision:
    """A recorded decision whose proof does not show that its principal made it."""

    gate_id: str
    principal_id: str
    channel: str
    problem: str


@dataclass(frozen=True)
class RecordedDecision:
    gate_id: str
    principal_id: str
    decision: str
    reason: str
    nonce: str
    channel: str
    proof: Any
    public_key: bytes | None
    logins: tuple[str, ...]
    identity_matches: bool


def decision_proof_problem(d: RecordedDecision) -> str | None:
    """Why this decision's proof does not hold, or None when it does. Pure."""
    proof = d.proof if isinstance(d.proof, dict) else {}
    if d.channel == "signed_callback":
        signature, signed_at = proof.get("signature"), proof.get("signed_at")
        if proof.get("kind") != "ed25519" or not isinstance(signature, str):
            return "no Ed25519 signature in the proof"
        if isinstance(signed_at, bool) or not isinstance(signed_at, int):
            return "the proof's signed_at is not unix seconds"
        if d.public_key is None:
            return "the principal has no registered public key"
        for name in (d.principal_id, *d.logins):  # the person may have signed under a login alias
            message = decision_message(
                gate_id=d.gate_id,
                principal=name,
                decision=d.decision,
                reason=d.reason,
                nonce=d.nonce,
                signed_at=signed_at,
            )
            if verify_signature(bytes(d.public_key), message, signature):
                return None
        return "the Ed25519 signature does not verify against the principal's registered key"
    if d.channel in ("slack", "teams"):
        if proof.get("kind") != d.channel or not d.identity_matches:
            return f"the {d.channel} identity in the proof does not belong to the principal"
        return None
    return f"unknown decision channel {d.channel!r}"


async def recorded_decisions(conn: AsyncConnection[Any], gate_id: str) -> list[RecordedDecision]:
    """Every decision on the gate with what is needed to re-check its proof (one query)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT d.gate_id, d.principal_id, d.decision, d.reason, d.nonce, d.channel, d.proof, p.public_key,"
            " ARRAY(SELECT l.external_id FROM principal_identity l"
            "       WHERE l.principal_id = d.principal_id AND l.channel = 'login' ORDER BY l.external_id),"
            " EXISTS (SELECT 1 FROM principal_identity i"
            "         WHERE i.principal_id = d.principal_id AND i.channel = d.channel"
            "           AND i.channel = d.proof->>'kind'"
            "           AND i.tenant = d.proof->>'tenant' AND i.external_id = d.proof->>'external_id')"
            " FROM gate_decision d LEFT JOIN principal p USING (principal_id)"
            " WHERE d.gate_id = %s ORDER BY d.decision_id",
            (gate_id,),
        )
        rows = await cur.fetchall()
    return [
        RecordedDecision(
            str(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], bytes(r[7]) if r[7] is not None else None, tuple(r[8]), r[9]
        )
        for r in rows
    ]


async def unproven_decisions(conn: AsyncConnection[Any], gate_id: str) -> list[UnprovenDecision]:
    """The gate's decisions that carry no valid person-level proof; such a decision never counts."""
    out = []
    for d in await recorded_decisions(conn, gate_id):
        problem = decision_proof_problem(d)
        if problem is not None:
            out.append(UnprovenDecision(d.gate_id, d.principal_id, d.channel, problem))
    return out
