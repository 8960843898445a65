"""The one read of a gate: its row, its `gate_state`, its close and task, and every decision on it, in one query.

The status read, the cards, the engine's gate outcomes and the decision writer all read a gate as a `GateRecord`
(ADR 0025). Besides, the engine's gate statements (called by countersign/engine/gates.py, which owns the rules: a
gate's due and expiry times, its trace event, the proofs' checks): a gate's insert, once per task attempt, its
escalation mark, and its decisions with what re-checking their proofs needs (`principal`, `principal_identity`,
`principal_passkey`). The decision writer is the one writer of `gate_decision`, the supervisor of `gate.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import RowMaker, class_row, dict_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.policy.deciders import GateTerms
from countersign.states import Channel, Decision, GateKind, GateLifecycle, GateStatus, ProofKind
from countersign.store.sign_off_voids import VOIDS_OF_GATE_JSON, SignOffVoid, voids_from_json


@dataclass(frozen=True)
class DecisionRecord:
    """One decision on a gate, in the order decisions were made."""

    principal_id: str
    display_name: str
    decision: Decision
    reason: str
    decided_at: datetime
    channel: Channel
    certified_minor: int | None = None  # an approval with edits: the sum certified (migration approve_with_edits)
    proposed_minor: int | None = None
    amend_currency: str | None = None


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
    kind: GateKind
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
    lifecycle: GateLifecycle
    status: GateStatus
    approvals: int
    rejections: int
    overdue: bool
    decisions: tuple[DecisionRecord, ...]
    accepted_proofs: tuple[str, ...] = ()  # ProofKind values, frozen when the gate opened
    subject: str = ""
    amount: Decimal | None = None
    summary_json: str = "null"  # the summary as the database prints it (its digest is taken of this)
    voids: tuple[SignOffVoid, ...] = ()  # the changes that voided its approval (migration sign_off_voided)

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


def card_state(status: GateStatus, approvals: int, rejections: int) -> str:
    """The key of what a gate card shows: a posted card is updated once per key (`countersign.engine.outbox`,
    `countersign.delivery.worker`)."""
    return f"{status}:{approvals}:{rejections}"


_DECISION_ARRAYS = (
    "principal_id",
    "display_name",
    "decision",
    "reason",
    "decided_at",
    "channel",
    "certified_minor",
    "proposed_minor",
    "amend_currency",
)

_GATE_QUERY = (
    "SELECT g.gate_id::text AS gate_id, g.close_id::text AS close_id, c.entity, c.period, g.task, t.title,"
    " g.attempt, g.kind, g.tier, g.rule, g.approver_role, g.quorum, g.summary, g.prepared_by, g.requested_by,"
    " g.opened_at, g.due_at, g.expires_at, g.escalated_at IS NOT NULL AS escalated, s.lifecycle, s.status,"
    " g.accepted_proofs, g.subject, g.amount, coalesce(g.summary, 'null'::jsonb)::text AS summary_json,"
    " s.approvals::int AS approvals, s.rejections::int AS rejections, s.overdue, "
    + VOIDS_OF_GATE_JSON
    + " AS voids_json, "
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
    voids = voids_from_json(values.pop("voids_json"))
    decisions = tuple(
        DecisionRecord(
            principal_id,
            display_name,
            Decision(decision),
            reason,
            decided_at,
            Channel(channel),
            certified,
            proposed,
            currency,
        )
        for principal_id, display_name, decision, reason, decided_at, channel, certified, proposed, currency in zip(
            *(columns[name] for name in _DECISION_ARRAYS), strict=True
        )
    )
    return GateRecord(
        **{
            **values,
            "requested_by": tuple(values["requested_by"]),
            "accepted_proofs": tuple(values["accepted_proofs"]),
            "status": GateStatus(values["status"]),
            "kind": GateKind(values["kind"]),
            "lifecycle": GateLifecycle(values["lifecycle"]),
            "decisions": decisions,
            "voids": voids,
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
    kind: GateKind
    tier: str
    quorum: int
    approver_role: str
    rule: str
    subject: str
    amount: Decimal | None
    summary_json: str  # the summary as the database prints it, so fractions stay exact

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", GateKind(self.kind))  # the column's word, as its Enum

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


# --- the engine's statements: opening a gate, marking its escalation, re-checking its decisions --------------------


@dataclass(frozen=True)
class NewGate:
    """A gate as the engine opens it: its requirement, frozen from the policy, and its times."""

    gate_id: str
    close_id: str
    task: str
    attempt: int
    kind: GateKind
    tier: str
    quorum: int
    approver_role: str
    rule: str
    summary: dict[str, Any]
    prepared_by: str
    requested_by: list[str]
    opened_at: datetime
    due_at: datetime
    expires_at: datetime | None
    amount: Decimal | None
    accounts: tuple[str, ...] = ()  # the accounts the gated work judged; a change to one voids the approval (ADR 0046)


async def insert_gate(conn: AsyncConnection[Any], gate: NewGate) -> bool:
    """Insert the gate unless its task attempt already has one; False when it had (nothing was written)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO gate (gate_id, close_id, task, attempt, kind, tier, quorum, approver_role, rule, summary,"
            " prepared_by, requested_by, opened_at, due_at, expires_at, amount, accounts)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (close_id, task, attempt) DO NOTHING RETURNING gate_id",
            (
                gate.gate_id,
                gate.close_id,
                gate.task,
                gate.attempt,
                gate.kind,
                gate.tier,
                gate.quorum,
                gate.approver_role,
                gate.rule,
                Jsonb(gate.summary),
                gate.prepared_by,
                gate.requested_by,
                gate.opened_at,
                gate.due_at,
                gate.expires_at,
                gate.amount,
                list(gate.accounts),
            ),
        )
        return await cur.fetchone() is not None


async def gate_of_attempt(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> str | None:
    """The gate opened for the task's attempt, or None when it has none."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT gate_id::text FROM gate WHERE close_id = %s AND task = %s AND attempt = %s",
            (close_id, task, attempt),
        )
        gate_id: str | None = await cur.fetchone()
    return gate_id


async def mark_escalated(conn: AsyncConnection[Any], gate_id: str) -> bool:
    """Stamp an open gate's escalation; False when it was already escalated or is no longer open."""
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE gate SET escalated_at = now() WHERE gate_id = %s AND escalated_at IS NULL AND lifecycle = 'open'"
            " RETURNING gate_id",
            (gate_id,),
        )
        return await cur.fetchone() is not None


@dataclass(frozen=True)
class RecordedDecision:
    """A decision on a gate with what re-checking its proof needs: the principal's registered Ed25519 key, its login
    aliases, whether the proof's chat identity is the principal's, and the key of the live passkey the proof names."""

    gate_id: str
    principal_id: str
    decision: Decision
    reason: str
    nonce: str
    channel: Channel
    proof: Any
    public_key: bytes | None
    logins: tuple[str, ...]
    identity_matches: bool
    passkey_public_key: bytes | None = None  # the COSE key of a live passkey of this principal the proof names

    def __post_init__(self) -> None:
        object.__setattr__(self, "decision", Decision(self.decision))  # the column's word, as its Enum
        object.__setattr__(self, "channel", Channel(self.channel))
        object.__setattr__(self, "public_key", bytes(self.public_key) if self.public_key is not None else None)
        object.__setattr__(self, "logins", tuple(self.logins))
        if self.passkey_public_key is not None:
            object.__setattr__(self, "passkey_public_key", bytes(self.passkey_public_key))


async def recorded_decisions(conn: AsyncConnection[Any], gate_id: str) -> list[RecordedDecision]:
    """Every decision on the gate, in the order they were recorded, with what is needed to re-check its proof."""
    async with conn.cursor(row_factory=class_row(RecordedDecision)) as cur:
        await cur.execute(
            "SELECT d.gate_id::text AS gate_id, d.principal_id, d.decision, d.reason, d.nonce, d.channel, d.proof,"
            " p.public_key,"
            " ARRAY(SELECT l.external_id FROM principal_identity l"
            "       WHERE l.principal_id = d.principal_id AND l.channel = 'login' ORDER BY l.external_id) AS logins,"
            " EXISTS (SELECT 1 FROM principal_identity i"
            "         WHERE i.principal_id = d.principal_id AND i.channel = d.channel"
            "           AND i.channel = d.proof->>'kind'"
            "           AND i.tenant = d.proof->>'tenant' AND i.external_id = d.proof->>'external_id')"
            " AS identity_matches,"
            " (SELECT k.public_key FROM principal_passkey k WHERE k.credential_id = d.proof->>'credential_id'"
            "   AND k.principal_id = d.principal_id AND (k.revoked_at IS NULL OR k.revoked_at > d.decided_at))"
            " AS passkey_public_key"
            " FROM gate_decision d LEFT JOIN principal p USING (principal_id)"
            " WHERE d.gate_id = %s ORDER BY d.decision_id",
            (gate_id,),
        )
        return await cur.fetchall()
