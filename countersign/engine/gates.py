"""Opening gates and reading their outcome. The engine opens gates; it never decides them.

A gate's outcome (approved, rejected) is computed by the `gate_state` view from the decisions the callbacks service
recorded. The engine reads gates through `countersign.store.gates` and marks a gate `applied` once it has acted on the
outcome. Before acting, it re-checks each decision's person-level proof (`unproven_decisions`): a decision counts only
when it carries the person's own key (an Ed25519 signature or a passkey assertion over the gate's summary digest) or a
chat identity that belongs to that person; which of these a gate accepts, the database decides (gate.accepted_proofs).
The statements (the gate's insert, its escalation mark, the decisions' read) live in `countersign.store.gates`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.person_proof import decision_message, digest_of_gate, passkey_proof_problem, verify_signature
from countersign.audit.trace import append_event
from countersign.engine.supervisor import move_gate
from countersign.policy import GateRequirement
from countersign.states import Channel, GateLifecycle, TraceKind
from countersign.store import gates as store_gates
from countersign.store.gates import NewGate, read_gate_facts
from countersign.store.gates import RecordedDecision as RecordedDecision
from countersign.store.gates import recorded_decisions as recorded_decisions


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
    amount: Decimal | None = None,
    due_by: datetime | None = None,
    accounts: tuple[str, ...] = (),
) -> str:
    """Open the gate for this task attempt once; a second call returns the gate already open.

    `amount` is the figure the gate's tier was judged on (the database holds it to the policy's amount thresholds and
    a certification to it); the database stamps the gate's subject and the policy digest it enforced. `due_by` brings
    the gate's due time forward when a deadline outside the policy is nearer (never later than the policy's).
    `accounts` are the accounts the gated work judged: a later change to one voids the approval (ADR 0046)."""
    gate_id = str(uuid.uuid4())
    opened_at = datetime.now(UTC)
    due_at = opened_at + timedelta(hours=requirement.due_hours)
    if due_by is not None and due_by < due_at:
        due_at = due_by
    expires_at = opened_at + timedelta(hours=requirement.expire_hours) if requirement.expire_hours else None
    created = await store_gates.insert_gate(
        conn,
        NewGate(
            gate_id=gate_id,
            close_id=close_id,
            task=task,
            attempt=attempt,
            kind=requirement.kind,
            tier=requirement.tier,
            quorum=requirement.quorum,
            approver_role=requirement.approver_role,
            rule=requirement.rule,
            summary=summary,
            prepared_by=prepared_by,
            requested_by=sorted(set(requested_by)),
            opened_at=opened_at,
            due_at=due_at,
            expires_at=expires_at,
            amount=amount,
            accounts=tuple(sorted(set(accounts))),
        ),
    )
    if not created:
        existing = await store_gates.gate_of_attempt(conn, close_id, task, attempt)
        assert existing is not None
        return existing
    facts = await read_gate_facts(conn, gate_id)
    assert facts is not None  # inserted above, in this transaction
    await append_event(
        conn,
        actor=actor,
        close_id=close_id,
        kind=TraceKind.GATE_OPENED,
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
            "summary_digest": digest_of_gate(facts.digest_fields(), facts.summary_json),
            "to": f"role:{requirement.approver_role}",
            # the rate its amount was compared with the thresholds at, when it was converted (ADR 0034)
            **({"fx_rate": summary["fx_rate"]} if "fx_rate" in summary else {}),
        },
    )
    return gate_id


async def mark_gate_applied(conn: AsyncConnection[Any], gate_id: str) -> bool:
    """Record that the engine acted on the gate's outcome; False when another process already did."""
    return await move_gate(conn, gate_id, GateLifecycle.APPLIED)


async def mark_gate_expired(conn: AsyncConnection[Any], gate_id: str) -> bool:
    """Record that the gate expired undecided; False when it was no longer open."""
    return await move_gate(conn, gate_id, GateLifecycle.EXPIRED)


async def mark_gate_escalated(conn: AsyncConnection[Any], gate_id: str) -> bool:
    """Record that an overdue gate was escalated; False when it already was. Never changes its outcome."""
    return await store_gates.mark_escalated(conn, gate_id)


@dataclass(frozen=True)
class UnprovenDecision:
    """A recorded decision whose proof does not show that its principal made it."""

    gate_id: str
    principal_id: str
    channel: Channel
    problem: str


def _signed_at(proof: dict[str, Any]) -> int | None:
    signed_at = proof.get("signed_at")
    return None if isinstance(signed_at, bool) or not isinstance(signed_at, int) else signed_at


def _amendment_digest(proof: dict[str, Any]) -> str | None:
    """The amendment digest the person signed (the database admits it only as the digest of the row's own sums and
    lines: migration approve_with_edits); None on a plain decision."""
    digest = proof.get("amendment_digest")
    return digest if isinstance(digest, str) else None


def decision_proof_problem(d: RecordedDecision, summary_digest: str) -> str | None:
    """Why this decision's proof does not hold, or None when it does. Pure.

    `summary_digest` is the gate's, computed from its frozen columns: a person's key must have signed that digest."""
    proof = d.proof if isinstance(d.proof, dict) else {}
    if d.channel in ("signed_callback", "board"):
        signed_at = _signed_at(proof)
        if signed_at is None:
            return "the proof's signed_at is not unix seconds"
        names = (d.principal_id, *d.logins)  # the person may have signed under a login alias
        messages = [
            decision_message(
                gate_id=d.gate_id,
                principal=name,
                decision=d.decision,
                reason=d.reason,
                nonce=d.nonce,
                signed_at=signed_at,
                summary_digest=summary_digest,
                amendment_digest=_amendment_digest(proof),
            )
            for name in names
        ]
        if d.channel == "board":
            return _passkey_problem(d, proof, messages[0])
        signature = proof.get("signature")
        if proof.get("kind") != "ed25519" or not isinstance(signature, str):
            return "no Ed25519 signature in the proof"
        if d.public_key is None:
            return "the principal has no registered public key"
        if any(verify_signature(bytes(d.public_key), message, signature) for message in messages):
            return None
        return "the Ed25519 signature does not verify against the principal's registered key over this gate's summary"
    if d.channel in ("slack", "teams"):
        if proof.get("kind") != d.channel or not d.identity_matches:
            return f"the {d.channel} identity in the proof does not belong to the principal"
        return None
    return f"unknown decision channel {d.channel!r}"


def _passkey_problem(d: RecordedDecision, proof: dict[str, Any], message: bytes) -> str | None:
    if d.passkey_public_key is None:
        return "the proof names no live passkey of the principal"
    rp_id, origin = proof.get("rp_id"), proof.get("origin")
    if not isinstance(rp_id, str) or not isinstance(origin, str):
        return "the passkey proof does not say which board it was made for"
    return passkey_proof_problem(
        proof=proof, credential_public_key=d.passkey_public_key, message=message, rp_id=rp_id, origin=origin
    )


async def unproven_decisions(conn: AsyncConnection[Any], gate_id: str) -> list[UnprovenDecision]:
    """The gate's decisions that carry no valid person-level proof; such a decision never counts."""
    out: list[UnprovenDecision] = []
    facts = await read_gate_facts(conn, gate_id)
    if facts is None:
        return out
    digest = digest_of_gate(facts.digest_fields(), facts.summary_json)
    for d in await recorded_decisions(conn, gate_id):
        problem = decision_proof_problem(d, digest)
        if problem is not None:
            out.append(UnprovenDecision(d.gate_id, d.principal_id, d.channel, problem))
    return out
