"""Scripted people decide every open gate of a close, in process, each decision signed by that person's own key.

The drills and the million-line benchmark drive closes to `closed` this way: no HTTP, but the same decision writer,
on the callbacks role, with the same person proof a client sends. A bank reconciliation halted for unmatched lines is
investigated the way the demo does it: the corrected bank feed is loaded before its escalation is approved.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

from countersign.bootstrap.runtime import Runtime, connection
from countersign.callbacks.decision_writer import DecisionRequest, record_decision
from countersign.callbacks.principals import Principal
from countersign.engine.books import load_bank_feed
from countersign.engine.runs import close_status, load_close
from countersign.scenarios.scripted_people import ScriptedPeople
from countersign.states import Channel, GateStatus

CORRECTED_BANK_FEED = Path("corrected") / "bank_lines.csv"
"""Where the synthetic books keep the bank statement a person would fetch after a halt (under the books folder)."""


@dataclasses.dataclass(frozen=True)
class Decided:
    """What one call decided: signed decisions recorded, and corrected bank feeds loaded for a halt first."""

    decisions: int
    feeds_loaded: int


def eligible_voters(people: list[Principal], gate: dict[str, Any]) -> list[Principal]:
    """The humans holding the gate's role who neither prepared nor requested its work (separation of duties)."""
    excluded = {gate["prepared_by"], *gate["requested_by"]}
    return [p for p in people if p.is_human and gate["approver_role"] in p.roles and p.principal_id not in excluded]


async def decide_open_gates(
    rt: Runtime,
    close_id: str,
    books: Path,
    people: list[Principal],
    scripted: ScriptedPeople,
    *,
    reason: str,
    loaded_by: str,
) -> Decided:
    """Approve every open gate of `close_id` with as many eligible people as its quorum still needs. `people` must
    already be registered with `scripted`'s public keys."""
    feeds = 0
    async with connection(rt) as conn:
        status = await close_status(conn, close_id)
        open_gates = [g for g in status["gates"] if g["status"] == GateStatus.OPEN]
        for gate in open_gates:
            if gate["kind"] == "escalation" and gate["task"] == "bank_reconciliation":
                await load_bank_feed(
                    conn,
                    (await load_close(conn, close_id)).book_set_id,
                    books / CORRECTED_BANK_FEED,
                    loaded_by=loaded_by,
                    close_id=close_id,
                )
                feeds += 1
    decided = 0
    async with connection(rt, "callbacks") as conn:
        for gate in open_gates:
            for person in eligible_voters(people, gate)[: gate["quorum"] - gate["approvals"]]:
                nonce = uuid.uuid4().hex
                proof = scripted.proof(
                    gate["gate_id"],
                    person.principal_id,
                    "approve",
                    reason,
                    nonce,
                    summary_digest=gate["summary_digest"],
                )
                await record_decision(
                    conn,
                    DecisionRequest(
                        gate["gate_id"], person.principal_id, "approve", reason, nonce, Channel.SIGNED_CALLBACK, proof
                    ),
                )
                decided += 1
    return Decided(decided, feeds)
