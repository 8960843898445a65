"""What the Close Board reads, for a caller: every close and payment run, a person's inbox, one close with its trace,
one gate with its evidence, and the series its charts draw.

Every read first passes the one rule (`countersign.services.reading.authorize`, the `read close` roles) and then runs
on the
engine role's connection (`conn`), as every door reads. The statements are countersign/store/board_reads.py's (and
`countersign.store.gates`' one read of a gate); this module checks the caller and shapes the rows for the pages.
Rows come back as frozen dataclasses whose states are the Enums of `countersign.states`; gates are
`countersign.store.gates.GateRecord`s. Who may decide a gate is `may_decide`: the one rule
(`countersign.policy.deciders`) the decision writer refuses by, and the database's admission trigger checks the same
(role, not yet decided, did not prepare or request the work, still open), so the inbox and the gate page never offer
what the decision would refuse.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.merkle import MerkleTree
from countersign.audit.timeline import describe, target_of
from countersign.audit.trace import iter_events, verify_chain
from countersign.audit.transparency_log import LogInconsistent, check_extends, latest_checkpoint
from countersign.certificates.pipeline import run_pipeline
from countersign.engine.construction import certificate_record, contract_records, prior_certificates
from countersign.engine.workflows.certificates.runs import payment_run_status
from countersign.money.units import minor_units
from countersign.policy import deciders
from countersign.policy.command_roles import READ_CLOSE
from countersign.policy.model import Policy
from countersign.services.errors import CloseNotFound, GateNotFound
from countersign.services.reading import Caller, Reader, authorize, is_close_id, is_gate_id
from countersign.states import DecisionProof, RunState, TraceKind
from countersign.store import board_reads as store
from countersign.store.board_reads import BankLine as BankLine
from countersign.store.board_reads import CloseHeader as CloseHeader
from countersign.store.board_reads import PostedJournalLine as PostedJournalLine
from countersign.store.board_reads import TaskLine as TaskLine
from countersign.store.books import book_set_manifest
from countersign.store.gates import GateRecord, read_gate, read_gates_of_close

MAX_RUNS = 500  # closes and payment runs on the board's front page, newest first
MAX_INBOX_GATES = 200
MAX_TIMELINE_EVENTS = 5_000
CERTIFICATES_WORKFLOW = "certificates"


# --- the rule for offering a decision ------------------------------------------------------------------------------


def may_decide(gate: GateRecord, caller: Caller) -> bool:
    """May `caller` decide `gate` now? The one rule (`countersign.policy.deciders`), as the board offers it: an
    active human holding the gate's role, who has not decided it, did not prepare or request its work, on a gate
    still open. Pure."""
    return deciders.may_decide(gate.terms, caller.person)


# --- the front page ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitingOn:
    """An open gate of a run: whom it waits on and how many approvals it still misses."""

    gate_id: str
    task: str
    title: str
    approver_role: str
    missing: int


@dataclass(frozen=True)
class RunLine:
    """One close, or one payment run (a close of the certificates workflow), as the front page lists it."""

    close_id: str
    workflow: str
    entity: str
    period: str
    status: RunState
    status_reason: str | None
    updated_at: datetime
    currency: str
    waiting: tuple[WaitingOn, ...]


@dataclass(frozen=True)
class PaymentRunLine:
    """A payment run: its certificate, the amount it would certify (with the currency), and where it stands."""

    run: RunLine
    certificate_id: str
    contract_id: str
    number: int
    stage: str
    amount_to_certify: Decimal | None
    certified: bool


@dataclass(frozen=True)
class Overview:
    closes: tuple[RunLine, ...]
    payment_runs: tuple[PaymentRunLine, ...]


async def read_overview(conn: AsyncConnection[Any], policy: Policy, reader: Reader | None) -> Overview:
    """Every close and payment run (newest first, at most MAX_RUNS), each with the open gates it waits on."""
    authorize(READ_CLOSE, policy, reader)
    runs = await store.latest_runs(conn, MAX_RUNS)
    open_gates = await store.open_gates_of_runs(conn, [r.close_id for r in runs])
    waiting: dict[str, list[WaitingOn]] = {}
    for g in open_gates:
        waiting.setdefault(g.close_id, []).append(WaitingOn(g.gate_id, g.task, g.title, g.approver_role, g.missing))
    lines = [RunLine(**vars(r), waiting=tuple(waiting.get(r.close_id, ()))) for r in runs]
    payments = {row["close_id"]: row for row in await payment_run_status(conn)}
    closes = tuple(line for line in lines if line.workflow != CERTIFICATES_WORKFLOW)
    payment_runs = tuple(
        PaymentRunLine(
            run=line,
            certificate_id=str(payments[line.close_id]["certificate_id"]),
            contract_id=str(payments[line.close_id]["contract_id"]),
            number=int(payments[line.close_id]["number"]),
            stage=str(payments[line.close_id]["stage"]),
            amount_to_certify=_decimal(payments[line.close_id]["amount_to_certify"]),
            certified=bool(payments[line.close_id]["certified"]),
        )
        for line in lines
        if line.workflow == CERTIFICATES_WORKFLOW and line.close_id in payments
    )
    return Overview(closes, payment_runs)


def _decimal(value: object) -> Decimal | None:
    return None if value is None else Decimal(str(value))


# --- the inbox -----------------------------------------------------------------------------------------------------


async def read_inbox(conn: AsyncConnection[Any], policy: Policy, caller: Caller) -> tuple[GateRecord, ...]:
    """ "Waiting on me": the open gates `caller` may decide now (`may_decide`), soonest due first."""
    authorize(READ_CLOSE, policy, caller)
    gate_ids = await store.open_gate_ids_for_roles(conn, list(caller.roles), MAX_INBOX_GATES)
    gates = [await read_gate(conn, gate_id) for gate_id in gate_ids]
    return tuple(g for g in gates if g is not None and may_decide(g, caller))


# --- one close -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineLine:
    """One trace event of the close, worded (countersign/audit/timeline.py)."""

    seq: int
    ts: str
    actor: str
    target: str
    kind: TraceKind
    words: str
    task: str | None


@dataclass(frozen=True)
class CheckpointSeen:
    tree_size: int
    origin: str
    key_name: str
    root_b64: str
    consistent: bool  # the log as read extends the tree this checkpoint signed
    problem: str | None


@dataclass(frozen=True)
class TraceCheck:
    """The whole log's hash chain recomputed, and the last signed checkpoint checked against it."""

    intact: bool
    size: int
    first_bad_seq: int | None
    problem: str | None
    checkpoint: CheckpointSeen | None

    @property
    def ok(self) -> bool:
        return self.intact and (self.checkpoint is None or self.checkpoint.consistent)


@dataclass(frozen=True)
class CloseView:
    close: CloseHeader
    tasks: tuple[TaskLine, ...]
    gates: tuple[GateRecord, ...]
    timeline: tuple[TimelineLine, ...]
    trace: TraceCheck


async def _close_header(conn: AsyncConnection[Any], close_id: str) -> CloseHeader:
    if not is_close_id(close_id):
        raise CloseNotFound(close_id)
    header = await store.close_header(conn, close_id)
    if header is None:
        raise CloseNotFound(close_id)
    return header


async def read_close_timeline(
    conn: AsyncConnection[Any], policy: Policy, reader: Reader | None, close_id: str
) -> tuple[TimelineLine, ...]:
    """The close's sealed trace events in sequence order (at most MAX_TIMELINE_EVENTS), each in words."""
    authorize(READ_CLOSE, policy, reader)
    await _close_header(conn, close_id)
    return await _timeline(conn, close_id)


async def _timeline(conn: AsyncConnection[Any], close_id: str) -> tuple[TimelineLine, ...]:
    lines: list[TimelineLine] = []
    async for event in iter_events(conn, close_id=close_id):
        task = event.payload.get("task")
        lines.append(
            TimelineLine(
                seq=event.seq,
                ts=event.ts,
                actor=event.actor,
                target=target_of(event),
                kind=event.kind,
                words=describe(event),
                task=task if isinstance(task, str) else None,
            )
        )
        if len(lines) >= MAX_TIMELINE_EVENTS:
            break
    return tuple(lines)


async def check_trace(conn: AsyncConnection[Any]) -> TraceCheck:
    """`countersign trace verify`'s check, read-only: the chain recomputed from the sealed log, and the last signed
    checkpoint's tree found inside it (events sealed since are not yet covered by a checkpoint)."""
    result = await verify_chain(conn, collect_leaves=True)
    if not result.ok or result.leaf_hashes is None:
        return TraceCheck(False, result.size, result.first_bad_seq, result.problem, None)
    stored = await latest_checkpoint(conn)
    if stored is None:
        return TraceCheck(True, result.size, None, None, None)
    problem = None
    try:
        check_extends(MerkleTree(result.leaf_hashes), stored)
    except LogInconsistent as exc:
        problem = str(exc)
    seen = CheckpointSeen(
        tree_size=stored.tree_size,
        origin=stored.origin,
        key_name=stored.key_name,
        root_b64=base64.b64encode(stored.root).decode(),
        consistent=problem is None,
        problem=problem,
    )
    return TraceCheck(True, result.size, None, None, seen)


async def read_close_view(
    conn: AsyncConnection[Any], policy: Policy, reader: Reader | None, close_id: str
) -> CloseView:
    """The close, its tasks and gates, its timeline and the trace's verification; `CloseNotFound` for an unknown id."""
    authorize(READ_CLOSE, policy, reader)
    header = await _close_header(conn, close_id)
    tasks = await store.task_lines(conn, header.close_id)
    gates = await read_gates_of_close(conn, header.close_id)
    timeline = await _timeline(conn, header.close_id)
    return CloseView(header, tuple(tasks), tuple(gates), timeline, await check_trace(conn))


# --- one gate ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClauseText:
    id: str
    title: str
    text: str
    sha256: str


@dataclass(frozen=True)
class GateView:
    """A gate and the evidence behind it that is not in its summary.

    `proofs` maps each decider to what proved the decision was theirs (`gate_decision.proof.kind`: "slack", "teams",
    "ed25519", "passkey"). `unmatched_bank_lines` are the bank lines of the gate's own reconciliation attempt that
    the matcher left unmatched, read from the feed that attempt ran on. `clauses` are the texts of the clauses the
    payment run retrieved (the cited ones are among them), `passed_invariants` those its reconstruction found held.
    """

    gate: GateRecord
    workflow: str
    currency: str
    proofs: Mapping[str, DecisionProof]
    unmatched_bank_lines: tuple[BankLine, ...]
    posted_journal: tuple[PostedJournalLine, ...]
    clauses: Mapping[str, ClauseText]
    passed_invariants: tuple[str, ...]


CLAUSE_RETRIEVAL_TASK = "clause_retrieval"
RECONSTRUCTION_TASK = "reconstruction"


async def _unmatched_bank_lines(conn: AsyncConnection[Any], gate: GateRecord, book_set_id: int) -> tuple[BankLine, ...]:
    result = await store.attempt_result(conn, gate.close_id, gate.task, gate.attempt)
    if result.get("kind") != "bank":
        return ()
    ids = [
        line_id
        for account in result.get("accounts", [])
        if isinstance(account, Mapping)
        for line_id in account.get("unmatched_bank", [])
        if isinstance(line_id, str)
    ]
    if not ids:
        return ()
    return tuple(await store.bank_lines_of_attempt(conn, book_set_id, ids, gate.close_id, gate.task, gate.attempt))


async def read_gate_view(conn: AsyncConnection[Any], policy: Policy, reader: Reader | None, gate_id: str) -> GateView:
    """The gate with its decisions' proofs and the evidence in the tables; `GateNotFound` for an unknown id."""
    authorize(READ_CLOSE, policy, reader)
    gate = await read_gate(conn, gate_id) if is_gate_id(gate_id) else None
    if gate is None:
        raise GateNotFound(gate_id)
    header = await _close_header(conn, gate.close_id)
    proofs = await store.decision_proofs(conn, gate.gate_id)
    posted = tuple(await store.posted_journal(conn, gate.close_id, gate.task))
    clauses: dict[str, ClauseText] = {}
    passed: tuple[str, ...] = ()
    if header.workflow == CERTIFICATES_WORKFLOW:
        retrieved = await store.task_result(conn, gate.close_id, CLAUSE_RETRIEVAL_TASK)
        for clause in retrieved.get("clauses", []):
            if isinstance(clause, Mapping) and isinstance(clause.get("id"), str):
                clauses[clause["id"]] = ClauseText(
                    clause["id"], str(clause.get("title", "")), str(clause.get("text", "")), str(clause.get("sha256"))
                )
        reconstruction = await store.task_result(conn, gate.close_id, RECONSTRUCTION_TASK)
        passed = tuple(name for name in reconstruction.get("passed", []) if isinstance(name, str))
    return GateView(
        gate=gate,
        workflow=header.workflow,
        currency=header.currency,
        proofs=proofs,
        unmatched_bank_lines=await _unmatched_bank_lines(conn, gate, header.book_set_id),
        posted_journal=posted,
        clauses=clauses,
        passed_invariants=passed,
    )


# --- the charts' series --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskOutput:
    """A task's output (`close_task.result`) with the close's currency beside it."""

    currency: str
    result: Mapping[str, Any]


async def read_variance_output(
    conn: AsyncConnection[Any], policy: Policy, reader: Reader | None, close_id: str
) -> TaskOutput:
    """The variance task's output of the close ({} before it ran), read with the close's currency."""
    authorize(READ_CLOSE, policy, reader)
    header = await _close_header(conn, close_id)
    return TaskOutput(header.currency, await store.variance_result(conn, header.close_id))


@dataclass(frozen=True)
class PositionPoint:
    """A contract's position at one certificate, submission by submission. Amounts in the contract's currency.

    `claimed_gross_to_date` and `claimed_net_to_date` are what the certificate states; `certified_before` is the
    net the reconstruction found certified by every earlier certificate it let through; `amount_due` is what this one
    asks for. `certified` is the domain's verdict (no violation, no duplicate hold); `held` marks a duplicate hold.
    """

    certificate_id: str
    number: int
    period: str
    claimed_gross_to_date: Decimal
    claimed_net_to_date: Decimal
    certified_before: Decimal
    amount_due: Decimal
    certified: bool
    held: bool


@dataclass(frozen=True)
class ContractPosition:
    contract_id: str
    contract_title: str
    currency: str
    certificate_id: str  # the run's own certificate, the last point
    points: tuple[PositionPoint, ...]


def _major(amount_minor: int, places: int) -> Decimal:
    """An amount in minor units as a Decimal of its currency, `places` being the currency's minor unit
    (`countersign.money.units.minor_units`: two for most, none for JPY, three for KWD)."""
    return Decimal(amount_minor).scaleb(-places)


async def read_contract_position(
    conn: AsyncConnection[Any], policy: Policy, reader: Reader | None, close_id: str
) -> ContractPosition | None:
    """A payment run's contract, certificate by certificate up to the run's own: the reconstruction the run did,
    across the prior certificates of its construction set (the domain's pipeline, in submission order). None for a
    close that is not a payment run."""
    authorize(READ_CLOSE, policy, reader)
    header = await _close_header(conn, close_id)
    if header.workflow != CERTIFICATES_WORKFLOW:
        return None
    manifest = await book_set_manifest(conn, header.book_set_id) or {}
    set_id, certificate_id = manifest.get("construction_set_id"), manifest.get("certificate_id")
    if not isinstance(set_id, int) or not isinstance(certificate_id, str):
        return None
    own = await certificate_record(conn, set_id, certificate_id)
    if own is None:
        return None
    contracts = {record.contract_id: record.parsed() for record in await contract_records(conn, set_id)}
    earlier = [record.parsed() for record in await prior_certificates(conn, set_id, certificate_id)]
    this = own.parsed()
    run = run_pipeline(contracts, [*earlier, this])
    contract = contracts[this.contract]
    held = {hold.certificate for hold in run.holds}
    by_id = {c.id: c for c in [*earlier, this] if c.contract == contract.id}
    assessed = {a.certificate.id: a for a in run.assessments}
    places = minor_units(contract.currency)
    points = []
    net_certified = Decimal(0)
    for certificate in by_id.values():
        assessment = assessed.get(certificate.id)
        totals = certificate.totals
        before = _major(assessment.position.net_to_date_minor, places) if assessment is not None else net_certified
        if assessment is not None and assessment.certified:
            net_certified = _major(totals.net_to_date_minor, places)
        points.append(
            PositionPoint(
                certificate_id=certificate.id,
                number=certificate.number,
                period=certificate.period,
                claimed_gross_to_date=_major(totals.gross_minor, places),
                claimed_net_to_date=_major(totals.net_to_date_minor, places),
                certified_before=before,
                amount_due=_major(totals.amount_due_minor, places),
                certified=assessment is not None and assessment.certified,
                held=certificate.id in held,
            )
        )
    return ContractPosition(contract.id, contract.title, contract.currency, certificate_id, tuple(points))
