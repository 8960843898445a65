"""The one read of a gate: its row, its `gate_state`, its close and task, and every decision on it, in one query.

The status read, the cards, the engine's gate outcomes and the decision writer all read a gate as a `GateRecord`
(ADR 0025). Reads only; the decision writer is the one writer of `gate_decision`, the supervisor of `gate.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import RowMaker, class_row, dict_row

from countersign.policy.deciders import GateTerms
from countersign.states import Decision, GateLifecycle, GateStatus, ProofKind


@dataclass(frozen=True)
class DecisionRecord:
    """One decision on a gate, in the order decisions were made."""

    principal_id: str
    display_name: str
    decision: Decision
    reason: str
    decided_at: datetime
    channel: str


@dataclass(frozen=True)
class GateRecord:
    """A gate as every room reads it. `title` is the task's title as the close's workflow file gave it."""

    gate_id: str
    close_id: str
    entity: str
    period: str
    task: str
    title: str | None
    attempt: int
    kind: str
    tier: str
    rule: str
    approver_role: str
    quorum: int
    summary: dict[str, Any] | None
    prepared_by: str
    requested_by: tuple[str, ...]
    opened_at: datetime
    due_at: datetime
    expires_at: datetime | None
    escalated: bool
    lifecycle: str
    status: GateStatus
    approvals: int
    rejections: int
    overdue: bool
    decisions: tuple[DecisionRecord, ...]
    accepted_proofs: tuple[str, ...] = ()  # ProofKind values, frozen when the gate opened
    subject: str = ""
    amount: Decimal | None = None
    summary_json: str = "null"  # the summary as the database prints it (its digest is taken of this)

    @property
    def terms(self) -> GateTerms:
        """The gate as who-may-decide sees it (`countersign.policy.deciders`)."""
        return GateTerms(
            self.approver_role,
            frozenset({self.prepared_by, *self.requested_by}),
            self.status,
            {d.principal_id: d.decision for d in self.decisions},
            lifecycle_open=self.lifecycle == GateLifecycle.OPEN,
        )

    @property
    def facts(self) -> GateFacts:
        """The columns a person's signature covers."""
        return GateFacts(
            self.gate_id,
            self.close_id,
            self.task,
            self.attempt,
            self.kind,
            self.tier,
            self.quorum,
            self.approver_role,
            self.rule,
            self.subject,
            self.amount,
            self.summary_json,
        )

    @property
    def needs_person_key(self) -> bool:
        """True when a chat identity cannot decide this gate: only the person's own key (passkey, Ed25519) can."""
        return ProofKind.PLATFORM_IDENTITY not in self.accepted_proofs

    @property
    def missing(self) -> int:
        """How many approvals the gate still needs (negative never: `gate_state` stops counting at the quorum)."""
        return self.quorum - self.approvals

    @property
    def card_state(self) -> str:
        return card_state(self.status, self.approvals, self.rejections)


def card_state(status: str, approvals: int, rejections: int) -> str:
    """The key of what a gate card shows: a posted card is updated once per key (`countersign.engine.outbox`,
    `countersign.delivery.worker`)."""
    return f"{status}:{approvals}:{rejections}"


_DECISION_ARRAYS = ("principal_id", "display_name", "decision", "reason", "decided_at", "channel")

_GATE_QUERY = (
    "SELECT g.gate_id::text AS gate_id, g.close_id::text AS close_id, c.entity, c.period, g.task, t.title,"
    " g.attempt, g.kind, g.tier, g.rule, g.approver_role, g.quorum, g.summary, g.prepared_by, g.requested_by,"
    " g.opened_at, g.due_at, g.expires_at, g.escalated_at IS NOT NULL AS escalated, s.lifecycle, s.status,"
    " g.accepted_proofs, g.subject, g.amount, coalesce(g.summary, 'null'::jsonb)::text AS summary_json,"
    " s.approvals::int AS approvals, s.rejections::int AS rejections, s.overdue, "
    + ", ".join(f"d.{name}s" for name in _DECISION_ARRAYS)
    + " FROM gate g JOIN gate_state s USING (gate_id) JOIN close_run c ON c.close_id = g.close_id"
    " LEFT JOIN close_task t ON t.close_id = g.close_id AND t.task = g.task"
    " LEFT JOIN LATERAL (SELECT "
    + ", ".join(f"array_agg(x.{name} ORDER BY x.decided_at, x.decision_id) AS {name}s" for name in _DECISION_ARRAYS)
    + " FROM (SELECT d.*, p.display_name FROM gate_decision d JOIN principal p USING (principal_id)"
    "       WHERE d.gate_id = g.gate_id) x) d ON true"
)


def _gate_record(values: dict[str, Any]) -> GateRecord:
    columns = {name: values.pop(f"{name}s") or [] for name in _DECISION_ARRAYS}
    decisions = tuple(
        DecisionRecord(principal_id, display_name, Decision(decision), reason, decided_at, channel)
        for principal_id, display_name, decision, reason, decided_at, channel in zip(
            *(columns[name] for name in _DECISION_ARRAYS), strict=True
        )
    )
    return GateRecord(
        **{
            **values,
            "requested_by": tuple(values["requested_by"]),
            "accepted_proofs": tuple(values["accepted_proofs"]),
            "status": GateStatus(values["status"]),
            "decisions": decisions,
        }
    )


def _gate_rows(cursor: Any) -> RowMaker[GateRecord]:
    as_dict = dict_row(cursor)

    def make(values: Sequence[Any]) -> GateRecord:
        return _gate_record(as_dict(values))

    return make


async def read_gate(conn: AsyncConnection[Any], gate_id: str) -> GateRecord | None:
    """The gate, or None when there is no such gate."""
    async with conn.cursor(row_factory=_gate_rows) as cur:
        await cur.execute(_GATE_QUERY + " WHERE g.gate_id = %s", (gate_id,))
        return await cur.fetchone()


async def read_gates_of_close(conn: AsyncConnection[Any], close_id: str) -> list[GateRecord]:
    """Every gate of the close, in the order they were opened."""
    async with conn.cursor(row_factory=_gate_rows) as cur:
        await cur.execute(_GATE_QUERY + " WHERE s.close_id = %s ORDER BY g.opened_at, g.gate_id", (close_id,))
        return await cur.fetchall()


@dataclass(frozen=True)
class GateFacts:
    """The columns a person's signature covers (countersign.audit.person_proof.gate_summary_digest): all frozen at
    open."""

    gate_id: str
    close_id: str
    task: str
    attempt: int
    kind: str
    tier: str
    quorum: int
    approver_role: str
    rule: str
    subject: str
    amount: Decimal | None
    summary_json: str  # the summary as the database prints it, so fractions stay exact

    def digest_fields(self) -> dict[str, Any]:
        """Keyword arguments for gate_summary_digest, less the parsed summary (the caller parses summary_json)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "summary_json"}


async def read_gate_facts(conn: AsyncConnection[Any], gate_id: str) -> GateFacts | None:
    """The gate's signed facts, or None when there is no such gate."""
    async with conn.cursor(row_factory=class_row(GateFacts)) as cur:
        await cur.execute(
            "SELECT g.gate_id::text AS gate_id, g.close_id::text AS close_id, g.task, g.attempt, g.kind, g.tier,"
            " g.quorum, g.approver_role, g.rule, g.subject, g.amount, coalesce(g.summary, 'null'::jsonb)::text"
            " AS summary_json FROM public.gate g WHERE g.gate_id = %s",
            (gate_id,),
        )
        return await cur.fetchone()
