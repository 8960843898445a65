"""The only code that writes gate decisions.

A decision is recorded only for a known human principal holding the role the gate's tier requires, once per
(gate, principal), with a unique nonce. Every refusal is traced with its reason.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, errors

from audit.trace import append_event, seal_pending

from .principals import Principal, find_principal, normalise_identity

DECISIONS = ("approve", "reject")


class GateNotFound(LookupError):
    def __init__(self, gate_id: str) -> None:
        super().__init__(f"no gate with id {gate_id!r}")
        self.gate_id = gate_id


class DecisionRefused(Exception):
    """The responder may not decide this gate. `code` is stable; the message is for people."""

    def __init__(self, gate_id: str, principal: str, code: str, message: str) -> None:
        super().__init__(message)
        self.gate_id = gate_id
        self.principal = principal
        self.code = code


class DecisionConflict(Exception):
    def __init__(self, gate_id: str, principal: str, message: str) -> None:
        super().__init__(message)
        self.gate_id = gate_id
        self.principal = principal


@dataclass(frozen=True)
class DecisionRequest:
    gate_id: str
    principal: str
    decision: str
    reason: str
    nonce: str
    channel: str

    def digest(self) -> str:
        body = f"{self.gate_id}\n{normalise_identity(self.principal)}\n{self.decision}\n{self.reason}\n{self.nonce}"
        return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class GateOutcome:
    gate_id: str
    status: str
    quorum: int
    approvals: int
    rejections: int
    recorded: bool
    decisions: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "gate_id": self.gate_id,
            "status": self.status,
            "quorum": self.quorum,
            "approvals": self.approvals,
            "rejections": self.rejections,
            "recorded": self.recorded,
            "decisions": self.decisions,
        }


def check_may_decide(
    request: DecisionRequest,
    principal: Principal | None,
    *,
    status: str,
    role: str,
    tier: str,
    preparers: set[str],
) -> None:
    """The runtime layer of the decision boundary: raise DecisionRefused (or DecisionConflict) with the reason."""
    who = normalise_identity(request.principal)
    gate = request.gate_id
    if principal is None:
        raise DecisionRefused(gate, who, "unknown_principal", f"principal {who!r} is not known")
    if not principal.is_human:
        raise DecisionRefused(
            gate, who, "machine_principal", f"principal {who!r} is a machine; only humans decide gates"
        )
    if role not in principal.roles:
        raise DecisionRefused(
            gate, who, "missing_role", f"principal {who!r} lacks role {role!r} required by tier {tier}"
        )
    if principal.principal_id in preparers:
        raise DecisionRefused(
            gate,
            who,
            "preparer",
            f"principal {who!r} prepared or requested the work under this gate; someone else must decide it",
        )
    if status == "expired":
        raise DecisionRefused(gate, who, "gate_expired", "the gate expired undecided; the work will be redone")
    if status == "cancelled":
        raise DecisionRefused(gate, who, "gate_cancelled", "the gate was cancelled")
    if status in ("approved", "rejected"):
        wanted = "approved" if request.decision == "approve" else "rejected"
        if status != wanted:
            raise DecisionConflict(gate, who, f"gate already {status}")
        raise DecisionRefused(gate, who, "already_decided", f"gate already {status}; nothing to add")


async def _refuse_second_vote(conn: AsyncConnection[Any], request: DecisionRequest, principal_id: str) -> None:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT decision FROM gate_decision WHERE gate_id = %s AND principal_id = %s",
            (request.gate_id, principal_id),
        )
        previous = await cur.fetchone()
    if previous is not None:
        raise DecisionRefused(
            request.gate_id,
            principal_id,
            "already_voted",
            f"principal {principal_id!r} already decided this gate ({previous[0]})",
        )


def _lock_key(gate_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"gate:{gate_id}".encode()).digest()[:8], "big", signed=True)


async def gate_outcome(conn: AsyncConnection[Any], gate_id: str, *, recorded: bool = False) -> GateOutcome:
    async with conn.cursor() as cur:
        await cur.execute("SELECT status, quorum, approvals, rejections FROM gate_state WHERE gate_id = %s", (gate_id,))
        row = await cur.fetchone()
        if row is None:
            raise GateNotFound(gate_id)
        await cur.execute(
            "SELECT principal_id, decision, reason, decided_at, channel FROM gate_decision WHERE gate_id = %s"
            " ORDER BY decided_at, decision_id",
            (gate_id,),
        )
        decisions = [
            {
                "principal": d[0],
                "decision": d[1],
                "reason": d[2],
                "decided_at": d[3].isoformat(),
                "channel": d[4],
            }
            for d in await cur.fetchall()
        ]
    return GateOutcome(gate_id, row[0], int(row[1]), int(row[2]), int(row[3]), recorded, decisions)


async def record_decision(conn: AsyncConnection[Any], request: DecisionRequest) -> GateOutcome:
    """Record one decision, or raise. `conn` must be in autocommit mode; this opens its own transaction."""
    if request.decision not in DECISIONS:
        raise ValueError(f"decision must be one of {DECISIONS}, not {request.decision!r}")
    try:
        async with conn.transaction():
            outcome = await _record(conn, request)
    except DecisionRefused as refused:
        await _trace_refusal(conn, request, refused)
        raise
    finally:
        await seal_pending(conn)
    return outcome


async def refuse(conn: AsyncConnection[Any], request: DecisionRequest, code: str, message: str) -> DecisionRefused:
    """Trace a refusal decided before a principal could be resolved (e.g. a platform says the user is a bot)."""
    refused = DecisionRefused(request.gate_id, normalise_identity(request.principal), code, message)
    await _trace_refusal(conn, request, refused)
    await seal_pending(conn)
    return refused


async def _trace_refusal(conn: AsyncConnection[Any], request: DecisionRequest, refused: DecisionRefused) -> None:
    async with conn.transaction():
        await append_event(
            conn,
            actor="callbacks",
            close_id=await _close_of(conn, request.gate_id),
            kind="decision_refused",
            payload={
                "gate_id": request.gate_id,
                "principal": request.principal,
                "decision": request.decision,
                "code": refused.code,
                "reason": str(refused),
                "channel": request.channel,
            },
        )


async def _close_of(conn: AsyncConnection[Any], gate_id: str) -> str | None:
    async with conn.cursor() as cur:
        await cur.execute("SELECT close_id FROM gate WHERE gate_id = %s", (gate_id,))
        row = await cur.fetchone()
    return str(row[0]) if row else None


async def _record(conn: AsyncConnection[Any], request: DecisionRequest) -> GateOutcome:
    digest = request.digest()
    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(request.gate_id),))
        await cur.execute("SELECT gate_id, request_digest FROM gate_decision WHERE nonce = %s", (request.nonce,))
        replay = await cur.fetchone()
        if replay is not None:
            if replay[1] != digest or str(replay[0]) != request.gate_id:
                raise DecisionConflict(request.gate_id, request.principal, "nonce already used for a different request")
            return await gate_outcome(conn, request.gate_id)
        await cur.execute(
            "SELECT s.status, g.approver_role, g.close_id, g.task, g.tier, g.prepared_by, g.requested_by"
            " FROM gate_state s JOIN gate g USING (gate_id) WHERE s.gate_id = %s",
            (request.gate_id,),
        )
        gate = await cur.fetchone()
    if gate is None:
        raise GateNotFound(request.gate_id)
    status, role, close_id, task, tier, prepared_by, requested_by = gate
    principal = await find_principal(conn, request.principal)
    check_may_decide(request, principal, status=status, role=role, tier=tier, preparers={prepared_by, *requested_by})
    assert principal is not None
    await _refuse_second_vote(conn, request, principal.principal_id)
    try:
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(
                "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    request.gate_id,
                    principal.principal_id,
                    request.decision,
                    request.reason,
                    request.nonce,
                    digest,
                    request.channel,
                ),
            )
    except errors.UniqueViolation:  # a concurrent second vote by the same person lost the race
        raise DecisionRefused(
            request.gate_id,
            principal.principal_id,
            "already_voted",
            f"principal {principal.principal_id!r} has already decided this gate",
        ) from None
    outcome = await gate_outcome(conn, request.gate_id, recorded=True)
    await append_event(
        conn,
        actor=principal.principal_id,
        close_id=str(close_id),
        kind="gate_decided",
        payload={
            "gate_id": request.gate_id,
            "task": task,
            "decision": request.decision,
            "reason": request.reason,
            "channel": request.channel,
            "gate_status": outcome.status,
            "approvals": outcome.approvals,
            "quorum": outcome.quorum,
            "to": "orchestrator",
        },
    )
    return outcome
