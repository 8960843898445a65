"""Gate decisions (`gate_decision`) as the decision writer reads and writes them: the one writer's statements.

Writes `gate_decision` (the database traces each admitted row itself: migration 0015) and takes a gate's transaction
advisory lock; reads `gate_decision`, `gate`, the `gate_state` view, `principal` and `principal_identity` (through
countersign.store.principals' `PRINCIPAL_LOOKUP`) and `principal_passkey`. Called only by
countersign/callbacks/decision_writer.py, which holds the rules (who may decide, refusals, proof checks); an
import-linter contract keeps every other room out. The gate's own read after a decision is countersign.store.gates.

Every statement runs on the writer's connection, inside its transaction and its pipeline: none waits for an answer
it does not need, so the lock travels with the context read, and the insert with the gate's read after it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.certificates.amendment import Amendment
from countersign.states import Channel, Decision, GateKind, GateStatus, PrincipalKind
from countersign.store.gates import GateFacts
from countersign.store.principals import PRINCIPAL_LOOKUP, Principal

T = TypeVar("T")


def gate_lock_key(gate_id: str) -> int:
    """The gate's advisory lock key: the first 8 bytes of SHA-256("gate:<id>"), signed."""
    return int.from_bytes(hashlib.sha256(f"gate:{gate_id}".encode()).digest()[:8], "big", signed=True)


async def lock_gate(conn: AsyncConnection[Any], gate_id: str) -> None:
    """Take the gate's transaction advisory lock (held until the caller's transaction ends). In a pipeline the
    statement travels with the next one awaited."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT pg_advisory_xact_lock(%s)", (gate_lock_key(gate_id),))


# Everything a decision is judged on, read in one round trip under the gate's lock. Always exactly one row: the nonce,
# the gate and (gate, principal) are unique, and the principal lookup is LIMIT 1.
_DECISION_CONTEXT = (
    "SELECT r.gate_id::text AS replay_gate, r.request_digest AS replay_digest,"
    " s.status, g.approver_role AS role, g.tier, g.prepared_by, g.requested_by, g.accepted_proofs,"
    " p.principal_id, p.kind, p.display_name, p.roles, previous.decision AS previous, p.public_key,"
    " k.public_key AS passkey_public_key, k.sign_count AS passkey_sign_count,"
    " g.close_id::text AS close_id, g.task, g.attempt, g.kind AS gate_kind, g.quorum, g.rule, g.subject, g.amount,"
    " coalesce(g.summary, 'null'::jsonb)::text AS summary_json"
    " FROM (SELECT 1) AS one"
    " LEFT JOIN gate_decision r ON r.nonce = %(nonce)s"
    " LEFT JOIN gate g ON g.gate_id = %(gate)s"
    " LEFT JOIN gate_state s ON s.gate_id = g.gate_id"
    f" LEFT JOIN LATERAL ({PRINCIPAL_LOOKUP}) p ON true"
    " LEFT JOIN gate_decision previous ON previous.gate_id = g.gate_id AND previous.principal_id = p.principal_id"
    " LEFT JOIN principal_passkey k ON k.credential_id = %(credential)s AND k.principal_id = p.principal_id"
    "  AND k.revoked_at IS NULL"
)


@dataclass(frozen=True)
class DecisionContext:
    """One row of `_DECISION_CONTEXT`: a replayed nonce's request, the gate, the principal and their earlier vote.

    Every column is None when its join found nothing (no such gate, no such principal, no earlier vote)."""

    replay_gate: str | None
    replay_digest: str | None
    status: GateStatus | None
    role: str | None
    tier: str | None
    prepared_by: str | None
    requested_by: list[str] | None
    accepted_proofs: list[str] | None  # ProofKind values, frozen when the gate opened
    principal_id: str | None
    kind: PrincipalKind | None
    display_name: str | None
    roles: list[str] | None
    previous: Decision | None
    public_key: bytes | None
    passkey_public_key: bytes | None
    passkey_sign_count: int | None
    close_id: str | None
    task: str | None
    attempt: int | None
    gate_kind: GateKind | None
    quorum: int | None
    rule: str | None
    subject: str | None
    amount: Decimal | None
    summary_json: str | None

    def __post_init__(self) -> None:
        if self.status is not None:
            object.__setattr__(self, "status", GateStatus(self.status))
        if self.kind is not None:
            object.__setattr__(self, "kind", PrincipalKind(self.kind))
        if self.previous is not None:
            object.__setattr__(self, "previous", Decision(self.previous))
        if self.gate_kind is not None:
            object.__setattr__(self, "gate_kind", GateKind(self.gate_kind))

    @property
    def principal(self) -> Principal | None:
        if self.principal_id is None:
            return None
        # `principal.kind` is NOT NULL; a kind-less row would be no human (machine_principal), as it always was
        kind = self.kind or PrincipalKind.MACHINE
        return Principal(self.principal_id, kind, self.display_name or "", tuple(self.roles or ()))

    def gate_facts(self, gate_id: str) -> GateFacts:
        """The gate's signed columns (`countersign.store.gates.GateFacts`), read in the same statement as the rest."""
        assert self.close_id is not None and self.task is not None and self.attempt is not None  # the gate was found
        assert self.gate_kind is not None and self.quorum is not None and self.rule is not None
        assert self.role is not None and self.tier is not None
        assert self.subject is not None and self.summary_json is not None
        return GateFacts(
            gate_id,
            self.close_id,
            self.task,
            self.attempt,
            self.gate_kind,
            self.tier,
            self.quorum,
            self.role,
            self.rule,
            self.subject,
            self.amount,
            self.summary_json,
        )


async def read_decision_context(
    conn: AsyncConnection[Any], *, nonce: str, gate_id: str, key: str, credential_id: str | None
) -> DecisionContext:
    """The context a decision is judged on: `key` is the principal's normalised id or login, `credential_id` the
    passkey a board decision names (None for the other doors)."""
    async with conn.cursor(row_factory=class_row(DecisionContext)) as cur:
        await cur.execute(_DECISION_CONTEXT, {"nonce": nonce, "gate": gate_id, "key": key, "credential": credential_id})
        row = await cur.fetchone()
    assert row is not None  # the query always yields its one row
    return row


@dataclass(frozen=True)
class NewDecision:
    """A decision as `gate_decision` stores it; `proof` is the proof as the database checks it."""

    gate_id: str
    principal_id: str
    decision: Decision
    reason: str
    nonce: str
    request_digest: str
    channel: Channel
    proof: dict[str, Any]
    amendment: Amendment | None = None  # an approval with edits: its sums and lines (migration approve_with_edits)


@dataclass(frozen=True)
class InsertedDecision:
    decision_id: int


async def insert_decision(
    conn: AsyncConnection[Any], new: NewDecision, *, meanwhile: Callable[[], Awaitable[T]]
) -> tuple[InsertedDecision | None, T]:
    """Insert the decision unless a unique key holds (then None: the same nonce or (gate, principal) committed
    meanwhile), with `meanwhile`'s answer.

    `meanwhile` runs after the insert is sent and before its answer is read: in a pipeline its statements travel
    with the insert (the decision writer reads the gate's new state there), and a refusal by the database surfaces
    in it either way."""
    async with conn.cursor(row_factory=class_row(InsertedDecision)) as cur:
        await cur.execute(
            "INSERT INTO gate_decision"
            " (gate_id, principal_id, decision, reason, nonce, request_digest, channel, proof,"
            " certified_minor, proposed_minor, amend_currency, adjustments, amendment_digest)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING decision_id",
            (
                new.gate_id,
                new.principal_id,
                new.decision,
                new.reason,
                new.nonce,
                new.request_digest,
                new.channel,
                Jsonb(new.proof),
                *(
                    (None,) * 5
                    if (a := new.amendment) is None
                    else (a.certified_minor, a.proposed_minor, a.currency, Jsonb(a.adjustments_json()), a.digest())
                ),
            ),
        )
        answer = await meanwhile()
        inserted = await cur.fetchone()
    return inserted, answer


async def read_close_of(conn: AsyncConnection[Any], gate_id: str) -> str | None:
    """The close the gate belongs to, or None when there is no such gate."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT close_id::text FROM gate WHERE gate_id = %s", (gate_id,))
        close_id: str | None = await cur.fetchone()
    return close_id


@dataclass(frozen=True)
class ChannelCount:
    channel: Channel
    decisions: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "channel", Channel(self.channel))  # the column's word, as its Enum


async def count_decisions_by_channel(conn: AsyncConnection[Any]) -> list[ChannelCount]:
    """How many decisions each door has recorded (doors with none are absent)."""
    async with conn.cursor(row_factory=class_row(ChannelCount)) as cur:
        await cur.execute("SELECT channel, count(*) AS decisions FROM gate_decision GROUP BY channel")
        return await cur.fetchall()
