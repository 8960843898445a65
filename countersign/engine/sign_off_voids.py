"""Reopen work whose sign-off a later change voided (migration sign_off_voided, docs/adr/0046).

The database records the void the moment a journal line, a GL or bank line or a new certificate version lands on what
an approved gate covered, and from then on the gate's approval counts nowhere (`gate_state` says `voided`). On its next
`advance` the engine notices: it cancels the gate if it was not applied yet, sends the task back to pending as a new
attempt (fresh work, a fresh gate, a fresh decision), records `sign_off_voided` in the close's trace naming each change,
and updates the gate's posted cards. Work that depends on a voided task and waits on an approved gate is not applied
while the void stands (`held_by_voids`); the database refuses to close the period or the run until then as well.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event
from countersign.cards.voids import void_sentence
from countersign.engine.context import AdvanceReport, EngineContext
from countersign.engine.outbox import enqueue_card_updates
from countersign.engine.runs import CloseRecord, lock_task
from countersign.engine.supervisor import move_gate, move_task
from countersign.policy import Workflow
from countersign.states import GateLifecycle, TaskState, TraceKind
from countersign.store.gates import read_gate
from countersign.store.sign_off_voids import SignOffVoid, tasks_with_standing_voids, voids_to_reopen

_REOPENED_FROM = (TaskState.DONE, TaskState.AWAITING_GATE)


async def reopen_voided_sign_offs(
    conn: AsyncConnection[Any], close: CloseRecord, ctx: EngineContext, report: AdvanceReport
) -> bool:
    """Every task whose current attempt's gate a change voided goes back to pending as the next attempt, traced and
    shown on the gate's cards; True when one did."""
    by_gate: dict[str, list[SignOffVoid]] = defaultdict(list)
    for void in await voids_to_reopen(conn, close.close_id):
        by_gate[void.gate_id].append(void)
    progressed = False
    for gate_id, changes in by_gate.items():
        first = changes[0]
        async with conn.transaction():
            task = await lock_task(conn, close.close_id, first.task)
            if task.attempt != first.attempt:
                continue  # another worker reopened it
            gate = await read_gate(conn, gate_id)
            if gate is not None and gate.lifecycle == GateLifecycle.OPEN:
                await move_gate(conn, gate_id, GateLifecycle.CANCELLED)
            sentences = [void_sentence(change, locale=ctx.locale) for change in changes]
            if not await move_task(
                conn,
                close.close_id,
                first.task,
                TaskState.PENDING,
                expect=_REOPENED_FROM,
                attempt=task.attempt + 1,
                reason=sentences[0][:500],
            ):
                continue
            await append_event(
                conn,
                actor=ctx.actor,
                close_id=close.close_id,
                kind=TraceKind.SIGN_OFF_VOIDED,
                payload={
                    "gate_id": gate_id,
                    "task": first.task,
                    "attempt": first.attempt,
                    "next_attempt": task.attempt + 1,
                    "changes": [change.facts() for change in changes],
                    "said": sentences,
                },
            )
            await enqueue_card_updates(conn, gate_id)
        report.steps.append(f"{first.task}: {sentences[0]} Running again as attempt {task.attempt + 1}.")
        progressed = True
    return progressed


async def held_by_voids(conn: AsyncConnection[Any], close: CloseRecord, workflow: Workflow) -> set[str]:
    """The tasks that depend, directly or not, on a task whose voided sign-off no fresh approval answers yet."""
    voided = await tasks_with_standing_voids(conn, close.close_id)
    if not voided:
        return set()
    held: set[str] = set()
    changed = True
    while changed:
        changed = False
        for task in workflow.tasks:
            if task.id not in held and any(dep in voided or dep in held for dep in task.depends_on):
                held.add(task.id)
                changed = True
    return held
