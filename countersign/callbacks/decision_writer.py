"""The only code that writes gate decisions.

A decision is recorded only for a known human principal holding the role the gate's tier requires, once per
(gate, principal), with a unique nonce. Every refusal is traced with its reason. The statements are
countersign.store.decisions (this module alone may import it: an import-linter contract) and, for a board
decision's sign count, countersign.store.passkeys; the rules are here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection, errors

from countersign.audit.person_proof import digest_of_gate
from countersign.audit.trace import append_event, seal_pending
from countersign.callbacks.person_signature import (
    BOARD,
    SIGNED_CALLBACK,
    PersonProofRejected,
    check_passkey_assertion,
    check_person_signature,
)
from countersign.callbacks.principals import Principal, normalise_identity
from countersign.certificates.amendment import AMENDING_ROLE, Amendment, AmendmentInvalid, check_against
from countersign.policy.deciders import Bar, GateTerms, bars
from countersign.states import CHAT_CHANNELS, Channel, Decision, GateStatus, ProofKind, RefusalCode, TraceKind
from countersign.store import decisions as decision_store
from countersign.store.decisions import DecisionContext, NewDecision
from countersign.store.gates import GateRecord, read_gate
from countersign.store.passkeys import record_passkey_use

DECISIONS = tuple(decision.value for decision in Decision)
# What each door's decision carries as proof (the database maps channels to proofs the same way: migration 0017).
CHANNEL_PROOF = {
    Channel.SLACK: ProofKind.PLATFORM_IDENTITY,
    Channel.TEAMS: ProofKind.PLATFORM_IDENTITY,
    SIGNED_CALLBACK: ProofKind.ED25519,
    BOARD: ProofKind.PASSKEY,
}


class GateNotFound(LookupError):
    def __init__(self, gate_id: str) -> None:
        super().__init__(f"no gate with id {gate_id!r}")
        self.gate_id = gate_id


class DecisionRefused(Exception):
    """The responder may not decide this gate. `code` is stable; the message is for people."""

    def __init__(self, gate_id: str, principal: str, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.gate_id = gate_id
        self.principal = principal
        self.code = RefusalCode(code)


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
    channel: Channel
    proof: dict[str, Any] = field(default_factory=dict)
    """Person-level proof: an Ed25519 signature for signed callbacks, a passkey assertion for the board, the platform
    identity for Slack and Teams."""
    amendment: Amendment | None = None
    """An approval with edits: the sum a quantity surveyor certifies instead of the proposed one, line by line
    (`countersign.certificates.amendment`); the person's proof signs its digest."""

    def digest(self) -> str:
        body = f"{self.gate_id}\n{normalise_identity(self.principal)}\n{self.decision}\n{self.reason}\n{self.nonce}"
        if self.proof:  # a replay under the same nonce with another proof is a different request
            body += "\n" + json.dumps(self.proof, sort_keys=True, separators=(",", ":"), default=str)
        if self.amendment is not None:  # ... and so is one with another amendment
            body += "\namendment:" + self.amendment.digest()
        return hashlib.sha256(body.encode()).hexdigest()

    @property
    def amendment_digest(self) -> str | None:
        return None if self.amendment is None else self.amendment.digest()


@dataclass(frozen=True)
class GateOutcome:
    """The gate as its one typed read (`countersign.store.gates`) shows it after a request, and whether the request
    wrote."""

    gate: GateRecord
    recorded: bool

    @property
    def gate_id(self) -> str:
        return self.gate.gate_id

    @property
    def status(self) -> GateStatus:
        return self.gate.status

    @property
    def quorum(self) -> int:
        return self.gate.quorum

    @property
    def approvals(self) -> int:
        return self.gate.approvals

    @property
    def rejections(self) -> int:
        return self.gate.rejections

    @property
    def decisions(self) -> list[dict[str, Any]]:
        return [
            {
                "principal": d.principal_id,
                "decision": d.decision.value,
                "reason": d.reason,
                "decided_at": d.decided_at.isoformat(),
                "channel": d.channel,
            }
            for d in self.gate.decisions
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "gate_id": self.gate_id,
            "status": self.status.value,
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
    status: GateStatus,
    role: str,
    tier: str,
    preparers: set[str],
    previous: Decision | None = None,
) -> None:
    """The runtime layer of the decision boundary: raise DecisionRefused (or DecisionConflict) with the reason.

    Who may decide is the one rule (`countersign.policy.deciders`): this refuses with its first bar. The context does
    not carry the principal's `active` or the gate's lifecycle; the database's admission trigger checks those
    (`refused_by_database`). `previous` is what the principal already decided on the gate, if anything."""
    votes = {principal.principal_id: previous} if principal is not None and previous is not None else {}
    terms = GateTerms(role, frozenset(preparers), status, votes)
    found = bars(terms, principal.person if principal is not None else None)
    if found:
        raise _refusal(found[0], request, principal, status=status, role=role, tier=tier, previous=previous)


def _refusal(
    bar: Bar,
    request: DecisionRequest,
    principal: Principal | None,
    *,
    status: GateStatus,
    role: str,
    tier: str,
    previous: Decision | None,
) -> DecisionRefused | DecisionConflict:
    """The refusal of `bar`, worded for people."""
    who = normalise_identity(request.principal)
    gate = request.gate_id
    match bar:
        case Bar.UNKNOWN_PRINCIPAL:
            return DecisionRefused(gate, who, RefusalCode.UNKNOWN_PRINCIPAL, f"principal {who!r} is not known")
        case Bar.MACHINE_PRINCIPAL:
            return DecisionRefused(
                gate, who, RefusalCode.MACHINE_PRINCIPAL, f"principal {who!r} is a machine; only humans decide gates"
            )
        case Bar.MISSING_ROLE:
            return DecisionRefused(
                gate, who, RefusalCode.MISSING_ROLE, f"principal {who!r} lacks role {role!r} required by tier {tier}"
            )
        case Bar.PREPARER:
            return DecisionRefused(
                gate,
                who,
                RefusalCode.PREPARER,
                f"principal {who!r} prepared or requested the work under this gate; someone else must decide it",
            )
        case Bar.GATE_EXPIRED:
            return DecisionRefused(
                gate, who, RefusalCode.GATE_EXPIRED, "the gate expired undecided; the work will be redone"
            )
        case Bar.GATE_CANCELLED:
            return DecisionRefused(gate, who, RefusalCode.GATE_CANCELLED, "the gate was cancelled")
        case Bar.ALREADY_DECIDED:
            if status is not Decision(request.decision).outcome:
                return DecisionConflict(gate, who, f"gate already {status}")
            return DecisionRefused(gate, who, RefusalCode.ALREADY_DECIDED, f"gate already {status}; nothing to add")
        case Bar.ALREADY_VOTED:
            assert principal is not None
            principal_id = principal.principal_id
            return DecisionRefused(
                gate,
                principal_id,
                RefusalCode.ALREADY_VOTED,
                f"principal {principal_id!r} already decided this gate ({previous})",
            )
    # INACTIVE_PRINCIPAL and GATE_NOT_OPEN: this context does not carry what they judge
    raise AssertionError(f"the decision writer does not judge {bar}")


async def gate_outcome(conn: AsyncConnection[Any], gate_id: str, *, recorded: bool = False) -> GateOutcome:
    """The gate's state and every decision on it, in the order they were made (one query: `countersign.store.gates`)."""
    gate = await read_gate(conn, gate_id)
    if gate is None:
        raise GateNotFound(gate_id)
    return GateOutcome(gate, recorded)


Seal = Callable[[], Awaitable[object]]
OnRecorded = Callable[[AsyncConnection[Any], str], Awaitable[list[int]]]
"""Run on the decision's connection, inside its transaction, once a new decision is written: (conn, gate_id) ->
the outbox message ids it enqueued (the composition root passes `countersign.engine.outbox.enqueue_card_updates`)."""


@dataclass(frozen=True)
class Recorded:
    """A decision's outcome and the outbox messages committed with it (to deliver now)."""

    outcome: GateOutcome
    message_ids: tuple[int, ...] = ()


async def record_decision(
    conn: AsyncConnection[Any], request: DecisionRequest, *, seal: Seal | None = None
) -> GateOutcome:
    """Record one decision, or raise. `conn` must be in autocommit mode; this opens its own transaction.

    The decision (or refusal) and its trace event commit together; the event is then sealed into the chain before
    this returns, by `seal_pending` on `conn`, or by `seal` (a server passes its
    `countersign.audit.sealer.GroupSealer`).
    """
    return (await record_and_announce(conn, request, seal=seal)).outcome


async def record_and_announce(
    conn: AsyncConnection[Any],
    request: DecisionRequest,
    *,
    seal: Seal | None = None,
    on_recorded: OnRecorded | None = None,
) -> Recorded:
    """`record_decision`, and `on_recorded` in the same transaction when a new decision was written: the decision,
    its trace event and what `on_recorded` writes (the card updates) commit together or not at all. A replay writes
    nothing and announces nothing.

    The transaction runs in one pipeline (`psycopg` pipeline mode): the statements whose answers nothing waits for
    travel with the next one that is awaited, so a decision costs four round trips (lock and context; the insert and
    the gate's new state; `on_recorded`; the commit), every check and every statement unchanged."""
    if request.decision not in DECISIONS:
        raise ValueError(f"decision must be one of {DECISIONS}, not {request.decision!r}")
    message_ids: list[int] = []
    try:
        async with conn.pipeline(), conn.transaction():
            try:
                outcome = await _record(conn, request)
            # the database's own check (migrations 0006 and approve_with_edits) refused the row
            except (errors.InsufficientPrivilege, errors.CheckViolation) as exc:
                detail = exc.diag.message_primary or str(exc)
                raise DecisionRefused(
                    request.gate_id, normalise_identity(request.principal), database_refusal_code(exc), detail
                ) from None
            if outcome.recorded and on_recorded is not None:
                message_ids = await on_recorded(conn, request.gate_id)
    except DecisionRefused as refused:
        await _trace_refusal(conn, request, refused)
        raise
    finally:
        await (seal() if seal is not None else seal_pending(conn))
    return Recorded(outcome, tuple(message_ids))


async def refuse(
    conn: AsyncConnection[Any], request: DecisionRequest, code: RefusalCode, message: str, *, seal: Seal | None = None
) -> DecisionRefused:
    """Trace a refusal decided before a principal could be resolved (e.g. a platform says the user is a bot)."""
    refused = DecisionRefused(request.gate_id, normalise_identity(request.principal), code, message)
    await _trace_refusal(conn, request, refused)
    await (seal() if seal is not None else seal_pending(conn))
    return refused


async def _trace_refusal(conn: AsyncConnection[Any], request: DecisionRequest, refused: DecisionRefused) -> None:
    async with conn.transaction():
        await append_event(
            conn,
            actor="callbacks",
            close_id=await decision_store.read_close_of(conn, request.gate_id),
            kind=TraceKind.DECISION_REFUSED,
            payload={
                "gate_id": request.gate_id,
                "principal": request.principal,
                "decision": request.decision,
                "code": refused.code,
                "reason": str(refused),
                "channel": request.channel,
            },
        )


async def _check_person_proof(
    conn: AsyncConnection[Any], request: DecisionRequest, principal: Principal, row: DecisionContext
) -> None:
    """A signed-callback decision carries the person's own Ed25519 signature, a board decision their passkey's
    assertion (countersign/callbacks/person_signature.py), each over the digest of the gate's summary as the database
    holds it."""
    facts = row.gate_facts(request.gate_id)
    digest = digest_of_gate(facts.digest_fields(), facts.summary_json)
    try:
        if request.channel == SIGNED_CALLBACK:
            check_person_signature(
                gate_id=request.gate_id,
                principal=request.principal,
                principal_id=principal.principal_id,
                decision=request.decision,
                reason=request.reason,
                nonce=request.nonce,
                proof=request.proof,
                public_key=row.public_key,
                summary_digest=digest,
                amendment_digest=request.amendment_digest,
            )
            return
        count = check_passkey_assertion(
            gate_id=request.gate_id,
            principal_id=principal.principal_id,
            decision=request.decision,
            reason=request.reason,
            nonce=request.nonce,
            proof=request.proof,
            passkey_public_key=row.passkey_public_key,
            sign_count=row.passkey_sign_count or 0,
            summary_digest=digest,
            amendment_digest=request.amendment_digest,
        )
    except PersonProofRejected as rejected:
        raise DecisionRefused(request.gate_id, principal.principal_id, rejected.code, str(rejected)) from None
    # the count only rises: a replayed assertion is refused here by the database
    await record_passkey_use(conn, request.proof["credential_id"], count)


def _check_proof_strength(request: DecisionRequest, row: DecisionContext) -> None:
    """The gate's accepted proofs (frozen from risk.yaml when it opened) admit this door's proof; the database
    checks the same, whoever connects. A rejection says why."""
    who = normalise_identity(request.principal)
    proof = CHANNEL_PROOF.get(request.channel)
    accepted = tuple(row.accepted_proofs or ())
    if proof is None or proof not in accepted:
        raise DecisionRefused(
            request.gate_id,
            who,
            RefusalCode.NEEDS_PERSON_KEY,
            f"this {row.tier} gate must be signed with the person's own key ({', '.join(accepted)}); a"
            f" {request.channel} decision cannot decide it: review and sign it on the Close Board",
        )
    if request.decision == Decision.REJECT and not request.reason.strip():
        raise DecisionRefused(
            request.gate_id, who, RefusalCode.REASON_REQUIRED, "a rejection needs the person's reason"
        )


def _check_amendment(
    request: DecisionRequest, amendment: Amendment, principal: Principal, row: DecisionContext
) -> None:
    """An approval with edits: by a quantity surveyor, with the person's own key, on a certificate's payment gate,
    fitting its sums (between zero and the claim, the lines adding up). The database checks the same, whoever
    connects (migration approve_with_edits)."""
    who = principal.principal_id
    if request.decision != Decision.APPROVE:
        raise DecisionRefused(
            request.gate_id, who, RefusalCode.AMENDMENT_INVALID, "only an approval certifies an amended sum"
        )
    if request.channel not in (SIGNED_CALLBACK, BOARD):
        raise DecisionRefused(
            request.gate_id,
            who,
            RefusalCode.NEEDS_PERSON_KEY,
            f"certifying another sum needs the person's own key; a {request.channel} decision carries none: amend it on"
            " the Close Board",
        )
    if AMENDING_ROLE not in principal.roles:
        raise DecisionRefused(
            request.gate_id,
            who,
            RefusalCode.MISSING_ROLE,
            f"principal {who!r} lacks role {AMENDING_ROLE!r} needed to certify another sum than proposed",
        )
    summary = json.loads(row.summary_json or "null")
    payment = isinstance(summary, dict) and summary.get("kind") == "payment"
    certificate = summary.get("certificate") if payment else None
    if row.gate_kind != "approval" or not isinstance(certificate, dict):
        raise DecisionRefused(
            request.gate_id,
            who,
            RefusalCode.AMENDMENT_INVALID,
            "an amended sum is certified only at a certificate's payment gate, and this gate is not one",
        )
    proposed = Decimal(str(certificate["amount_to_certify"]))
    try:
        check_against(
            amendment,
            currency=str(certificate["currency"]),
            proposed=proposed,
            claimed=Decimal(str(certificate.get("claimed_amount", proposed))),
            reason=request.reason,
        )
    except AmendmentInvalid as invalid:
        raise DecisionRefused(request.gate_id, who, RefusalCode.AMENDMENT_INVALID, str(invalid)) from None


def stored_proof(request: DecisionRequest) -> dict[str, Any]:
    """The proof as the database checks it: platform identities normalised the way `principal_identity` stores them."""
    proof = dict(request.proof)
    if request.amendment is not None:  # what the person's key signed; the database checks it is the row's digest
        proof["amendment_digest"] = request.amendment.digest()
    if request.channel in CHAT_CHANNELS:
        for key in ("tenant", "external_id"):
            if isinstance(proof.get(key), str):
                proof[key] = normalise_identity(proof[key])
    return proof


async def _record(conn: AsyncConnection[Any], request: DecisionRequest) -> GateOutcome:
    digest = request.digest()
    # in a pipeline, the lock is sent with the context query (its own statement and snapshot)
    await decision_store.lock_gate(conn, request.gate_id)
    row = await decision_store.read_decision_context(
        conn,
        nonce=request.nonce,
        gate_id=request.gate_id,
        key=normalise_identity(request.principal),
        credential_id=request.proof.get("credential_id") if request.channel == BOARD else None,
    )
    if row.replay_gate is not None:
        if row.replay_digest != digest or row.replay_gate != request.gate_id:
            raise DecisionConflict(request.gate_id, request.principal, "nonce already used for a different request")
        return await gate_outcome(conn, request.gate_id)
    if row.status is None:
        raise GateNotFound(request.gate_id)
    assert row.role is not None and row.tier is not None and row.prepared_by is not None
    principal = row.principal
    if principal is not None and principal.is_human and request.channel in (SIGNED_CALLBACK, BOARD):
        await _check_person_proof(conn, request, principal, row)
    check_may_decide(
        request,
        principal,
        status=GateStatus(row.status),
        role=row.role,
        tier=row.tier,
        preparers={row.prepared_by, *(row.requested_by or ())},
        previous=row.previous,
    )
    assert principal is not None
    _check_proof_strength(request, row)
    if request.amendment is not None:
        _check_amendment(request, request.amendment, principal, row)
    new = NewDecision(
        request.gate_id,
        principal.principal_id,
        Decision(request.decision),
        request.reason,
        request.nonce,
        digest,
        request.channel,
        stored_proof(request),
        request.amendment,
    )
    # In a pipeline the gate's read travels with the insert; a refusal by the database surfaces there either way.
    inserted, outcome = await decision_store.insert_decision(
        conn, new, meanwhile=lambda: gate_outcome(conn, request.gate_id, recorded=True)
    )
    if inserted is None:  # a unique key held: the same nonce committed meanwhile for another gate
        raise DecisionConflict(request.gate_id, request.principal, "nonce already used for a different request")
    # The database traces the decision itself (`gate_decided`, from the row it admitted: migration 0015).
    return outcome


async def decisions_by_channel(conn: AsyncConnection[Any]) -> dict[str, int]:
    """How many decisions each door has recorded (the metrics endpoint reads it)."""
    return {row.channel: row.decisions for row in await decision_store.count_decisions_by_channel(conn)}


# The database's refusals that carry a code of their own in DETAIL (migration 0028); any other is `refused_by_database`.
CODED_DATABASE_REFUSALS = frozenset({RefusalCode.DUTIES_SEGREGATED})


def database_refusal_code(exc: errors.InsufficientPrivilege | errors.CheckViolation) -> RefusalCode:
    """The `RefusalCode` of a decision the database's triggers refused."""
    detail = exc.diag.message_detail
    return RefusalCode(detail) if detail in CODED_DATABASE_REFUSALS else RefusalCode.REFUSED_BY_DATABASE
