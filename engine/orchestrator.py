"""`advance(close_id)`: read the tables, do every step that is ready, record it, return.

Nothing survives between calls but the tables. A process killed anywhere is replaced by one that calls
`advance` again: running tasks re-dispatch under the same key (the stored result comes back), gates are
opened once per (close, task, attempt), postings carry keys, and gate outcomes are applied once.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, date
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from audit.checkpoint import NoteSigner
from audit.killpoints import kill_point
from audit.log import sign_log_checkpoint
from audit.trace import append_event, seal_pending
from policy import Checklist, ChecklistTask, Policy, derive_escalation_gate, derive_gate

from . import inputs
from .actors import ENGINE_ACTOR
from .closes import CloseRecord, load_close, refresh_close_status
from .dispatch import (
    AGENT_PRINCIPALS,
    MAX_DISPATCH_FAILURES,
    DispatchBackingOff,
    DispatchDeadLettered,
    DispatchFailed,
    DispatchInFlight,
    DispatchOutcome,
    SpecialistCall,
    dispatch_in_flight,
    dispatch_once,
)
from .gates import (
    GateView,
    UnprovenDecision,
    gates_for_close,
    mark_gate_applied,
    mark_gate_escalated,
    mark_gate_expired,
    open_gate,
    unproven_decisions,
)
from .grounding import UngroundedFigureError, ground_figures
from .leases import Connect, connect_to
from .outbox import ChannelTarget, enqueue_gate_cards, enqueue_notices
from .postings import JournalLine, JournalRequest, PostingRefused, post_journal

MAX_ROUNDS = 32


@dataclass(frozen=True)
class EngineContext:
    policy: Policy
    checklist: Checklist
    call: SpecialistCall
    actor: str = ENGINE_ACTOR
    channels: tuple[ChannelTarget, ...] = ()
    signer: NoteSigner | None = None  # signs a trace checkpoint at every sign-off
    origin: str = "countersign.local/close-trace"


@dataclass
class AdvanceReport:
    close_id: str
    status: str = "running"
    busy: bool = False
    steps: list[str] = field(default_factory=list)


def _lock_key(close_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"close:{close_id}".encode()).digest()[:8], "big", signed=True)


class _CloseSession:
    """The close's connection and advisory lock, held for database work only.

    Both are let go around every call to a specialist (`let_go`): a slow or hung specialist holds no connection and
    no lock. The dispatch's own lease row keeps the call single; the lock keeps two workers from interleaving the
    database steps of one close.
    """

    def __init__(self, connect: Connect, close_id: str) -> None:
        self.connect = connect
        self._key = _lock_key(close_id)
        self._held: AbstractAsyncContextManager[AsyncConnection[Any]] | None = None
        self._conn: AsyncConnection[Any] | None = None

    @property
    def conn(self) -> AsyncConnection[Any]:
        assert self._conn is not None, "the close session is let go"
        return self._conn

    async def acquire(self, *, wait: bool) -> bool:
        held = self.connect()
        conn = await held.__aenter__()
        try:
            async with conn.cursor() as cur:
                if wait:
                    await cur.execute("SELECT pg_advisory_lock(%s)", (self._key,))
                    locked = True
                else:
                    await cur.execute("SELECT pg_try_advisory_lock(%s)", (self._key,))
                    row = await cur.fetchone()
                    locked = bool(row and row[0])
        except BaseException:
            await held.__aexit__(None, None, None)
            raise
        if not locked:
            await held.__aexit__(None, None, None)
            return False
        self._held, self._conn = held, conn
        return True

    async def release(self) -> None:
        held, conn = self._held, self._conn
        self._held = self._conn = None
        if held is None or conn is None:
            return
        try:
            if not conn.closed:
                async with conn.cursor() as cur:
                    await cur.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
        finally:
            await held.__aexit__(None, None, None)

    @asynccontextmanager
    async def let_go(self) -> AsyncIterator[None]:
        await self.release()
        try:
            yield
        finally:
            await self.acquire(wait=True)


async def advance(db: AsyncConnection[Any] | Connect, close_id: str, ctx: EngineContext) -> AdvanceReport:
    """Advance one close as far as it can go without a person.

    `db` is a way to connect (the connection goes back to it around every specialist call) or an autocommit
    connection the caller keeps (then only the lock is let go around the calls).
    """
    connect = connect_to(db)
    async with connect() as conn:
        close = await load_close(conn, close_id)
    report = AdvanceReport(close.close_id, close.status)
    if close.status == "closed":
        return report
    session = _CloseSession(connect, close.close_id)
    if not await session.acquire(wait=False):
        report.busy = True
        report.steps.append("another worker is advancing this close")
        return report
    try:
        failed_this_call: set[str] = set()
        for _ in range(MAX_ROUNDS):
            progressed = await _apply_gate_outcomes(session.conn, close, ctx, report)
            progressed |= await _run_ready_tasks(session, close, ctx, report, failed_this_call)
            if not progressed:
                break
        conn = session.conn
        report.status = await refresh_close_status(conn, close.close_id, ctx.actor)
        await seal_pending(conn)
        if report.status == "closed" and close.status != "closed" and ctx.signer is not None:
            await _sign_closing_checkpoint(conn, close, ctx, report)
    finally:
        await session.release()
    return report


async def _sign_closing_checkpoint(
    conn: AsyncConnection[Any], close: CloseRecord, ctx: EngineContext, report: AdvanceReport
) -> None:
    """Sign-off always ends with a signed checkpoint, announced in the close's channels as a witness."""
    assert ctx.signer is not None
    stored = await sign_log_checkpoint(conn, ctx.signer, ctx.origin, actor=ctx.actor, close_id=close.close_id)
    if stored is None:
        return
    async with conn.transaction():
        await enqueue_notices(
            conn,
            key=f"checkpoint:{stored.tree_size}",
            template="checkpoint",
            args={"tree_size": stored.tree_size},
            close_id=close.close_id,
            channels=ctx.channels,
        )
    report.steps.append(f"trace checkpoint signed at tree size {stored.tree_size}")


async def _task_rows(conn: AsyncConnection[Any], close_id: str) -> dict[str, tuple[str, int, Any]]:
    async with conn.cursor() as cur:
        await cur.execute("SELECT task, status, attempt, result FROM close_task WHERE close_id = %s", (close_id,))
        return {r[0]: (r[1], int(r[2]), r[3]) for r in await cur.fetchall()}


async def _set_task(
    conn: AsyncConnection[Any],
    close_id: str,
    task: str,
    *,
    status: str,
    expect: tuple[str, ...],
    result: Mapping[str, Any] | None = None,
    reason: str | None = None,
    attempt: int | None = None,
) -> bool:
    async with conn.cursor() as cur:
        await cur.execute(
            "UPDATE close_task SET status = %s, result = COALESCE(%s, result), reason = %s,"
            " attempt = COALESCE(%s, attempt), updated_at = now()"
            " WHERE close_id = %s AND task = %s AND status = ANY(%s) RETURNING task",
            (
                status,
                Jsonb(dict(result)) if result is not None else None,
                reason,
                attempt,
                close_id,
                task,
                list(expect),
            ),
        )
        return await cur.fetchone() is not None


# --- gates -------------------------------------------------------------------------------------------------


async def _apply_gate_outcomes(
    conn: AsyncConnection[Any], close: CloseRecord, ctx: EngineContext, report: AdvanceReport
) -> bool:
    progressed = False
    for gate in await gates_for_close(conn, close.close_id):
        if gate.lifecycle != "open":
            continue
        if gate.status == "expired":
            async with conn.transaction():
                if await mark_gate_expired(conn, gate.gate_id):
                    await _requeue(conn, close, ctx, gate, report, kind="gate_expired")
            progressed = True
            continue
        if gate.status == "open" and gate.overdue and not gate.escalated:
            async with conn.transaction():
                if await mark_gate_escalated(conn, gate.gate_id):
                    await _escalate_overdue(conn, close, ctx, gate, report)
            continue
        if gate.status not in ("approved", "rejected"):
            continue
        unproven = await unproven_decisions(conn, gate.gate_id)
        if unproven:  # a decision without person-level proof never counts: the gate is not applied
            await _block_on_unproven(conn, close, ctx, gate, unproven, report)
            continue
        kill_point("gates.before_apply")
        async with conn.transaction():
            if not await mark_gate_applied(conn, gate.gate_id):
                continue
            await _apply_one(conn, close, ctx, gate, report)
        progressed = True
    return progressed


async def _block_on_unproven(
    conn: AsyncConnection[Any],
    close: CloseRecord,
    ctx: EngineContext,
    gate: GateView,
    unproven: list[UnprovenDecision],
    report: AdvanceReport,
) -> None:
    """Stop the gate's task (so the close is blocked, reason naming gate and principals) and trace it once."""
    who = ", ".join(f"{u.principal_id} ({u.channel}: {u.problem})" for u in unproven)
    reason = f"gate {gate.gate_id}: decision without valid person-level proof by {who}"[:500]
    async with conn.transaction():
        if not await _set_task(
            conn, close.close_id, gate.task, status="failed", expect=("awaiting_gate", "halted"), reason=reason
        ):
            return
        await append_event(
            conn,
            actor=ctx.actor,
            close_id=close.close_id,
            kind="decision_proof_invalid",
            payload={
                "gate_id": gate.gate_id,
                "task": gate.task,
                "gate_status": gate.status,
                "decisions": [
                    {"principal": u.principal_id, "channel": u.channel, "problem": u.problem} for u in unproven
                ],
            },
        )
    report.steps.append(f"{gate.task}: BLOCKED: {reason}")


async def _escalate_overdue(
    conn: AsyncConnection[Any], close: CloseRecord, ctx: EngineContext, gate: GateView, report: AdvanceReport
) -> None:
    """An overdue gate gets a reminder in the close's channels and a trace event. It is never approved by waiting."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT approver_role, due_at, expires_at FROM gate WHERE gate_id = %s", (gate.gate_id,))
        row = await cur.fetchone()
    assert row is not None
    role, due_at, expires_at = row
    reminder = overdue_reminder(
        task=gate.task,
        entity=close.entity,
        period=close.period,
        role=role,
        missing=gate.quorum - gate.approvals,
        due_at=due_at,
        expires_at=expires_at,
    )
    await append_event(
        conn,
        actor=ctx.actor,
        close_id=close.close_id,
        kind="gate_overdue",
        payload={
            "gate_id": gate.gate_id,
            "task": gate.task,
            "due_at": due_at.isoformat(),
            "approvals": gate.approvals,
            "quorum": gate.quorum,
            "reminder": reminder,
            "to": f"role:{role}",
            "channels": [f"{t.platform}:{t.channel}" for t in ctx.channels],
        },
    )
    await enqueue_notices(
        conn,
        key=f"gate_overdue:{gate.gate_id}",
        template="gate_overdue",
        close_id=close.close_id,
        channels=ctx.channels,
        gate_id=gate.gate_id,
    )
    where = f"{len(ctx.channels)} channel(s)" if ctx.channels else "the trace only (no chat channel configured)"
    report.steps.append(f"{gate.task}: gate {gate.gate_id[:8]} is overdue: reminder for role {role} in {where}")


def overdue_reminder(
    *, task: str, entity: str, period: str, role: str, missing: int, due_at: Any, expires_at: Any
) -> str:
    expiry = f" If nobody decides by {_utc(expires_at)}, it expires and the task runs again." if expires_at else ""
    return (
        f"Reminder for role {role}: the {task} gate of {entity} {period} was due {_utc(due_at)} and still needs"
        f" {missing} approval(s). Waiting never approves it.{expiry}"
    )


def _utc(moment: Any) -> str:
    return str(moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"))


async def _requeue(
    conn: AsyncConnection[Any],
    close: CloseRecord,
    ctx: EngineContext,
    gate: GateView,
    report: AdvanceReport,
    *,
    kind: str,
) -> None:
    """Run the task again as a new attempt; the next attempt opens a fresh gate over fresh work."""
    tasks = await _task_rows(conn, close.close_id)
    _, attempt, _ = tasks[gate.task]
    await _set_task(
        conn,
        close.close_id,
        gate.task,
        status="pending",
        expect=("awaiting_gate", "halted"),
        attempt=attempt + 1,
        reason=f"{kind.replace('_', ' ')}: gate {gate.gate_id}",
    )
    await append_event(
        conn,
        actor=ctx.actor,
        close_id=close.close_id,
        kind=kind,
        payload={"gate_id": gate.gate_id, "task": gate.task, "next_attempt": attempt + 1},
    )
    report.steps.append(f"{gate.task}: gate {gate.gate_id[:8]} expired undecided; re-running as attempt {attempt + 1}")


async def _apply_one(
    conn: AsyncConnection[Any], close: CloseRecord, ctx: EngineContext, gate: GateView, report: AdvanceReport
) -> None:
    tasks = await _task_rows(conn, close.close_id)
    _, attempt, result = tasks[gate.task]
    event = {"gate_id": gate.gate_id, "task": gate.task, "gate_kind": gate.kind, "outcome": gate.status}
    if gate.status == "rejected":
        await _set_task(
            conn,
            close.close_id,
            gate.task,
            status="rejected",
            expect=("awaiting_gate", "halted"),
            reason=f"gate {gate.gate_id} rejected",
        )
        await append_event(conn, actor=ctx.actor, close_id=close.close_id, kind="gate_rejected_applied", payload=event)
        report.steps.append(f"{gate.task}: gate rejected, task stopped")
        return
    if gate.kind == "escalation":
        await _set_task(
            conn,
            close.close_id,
            gate.task,
            status="pending",
            expect=("halted",),
            attempt=attempt + 1,
            reason=f"re-run approved after halt (gate {gate.gate_id})",
        )
        await append_event(
            conn,
            actor=ctx.actor,
            close_id=close.close_id,
            kind="task_requeued",
            payload={**event, "next_attempt": attempt + 1},
        )
        report.steps.append(f"{gate.task}: escalation approved, re-running as attempt {attempt + 1}")
        return
    await _complete_task(conn, close, ctx, ctx.checklist.task(gate.task), attempt, result or {}, report)
    await append_event(conn, actor=ctx.actor, close_id=close.close_id, kind="gate_passed", payload=event)


async def _complete_task(
    conn: AsyncConnection[Any],
    close: CloseRecord,
    ctx: EngineContext,
    task: ChecklistTask,
    attempt: int,
    result: Mapping[str, Any],
    report: AdvanceReport,
) -> None:
    """Apply the task's effects (postings, period close) and mark it done, in the caller's transaction."""
    if task.id == "accruals" and result.get("journal"):
        journal = result["journal"]
        request = JournalRequest(
            idempotency_key=f"close:{close.close_id}:accruals:attempt:{attempt}",
            entity=close.entity,
            period=close.period,
            journal_date=date.fromisoformat(journal["date"]),
            memo=journal["memo"],
            lines=[
                JournalLine(line["account"], Decimal(line["amount"]), line["description"]) for line in journal["lines"]
            ],
            source_close=close.close_id,
            source_task=task.id,
        )
        posted = await post_journal(conn, request, posted_by=ctx.actor)
        report.steps.append(f"accruals: journal {posted.journal_id} posted ({result.get('total')})")
    if task.id == "close_signoff":
        async with conn.cursor() as cur:
            await cur.execute(
                "UPDATE accounting_period SET status = 'closed', closed_at = now(), closed_by_close = %s"
                " WHERE entity = %s AND period = %s AND status = 'open'",
                (close.close_id, close.entity, close.period),
            )
        await append_event(
            conn,
            actor=ctx.actor,
            close_id=close.close_id,
            kind="period_closed",
            payload={"entity": close.entity, "period": close.period},
        )
        report.steps.append(f"period {close.entity} {close.period} closed")
    await _set_task(conn, close.close_id, task.id, status="done", expect=("awaiting_gate", "running", "pending"))
    await append_event(conn, actor=ctx.actor, close_id=close.close_id, kind="task_done", payload={"task": task.id})


# --- tasks -------------------------------------------------------------------------------------------------


async def _run_ready_tasks(
    session: _CloseSession,
    close: CloseRecord,
    ctx: EngineContext,
    report: AdvanceReport,
    failed_this_call: set[str],
) -> bool:
    progressed = False
    for task_id in ctx.checklist.topological_order():
        conn = session.conn
        tasks = await _task_rows(conn, close.close_id)
        status, attempt, _ = tasks[task_id]
        task = ctx.checklist.task(task_id)
        if status not in ("pending", "running") or task_id in failed_this_call:
            continue
        if any(tasks[dep][0] != "done" for dep in task.depends_on):
            continue
        if status == "running" and await dispatch_in_flight(conn, close.close_id, task_id, attempt):
            failed_this_call.add(task_id)
            report.steps.append(f"{task_id}: another worker is calling the specialist")
            continue
        async with conn.transaction():
            if not await _set_task(conn, close.close_id, task_id, status="running", expect=(status,)):
                continue
            await append_event(
                conn,
                actor=ctx.actor,
                close_id=close.close_id,
                kind="task_started",
                payload={"task": task_id, "attempt": attempt, "resumed": status != "pending"},
            )
        try:
            result = await _perform(session, close, ctx, task, attempt)
        except DispatchInFlight as busy:
            failed_this_call.add(task_id)
            report.steps.append(str(busy))
            continue
        except DispatchBackingOff as waiting:
            conn = session.conn
            async with conn.transaction():
                await _set_task(
                    conn, close.close_id, task_id, status="pending", expect=("running",), reason=str(waiting)
                )
            failed_this_call.add(task_id)
            report.steps.append(f"{task_id}: waiting to retry the specialist ({waiting.retry_in_s:.1f}s)")
            continue
        except DispatchFailed as failure:
            conn = session.conn
            async with conn.transaction():
                await _set_task(
                    conn,
                    close.close_id,
                    task_id,
                    status="pending",
                    expect=("running",),
                    reason=f"retrying after failure {failure.failures} of {MAX_DISPATCH_FAILURES}: {failure.reason}"[
                        :500
                    ],
                )
            failed_this_call.add(task_id)
            report.steps.append(
                f"{task_id}: specialist failed ({failure.failures} of {MAX_DISPATCH_FAILURES}), will retry"
            )
            continue
        except (DispatchDeadLettered, UngroundedFigureError, PostingRefused, ValueError) as exc:
            conn = session.conn
            async with conn.transaction():
                await _set_task(conn, close.close_id, task_id, status="failed", expect=("running",), reason=str(exc))
                await append_event(
                    conn,
                    actor=ctx.actor,
                    close_id=close.close_id,
                    kind="task_failed",
                    payload={"task": task_id, "attempt": attempt, "reason": str(exc)[:500]},
                )
            failed_this_call.add(task_id)
            report.steps.append(f"{task_id}: failed: {exc}")
            continue
        kill_point("task.after_result")
        progressed |= await _record_result(session.conn, close, ctx, task, attempt, result, report)
    return progressed


async def _perform(
    session: _CloseSession, close: CloseRecord, ctx: EngineContext, task: ChecklistTask, attempt: int
) -> dict[str, Any]:
    if task.specialist is None:
        return await _signoff_summary(session.conn, close)
    payload = await _specialist_input(session.conn, close, ctx.policy, task)
    async with session.let_go():  # no connection and no lock while the specialist works
        outcome = await _dispatch(session.connect, ctx, close, task, attempt, payload)
    result = outcome.result
    if task.specialist == "variance":
        # The specialist grounds its own draft; the engine does not take its word for it.
        ground_figures(
            str(result.get("narrative", "")),
            inputs.queried_values(payload),
            ctx.policy.variance.grounding_tolerance,
        )
    return result


async def _dispatch(
    connect: Connect,
    ctx: EngineContext,
    close: CloseRecord,
    task: ChecklistTask,
    attempt: int,
    payload: dict[str, Any],
) -> DispatchOutcome:
    assert task.specialist is not None
    return await dispatch_once(
        connect,
        ctx.call,
        close_id=close.close_id,
        task=task.id,
        attempt=attempt,
        specialist=task.specialist,
        payload=payload,
        actor=ctx.actor,
        wait=False,
    )


async def _specialist_input(
    conn: AsyncConnection[Any], close: CloseRecord, policy: Policy, task: ChecklistTask
) -> dict[str, Any]:
    book = close.book_set_id
    if task.id == "bank_reconciliation":
        return await inputs.bank_reconciliation_input(conn, book, policy)
    if task.id == "ap_reconciliation":
        return await inputs.subledger_input(conn, book, policy, "ap")
    if task.id == "ar_reconciliation":
        return await inputs.subledger_input(conn, book, policy, "ar")
    if task.id == "intercompany":
        return await inputs.intercompany_input(conn, book, policy)
    if task.id == "accruals":
        return await inputs.accruals_input(conn, book, close.period, policy)
    if task.id == "variance_analysis":
        return await inputs.variance_input(conn, book, close.entity, close.period, policy)
    raise ValueError(f"checklist task {task.id!r} has no input query; add one in engine/inputs.py")


async def _signoff_summary(conn: AsyncConnection[Any], close: CloseRecord) -> dict[str, Any]:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT task, status, attempt FROM close_task WHERE close_id = %s ORDER BY task",
            (close.close_id,),
        )
        tasks = [{"task": r[0], "status": r[1], "attempt": int(r[2])} for r in await cur.fetchall()]
        await cur.execute(
            "SELECT j.journal_id, j.memo, sum(l.amount) FILTER (WHERE l.amount > 0)"
            " FROM journal j JOIN journal_line l USING (journal_id)"
            " WHERE j.entity = %s AND j.period = %s GROUP BY j.journal_id ORDER BY j.journal_id",
            (close.entity, close.period),
        )
        journals = [{"journal_id": int(r[0]), "memo": r[1], "debits": str(r[2])} for r in await cur.fetchall()]
    return {
        "kind": "signoff",
        "entity": close.entity,
        "period": close.period,
        "tasks": tasks,
        "journals": journals,
    }


def _gate_amount(task: ChecklistTask, result: Mapping[str, Any]) -> Decimal | None:
    if task.id == "accruals" and result.get("total") is not None:
        return Decimal(str(result["total"]))
    if task.id == "bank_reconciliation":
        return sum(
            (abs(Decimal(str(a.get("unmatched_bank_amount", "0")))) for a in result.get("accounts", [])),
            Decimal("0"),
        )
    return None


async def _record_result(
    conn: AsyncConnection[Any],
    close: CloseRecord,
    ctx: EngineContext,
    task: ChecklistTask,
    attempt: int,
    result: dict[str, Any],
    report: AdvanceReport,
) -> bool:
    """Record the task's result once; False when another worker recorded it while our specialist call ran."""
    prepared_by = AGENT_PRINCIPALS.get(task.specialist or "", ctx.actor)
    requesters = await _requesters(conn, close, task)
    async with conn.transaction():
        async with conn.cursor() as cur:
            await cur.execute(
                "SELECT status, attempt FROM close_task WHERE close_id = %s AND task = %s FOR UPDATE",
                (close.close_id, task.id),
            )
            current = await cur.fetchone()
        if current is None or current[0] != "running" or int(current[1]) != attempt:
            report.steps.append(f"{task.id}: result already recorded by another worker")
            return False
        if result.get("halted"):
            reason = str(result.get("halt_reason") or "specialist halted the task")
            await _set_task(
                conn,
                close.close_id,
                task.id,
                status="halted",
                expect=("running",),
                result=result,
                reason=reason,
            )
            await append_event(
                conn,
                actor=prepared_by,
                close_id=close.close_id,
                kind="task_halted",
                payload={"task": task.id, "attempt": attempt, "reason": reason, "to": ctx.actor},
            )
            gate_id = await open_gate(
                conn,
                close_id=close.close_id,
                task=task.id,
                attempt=attempt,
                requirement=derive_escalation_gate(ctx.policy, task, reason),
                summary={"reason": reason, "result": _gate_summary(result)},
                prepared_by=prepared_by,
                requested_by=requesters,
                actor=ctx.actor,
            )
            await enqueue_gate_cards(conn, close_id=close.close_id, gate_id=gate_id, channels=ctx.channels)
            report.steps.append(f"{task.id}: HALTED: {reason} (escalation gate {gate_id})")
            return True
        requirement = derive_gate(ctx.policy, task, _gate_amount(task, result))
        if requirement is None:
            await _set_task(conn, close.close_id, task.id, status="running", expect=("running",), result=result)
            await _complete_task(conn, close, ctx, task, attempt, result, report)
            report.steps.append(f"{task.id}: done (no gate required by policy)")
            return True
        await _set_task(
            conn,
            close.close_id,
            task.id,
            status="awaiting_gate",
            expect=("running",),
            result=result,
            reason=requirement.rule,
        )
        gate_id = await open_gate(
            conn,
            close_id=close.close_id,
            task=task.id,
            attempt=attempt,
            requirement=requirement,
            summary=_gate_summary(result),
            prepared_by=prepared_by,
            requested_by=requesters,
            actor=ctx.actor,
        )
        await enqueue_gate_cards(conn, close_id=close.close_id, gate_id=gate_id, channels=ctx.channels)
        report.steps.append(f"{task.id}: awaiting {requirement.tier} gate {gate_id} ({requirement.rule})")
    return True


async def _requesters(conn: AsyncConnection[Any], close: CloseRecord, task: ChecklistTask) -> list[str]:
    """Who asked for this work: the close's starter and, for bank reconciliation, whoever loaded the feed it read.

    Separation of duties refuses their approval of it.
    """
    people = [close.started_by]
    if task.id == "bank_reconciliation":
        async with conn.cursor() as cur:
            await cur.execute(
                "SELECT loaded_by FROM bank_feed WHERE book_set_id = %s ORDER BY feed_version DESC LIMIT 1",
                (close.book_set_id,),
            )
            row = await cur.fetchone()
        if row is not None:
            people.append(row[0])
    return people


def _gate_summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the approver needs to see on the card: figures and evidence, trimmed to card size."""
    summary: dict[str, Any] = {"kind": result.get("kind")}
    if "accounts" in result:
        summary["accounts"] = [
            {k: a.get(k) for k in ("account", "bank_lines", "gl_lines", "matched", "unmatched_share", "halt")}
            for a in result["accounts"]
        ]
    for key in ("control_account", "control_balance", "subledger_total", "difference", "total", "narrative"):
        if key in result:
            summary[key] = result[key]
    if result.get("journal"):
        summary["journal_lines"] = result["journal"]["lines"][:20]
    if "flagged" in result:
        summary["flagged"] = result["flagged"][:10]
    if "pairs" in result:
        summary["pairs"] = result["pairs"][:10]
    if "tasks" in result:
        summary["tasks"] = result["tasks"]
        summary["journals"] = result.get("journals", [])
    return summary
