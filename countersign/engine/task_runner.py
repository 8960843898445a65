"""Run every task whose dependencies are done: call its specialist (or compute it), then record the result.

A result either completes the task (policy asks no gate), opens a gate, or escalates: a halted specialist, a
check the handler refuses, a dead-lettered specialist. An escalation halts the task behind a gate whose
approver is the reason's owner in policy; work that was ever escalated needs a human gate before it completes.

The attempt after a person approved an escalation that asking the model again would only repeat (no recorded
response, a bound: `countersign.specialists.narration.MODEL_OFF_REASONS`) tells its specialist `model_off`: the
deterministic
text ships, flagged, and the result goes to its gate like any other (docs/adr/0036).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event
from countersign.drill_hooks.kill_points import KillPoint, kill_point
from countersign.engine.books import account_names, recorded_rate
from countersign.engine.close_session import CloseSession
from countersign.engine.context import AdvanceReport, EngineContext
from countersign.engine.dispatch import (
    AGENT_PRINCIPALS,
    MAX_DISPATCH_FAILURES,
    DispatchBackingOff,
    DispatchDeadLettered,
    DispatchFailed,
    DispatchInFlight,
    dispatch_in_flight,
    dispatch_once,
)
from countersign.engine.gates import open_gate
from countersign.engine.outbox import enqueue_gate_cards
from countersign.engine.postings import PostingRefused
from countersign.engine.runs import CloseRecord, lock_task, task_rows
from countersign.engine.supervisor import move_task
from countersign.engine.workflows import Escalate, TaskContext, TaskHandler
from countersign.policy import (
    EscalationReason,
    FxRate,
    GateRequirement,
    Policy,
    Workflow,
    always_human_reasons,
    convert,
    derive_escalation_gate,
    derive_gate,
)
from countersign.specialists.narration import MODEL_OFF_FIELD, MODEL_OFF_REASONS
from countersign.states import TaskState, TraceKind


async def run_ready_tasks(
    session: CloseSession,
    close: CloseRecord,
    workflow: Workflow,
    ctx: EngineContext,
    report: AdvanceReport,
    skipped: set[str],
) -> bool:
    progressed = False
    for task_id in workflow.topological_order():
        conn = session.conn
        rows = await task_rows(conn, close.close_id)
        row = rows[task_id]
        task = workflow.task(task_id)
        if row.status not in (TaskState.PENDING, TaskState.RUNNING) or task_id in skipped:
            continue
        if any(rows[dependency].status != TaskState.DONE for dependency in task.depends_on):
            continue
        if row.status == TaskState.RUNNING and await dispatch_in_flight(conn, close.close_id, task_id, row.attempt):
            skipped.add(task_id)
            report.steps.append(f"{task_id}: another worker is calling the specialist")
            continue
        tc = TaskContext(
            close, task, row.attempt, ctx.policy, ctx.actor, _escalation(row.escalation), ctx.locale, ctx.channels
        )
        off = model_off_reason(tc)
        async with conn.transaction():
            if not await move_task(conn, close.close_id, task_id, TaskState.RUNNING, expect=(row.status,)):
                continue
            await append_event(
                conn,
                actor=ctx.actor,
                close_id=close.close_id,
                kind=TraceKind.TASK_STARTED,
                payload={
                    "task": task_id,
                    "attempt": row.attempt,
                    "resumed": row.status != TaskState.PENDING,
                    **({} if off is None else {MODEL_OFF_FIELD: off}),
                },
            )
        handler = ctx.handler(task)
        try:
            result = await _perform(session, ctx, tc, handler)
        except DispatchInFlight as busy:
            skipped.add(task_id)
            report.steps.append(str(busy))
            continue
        except DispatchBackingOff as waiting:
            await _back_to_pending(session.conn, tc, str(waiting))
            skipped.add(task_id)
            report.steps.append(f"{task_id}: waiting to retry the specialist ({waiting.retry_in_s:.1f}s)")
            continue
        except DispatchFailed as failure:
            why = f"retrying after failure {failure.failures} of {MAX_DISPATCH_FAILURES}: {failure.reason}"
            await _back_to_pending(session.conn, tc, why[:500])
            skipped.add(task_id)
            report.steps.append(
                f"{task_id}: specialist failed ({failure.failures} of {MAX_DISPATCH_FAILURES}), will retry"
            )
            continue
        except DispatchDeadLettered as dead:
            await escalate(
                session.conn, ctx, tc, handler, Escalate(EscalationReason.SPECIALIST_DEAD_LETTERED, str(dead)), report
            )
            skipped.add(task_id)
            progressed = True
            continue
        except Escalate as escalation:
            await escalate(session.conn, ctx, tc, handler, escalation, report)
            skipped.add(task_id)
            progressed = True
            continue
        except (PostingRefused, ValueError) as exc:
            await _fail(session.conn, ctx, tc, str(exc))
            skipped.add(task_id)
            report.steps.append(f"{task_id}: failed: {exc}")
            continue
        kill_point(KillPoint.TASK_AFTER_RESULT)
        progressed |= await _record_result(session.conn, ctx, tc, handler, result, report)
    return progressed


async def _perform(session: CloseSession, ctx: EngineContext, tc: TaskContext, handler: TaskHandler) -> dict[str, Any]:
    if tc.task.specialist is None:
        return await handler.compute(session.conn, tc)
    payload = await handler.prepared_input(session, ctx.call, tc)
    off = model_off_reason(tc)
    if off is not None:  # derived from the stored escalation, so a retried call sends the same payload (same key)
        payload = {**payload, MODEL_OFF_FIELD: off}
    async with session.let_go():  # no connection and no lock while the specialist works
        outcome = await dispatch_once(
            session.connect,
            ctx.call,
            close_id=tc.close.close_id,
            task=tc.task.id,
            attempt=tc.attempt,
            specialist=tc.task.specialist,
            payload=payload,
            actor=ctx.actor,
            wait=False,
        )
    handler.check_result(tc, payload, outcome.result)
    return outcome.result


def model_off_reason(tc: TaskContext) -> str | None:
    """The reason this attempt's specialist must not ask the model, or None.

    A task's `escalation` names its latest escalation and is never cleared; an attempt runs with it set only after a
    person approved that escalation (or its gate expired, which records `gate_expired` instead). When the reason is
    one asking the model again would meet again, approving it accepted the deterministic text the card showed.
    """
    if tc.task.specialist is None or tc.escalation is None or tc.escalation.value not in MODEL_OFF_REASONS:
        return None
    return tc.escalation.value


async def _back_to_pending(conn: AsyncConnection[Any], tc: TaskContext, reason: str) -> None:
    async with conn.transaction():
        await _leave_running(conn, tc, TaskState.PENDING, reason=reason)


async def _leave_running(
    conn: AsyncConnection[Any],
    tc: TaskContext,
    to: TaskState,
    *,
    result: Mapping[str, Any] | None = None,
    reason: str | None = None,
    escalation: str | None = None,
) -> bool:
    """Move the running task to `to` (storing its result, reason and escalation); False when it was not running."""
    return await move_task(
        conn,
        tc.close.close_id,
        tc.task.id,
        to,
        expect=(TaskState.RUNNING,),
        result=result,
        reason=reason,
        escalation=escalation,
    )


async def _fail(conn: AsyncConnection[Any], ctx: EngineContext, tc: TaskContext, reason: str) -> None:
    async with conn.transaction():
        await _leave_running(conn, tc, TaskState.FAILED, reason=reason[:500])
        await append_event(
            conn,
            actor=ctx.actor,
            close_id=tc.close.close_id,
            kind=TraceKind.TASK_FAILED,
            payload={"task": tc.task.id, "attempt": tc.attempt, "reason": reason[:500]},
        )


def _prepared_by(ctx: EngineContext, tc: TaskContext) -> str:
    return AGENT_PRINCIPALS.get(tc.task.specialist or "", ctx.actor)


async def escalate(
    conn: AsyncConnection[Any],
    ctx: EngineContext,
    tc: TaskContext,
    handler: TaskHandler,
    escalation: Escalate,
    report: AdvanceReport,
    result: dict[str, Any] | None = None,
) -> None:
    """Halt the task behind an escalation gate for the reason's owner; only a person's decision moves it on."""
    prepared_by = _prepared_by(ctx, tc)
    detail = escalation.detail[:500]
    requesters = await handler.requesters(conn, tc)
    async with conn.transaction():
        if not await _leave_running(
            conn, tc, TaskState.HALTED, result=result, reason=detail, escalation=escalation.reason.value
        ):
            report.steps.append(f"{tc.task.id}: result already recorded by another worker")
            return
        await append_event(
            conn,
            actor=prepared_by,
            close_id=tc.close.close_id,
            kind=TraceKind.TASK_HALTED,
            payload={
                "task": tc.task.id,
                "attempt": tc.attempt,
                "reason": detail,
                "escalation": escalation.reason.value,
                "to": ctx.actor,
            },
        )
        requirement = derive_escalation_gate(ctx.policy, tc.task, escalation.reason, detail)
        summary = {
            "reason": detail,
            "escalation": escalation.reason.value,
            "result": handler.gate_summary(result or {}),
        }
        gate_id = await _open_gate_with_cards(conn, ctx, tc, requirement, summary, prepared_by, requesters)
    report.steps.append(f"{tc.task.id}: HALTED: {detail} (escalation {escalation.reason.value}, gate {gate_id})")


async def _record_result(
    conn: AsyncConnection[Any],
    ctx: EngineContext,
    tc: TaskContext,
    handler: TaskHandler,
    result: dict[str, Any],
    report: AdvanceReport,
) -> bool:
    """Record the task's result once; False when another worker recorded it while our specialist call ran."""
    async with conn.transaction():
        current = await lock_task(conn, tc.close.close_id, tc.task.id)
        if current.status != TaskState.RUNNING or current.attempt != tc.attempt:
            report.steps.append(f"{tc.task.id}: result already recorded by another worker")
            return False
        await _trace_model_steps(conn, ctx, tc, result)
        if result.get("halted"):
            reason = str(result.get("halt_reason") or "specialist halted the task")
            try:
                kind = handler.halt_reason(result)
            except ValueError as unknown:
                await _fail(conn, ctx, tc, str(unknown))
                report.steps.append(f"{tc.task.id}: failed: {unknown}")
                return True
            await escalate(conn, ctx, tc, handler, Escalate(kind, reason), report, result=result)
            return True
        escalated = _escalation(current.escalation)
        amount = handler.gate_amount(result)
        fx = await _close_rate(conn, ctx.policy, tc) if amount is not None else None
        if amount is not None and fx is None and _needs_rate(ctx.policy, tc):
            missing = Escalate(
                EscalationReason.MISSING_PARAMETER,
                f"{tc.close.entity} keeps its books in {tc.currency} and risk.yaml's thresholds are in "
                f"{ctx.policy.currency}: the books record no {tc.currency}->{ctx.policy.currency} rate (rates.csv)",
            )
            await escalate(conn, ctx, tc, handler, missing, report, result=result)
            return True
        always_human = always_human_reasons(
            ctx.policy,
            tc.close.entity,
            await account_names(conn, tc.close.book_set_id, handler.gate_accounts(result)),
            await handler.gate_events(conn, tc, result),
        )
        requirement = derive_gate(
            ctx.policy,
            tc.task,
            amount,
            escalated=escalated,
            findings=handler.gate_findings(result),
            entity=tc.close.entity,
            fx=fx,
            always_human=always_human,
        )
        if requirement is None:
            await _leave_running(conn, tc, TaskState.RUNNING, result=result)
            await complete_task(conn, ctx, tc, handler, result, report)
            report.steps.append(f"{tc.task.id}: done (no gate required by policy)")
            return True
        await _leave_running(conn, tc, TaskState.AWAITING_GATE, result=result, reason=requirement.rule)
        gate_id = await _open_gate_with_cards(
            conn,
            ctx,
            tc,
            requirement,
            handler.gate_summary(result),
            _prepared_by(ctx, tc),
            await handler.requesters(conn, tc),
            amount=amount,
            due_by=handler.gate_due_by(result),
            fx=fx,
            accounts=handler.gate_accounts(result),
        )
    report.steps.append(f"{tc.task.id}: awaiting {requirement.tier} gate {gate_id} ({requirement.rule})")
    return True


async def _open_gate_with_cards(
    conn: AsyncConnection[Any],
    ctx: EngineContext,
    tc: TaskContext,
    requirement: GateRequirement,
    summary: dict[str, Any],
    prepared_by: str,
    requested_by: list[str],
    *,
    amount: Decimal | None = None,
    due_by: datetime | None = None,
    fx: FxRate | None = None,
    accounts: tuple[str, ...] = (),
) -> str:
    """Open the task attempt's gate and enqueue its card for every configured channel; returns the gate id.
    `fx` is the rate its amount was compared at, frozen into the gate's summary for the approver and the trace."""
    conversion = {} if fx is None else {"fx_rate": _rate_facts(fx, amount)}
    gate_id = await open_gate(
        conn,
        close_id=tc.close.close_id,
        task=tc.task.id,
        attempt=tc.attempt,
        requirement=requirement,
        summary={"currency": tc.currency, **summary, **conversion},  # every amount shown with its currency
        prepared_by=prepared_by,
        requested_by=requested_by,
        actor=ctx.actor,
        amount=amount,
        due_by=due_by,
        accounts=accounts,
    )
    await enqueue_gate_cards(conn, close_id=tc.close.close_id, gate_id=gate_id, channels=ctx.channels)
    return gate_id


def _needs_rate(policy: Policy, tc: TaskContext) -> bool:
    """An amount of this close is compared with the global thresholds in another currency."""
    own = policy.entity(tc.close.entity)
    return own.amount_thresholds is None and own.currency != policy.currency


async def _close_rate(conn: AsyncConnection[Any], policy: Policy, tc: TaskContext) -> FxRate | None:
    """The rate the close's books record from its currency into the policy's, when its amounts need converting."""
    if not _needs_rate(policy, tc):
        return None
    own = policy.entity(tc.close.entity)
    recorded = await recorded_rate(conn, tc.close.book_set_id, own.currency, policy.currency)
    if recorded is None:
        return None
    return FxRate(recorded.from_currency, recorded.to_currency, recorded.rate, recorded.rate_date, recorded.source)


def _rate_facts(fx: FxRate, amount: Decimal | None) -> dict[str, Any]:
    return {
        "from_currency": fx.from_currency,
        "to_currency": fx.to_currency,
        "rate": format(fx.rate.normalize(), "f"),
        "rate_date": fx.rate_date.isoformat(),
        "source": fx.source,
        "converted_amount": None if amount is None else str(convert(abs(amount), fx)),
    }


async def complete_task(
    conn: AsyncConnection[Any],
    ctx: EngineContext,
    tc: TaskContext,
    handler: TaskHandler,
    result: dict[str, Any],
    report: AdvanceReport,
) -> None:
    """Apply the task's effects and mark it done, in the caller's transaction."""
    report.steps.extend(await handler.complete(conn, tc, result))
    await move_task(
        conn, tc.close.close_id, tc.task.id, TaskState.DONE, expect=(TaskState.AWAITING_GATE, TaskState.RUNNING)
    )
    await append_event(
        conn, actor=ctx.actor, close_id=tc.close.close_id, kind=TraceKind.TASK_DONE, payload={"task": tc.task.id}
    )


MODEL_EVENT_KINDS = (TraceKind.MODEL_STEP, TraceKind.TOOL_CALL)
MODEL_EVENT_FIELDS = (
    "step",
    "model",
    "template_hash",
    "request_key",
    "tokens_in",
    "tokens_out",
    "latency_ms",
    "attempts",  # HTTP attempts the step made: more than one when the model server was busy (docs/adr/0038)
    "tool_calls",
    "finish_reason",
    "tool",
    "arguments_sha256",
    "result_chars",
    "purpose",
)


async def _trace_model_steps(
    conn: AsyncConnection[Any], ctx: EngineContext, tc: TaskContext, result: Mapping[str, Any]
) -> None:
    """One trace event per model step and tool call the specialist reports, written with the result it produced.

    The specialist has no database; it returns its agent loop's events under `model_steps` and the engine records
    them, as the agent, in the transaction that records the result (so a retried call records them once).
    """
    steps = result.get("model_steps")
    if not isinstance(steps, list):
        return
    for step in steps:
        if not isinstance(step, Mapping) or step.get("kind") not in MODEL_EVENT_KINDS:
            continue
        payload = {key: step[key] for key in MODEL_EVENT_FIELDS if key in step}
        await append_event(
            conn,
            actor=_prepared_by(ctx, tc),
            close_id=tc.close.close_id,
            kind=TraceKind(step["kind"]),
            payload={"task": tc.task.id, "attempt": tc.attempt, **payload},
        )


def _escalation(recorded: str | None) -> EscalationReason | None:
    return EscalationReason(recorded) if recorded else None
