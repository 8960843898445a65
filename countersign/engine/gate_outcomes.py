"""Act on what people decided: apply approved and rejected gates, re-run expired ones, remind on overdue ones.

A decision without person-level proof never counts; waiting never approves anything.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event
from countersign.cards.notices import overdue_reminder_for
from countersign.drill_hooks.kill_points import KillPoint, kill_point
from countersign.engine.context import AdvanceReport, EngineContext
from countersign.engine.gates import (
    UnprovenDecision,
    mark_gate_applied,
    mark_gate_escalated,
    mark_gate_expired,
    unproven_decisions,
)
from countersign.engine.outbox import enqueue_notices
from countersign.engine.rerouting import reroute_overdue
from countersign.engine.runs import CloseRecord, lock_task
from countersign.engine.sign_off_voids import held_by_voids
from countersign.engine.supervisor import move_task
from countersign.engine.task_runner import complete_task
from countersign.engine.workflows import TaskContext
from countersign.policy import ESCALATION, EscalationReason, Workflow
from countersign.specialists.narration import MODEL_OFF_FIELD, MODEL_OFF_REASONS
from countersign.states import DECIDED, GateLifecycle, GateStatus, TaskState, TraceKind
from countersign.store.gates import GateRecord, read_gates_of_close

_WAITING = (TaskState.AWAITING_GATE, TaskState.HALTED)


async def apply_gate_outcomes(
    conn: AsyncConnection[Any], close: CloseRecord, workflow: Workflow, ctx: EngineContext, report: AdvanceReport
) -> bool:
    progressed = False
    held = await held_by_voids(conn, close, workflow)  # downstream of a voided sign-off: wait for its new approval
    for gate in await read_gates_of_close(conn, close.close_id):
        if gate.lifecycle != GateLifecycle.OPEN:
            continue
        if gate.status is GateStatus.EXPIRED:
            async with conn.transaction():
                if await mark_gate_expired(conn, gate.gate_id):
                    await _run_again_after_expiry(conn, close, ctx, gate, report)
            progressed = True
            continue
        if gate.status is GateStatus.OPEN and gate.overdue and not gate.escalated:
            async with conn.transaction():
                if await mark_gate_escalated(conn, gate.gate_id):
                    await _remind_overdue(conn, close, ctx, gate, report)
                    await reroute_overdue(conn, ctx, gate, report)
            continue
        if gate.status not in DECIDED:
            continue
        if gate.task in held:
            report.steps.append(f"{gate.task}: gate {gate.gate_id[:8]} waits: work it depends on was voided")
            continue
        unproven = await unproven_decisions(conn, gate.gate_id)
        if unproven:  # a decision without person-level proof never counts: the gate is not applied
            await _block_on_unproven(conn, close, ctx, gate, unproven, report)
            continue
        kill_point(KillPoint.GATES_BEFORE_APPLY)
        async with conn.transaction():
            if not await mark_gate_applied(conn, gate.gate_id):
                continue
            await _apply_one(conn, close, workflow, ctx, gate, report)
        progressed = True
    return progressed


async def _block_on_unproven(
    conn: AsyncConnection[Any],
    close: CloseRecord,
    ctx: EngineContext,
    gate: GateRecord,
    unproven: list[UnprovenDecision],
    report: AdvanceReport,
) -> None:
    """Stop the gate's task (so the close is blocked, reason naming gate and principals) and trace it once."""
    who = ", ".join(f"{u.principal_id} ({u.channel}: {u.problem})" for u in unproven)
    reason = f"gate {gate.gate_id}: decision without valid person-level proof by {who}"[:500]
    async with conn.transaction():
        if not await move_task(conn, close.close_id, gate.task, TaskState.FAILED, expect=_WAITING, reason=reason):
            return
        await append_event(
            conn,
            actor=ctx.actor,
            close_id=close.close_id,
            kind=TraceKind.DECISION_PROOF_INVALID,
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


async def _remind_overdue(
    conn: AsyncConnection[Any], close: CloseRecord, ctx: EngineContext, gate: GateRecord, report: AdvanceReport
) -> None:
    """An overdue gate gets a reminder in the close's channels and a trace event. It is never approved by waiting."""
    reminder = overdue_reminder_for(gate)
    await append_event(
        conn,
        actor=ctx.actor,
        close_id=close.close_id,
        kind=TraceKind.GATE_OVERDUE,
        payload={
            "gate_id": gate.gate_id,
            "task": gate.task,
            "due_at": gate.due_at.isoformat(),
            "approvals": gate.approvals,
            "quorum": gate.quorum,
            "reminder": reminder,
            "to": f"role:{gate.approver_role}",
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
    report.steps.append(
        f"{gate.task}: gate {gate.gate_id[:8]} is overdue: reminder for role {gate.approver_role} in {where}"
    )


async def _run_again_after_expiry(
    conn: AsyncConnection[Any], close: CloseRecord, ctx: EngineContext, gate: GateRecord, report: AdvanceReport
) -> None:
    """An undecided gate expires into an escalated re-run: fresh work, and a human gate over it whatever its tier."""
    task = await lock_task(conn, close.close_id, gate.task)
    await move_task(
        conn,
        close.close_id,
        gate.task,
        TaskState.PENDING,
        expect=_WAITING,
        attempt=task.attempt + 1,
        reason=f"gate expired: gate {gate.gate_id}",
        escalation=EscalationReason.GATE_EXPIRED.value,
    )
    await append_event(
        conn,
        actor=ctx.actor,
        close_id=close.close_id,
        kind=TraceKind.GATE_EXPIRED,
        payload={
            "gate_id": gate.gate_id,
            "task": gate.task,
            "next_attempt": task.attempt + 1,
            "escalation": EscalationReason.GATE_EXPIRED.value,
        },
    )
    report.steps.append(
        f"{gate.task}: gate {gate.gate_id[:8]} expired undecided; re-running as attempt {task.attempt + 1}"
    )


async def _apply_one(
    conn: AsyncConnection[Any],
    close: CloseRecord,
    workflow: Workflow,
    ctx: EngineContext,
    gate: GateRecord,
    report: AdvanceReport,
) -> None:
    task = await lock_task(conn, close.close_id, gate.task)
    event = {"gate_id": gate.gate_id, "task": gate.task, "gate_kind": gate.kind, "outcome": gate.status}
    if gate.status is GateStatus.REJECTED:
        await move_task(
            conn,
            close.close_id,
            gate.task,
            TaskState.REJECTED,
            expect=_WAITING,
            reason=f"gate {gate.gate_id} rejected",
        )
        await append_event(
            conn, actor=ctx.actor, close_id=close.close_id, kind=TraceKind.GATE_REJECTED_APPLIED, payload=event
        )
        report.steps.append(f"{gate.task}: gate rejected, task stopped")
        if gate.kind != ESCALATION:
            definition = workflow.task(gate.task)
            escalation = EscalationReason(task.escalation) if task.escalation else None
            tc = TaskContext(
                close, definition, task.attempt, ctx.policy, ctx.actor, escalation, ctx.locale, ctx.channels
            )
            report.steps += await ctx.handler(definition).rejected(conn, tc, task.result or {})
        return
    if gate.kind == ESCALATION:
        # Approving a reason that asking the model again would meet again accepts the deterministic text: the next
        # attempt does not ask the model (countersign/engine/task_runner.py `model_off_reason`), and its result is
        # gated again.
        off = task.escalation if task.escalation in MODEL_OFF_REASONS and workflow.task(gate.task).specialist else None
        await move_task(
            conn,
            close.close_id,
            gate.task,
            TaskState.PENDING,
            expect=(TaskState.HALTED,),
            attempt=task.attempt + 1,
            reason=f"re-run approved after halt (gate {gate.gate_id})",
        )
        await append_event(
            conn,
            actor=ctx.actor,
            close_id=close.close_id,
            kind=TraceKind.TASK_REQUEUED,
            payload={**event, "next_attempt": task.attempt + 1, **({} if off is None else {MODEL_OFF_FIELD: off})},
        )
        without = "" if off is None else f" without the model ({off}: the deterministic text, flagged)"
        report.steps.append(f"{gate.task}: escalation approved, re-running as attempt {task.attempt + 1}{without}")
        return
    definition = workflow.task(gate.task)
    escalation = EscalationReason(task.escalation) if task.escalation else None
    tc = TaskContext(close, definition, task.attempt, ctx.policy, ctx.actor, escalation, ctx.locale, ctx.channels)
    await complete_task(conn, ctx, tc, ctx.handler(definition), task.result or {}, report)
    await append_event(conn, actor=ctx.actor, close_id=close.close_id, kind=TraceKind.GATE_PASSED, payload=event)
