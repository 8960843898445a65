"""Internal codes as the words a controller reads: escalation reasons, statuses, kinds and decision channels. Pure.

Every door shows people `in_words(code)`, never the code itself (cards, the board, the CLI's human output, the
timeline; the JSON outputs keep the codes, which are their contract). One table for every code a person meets: the
escalation reasons (`countersign/policy/escalation.py`, every one with words, a test holds it), gate kinds and
statuses, task and
run statuses (`countersign/engine/lifecycle.py`), decisions, the channels a decision came through, gate tiers and
proofs.
"""

from __future__ import annotations

WORDS: dict[str, str] = {
    # escalation reasons (countersign/policy/escalation.py; risk.yaml escalation.owners)
    "anomaly_over_tolerance": "an anomaly beyond the policy's tolerance",
    "contradictory_evidence": "the evidence contradicts itself",
    "missing_parameter": "a figure the work needs is missing",
    "suspected_injection": "suspected manipulation of the books or the agents",
    "budget_exhausted": "the agent ran out of its step, time or token budget",
    "specialist_dead_lettered": "the specialist failed every attempt and was set aside",
    "ungrounded_narrative": "the narrative cites figures the books do not hold",
    "gate_expired": "the gate expired with nobody deciding",
    "no_recorded_response": "the model was asked something nobody recorded an answer for",
    "model_unavailable": "the model server did not answer through every retry its time allowed",
    # gate kinds (countersign/policy/gates.py)
    "approval": "approval",
    "escalation": "escalation",
    # gate statuses (countersign/states.py GateStatus) and what the engine did with a gate (GateLifecycle)
    "open": "awaiting a decision",
    "approved": "approved",
    "rejected": "rejected",
    "expired": "expired",
    "cancelled": "cancelled",
    "voided": "sign-off voided",  # approved, then a change to what it approved voided it (ADR 0046)
    "applied": "applied",
    # decisions (countersign/states.py Decision)
    "approve": "approve",
    "reject": "reject",
    # task statuses (countersign/engine/lifecycle.py TaskState)
    "pending": "waiting to start",
    "running": "running",
    "awaiting_gate": "waiting for a person's decision",
    "halted": "halted for a person to investigate",
    "done": "done",
    "failed": "failed",
    # close run statuses (countersign/engine/lifecycle.py RunState)
    "awaiting_approval": "waiting for approval",
    "blocked": "blocked",
    "closed": "closed",
    # decision channels (gate_decision.channel)
    "slack": "Slack",
    "teams": "Microsoft Teams",
    "login": "a signed-in session",
    "signed_callback": "a signed callback",
    "board": "the Close Board",
    # the proofs a tier accepts (countersign/states.py ProofKind)
    "platform_identity": "the chat platform's identity",
    "ed25519": "the person's own Ed25519 key",
    "passkey": "the person's passkey",
    # gate tiers (risk.yaml tiers)
    "low": "low",
    "medium": "medium",
    "high": "high",
    "critical": "critical",
}


def in_words(code: str) -> str:
    """The words for `code`; an unknown code is shown with its underscores as spaces."""
    return WORDS.get(code, code.replace("_", " "))
