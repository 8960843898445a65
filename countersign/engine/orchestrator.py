"""`advance(close_id)`: read the tables, do every step that is ready, record it, return.

Nothing survives between calls but the tables. A process killed anywhere is replaced by one that calls
`advance` again: running tasks re-dispatch under the same key (the stored result comes back), gates are
opened once per (close, task, attempt), postings carry keys, and gate outcomes are applied once.

The orchestrator runs any workflow: the close's `workflow` names its file, each task's handler does what is
particular to it, and every state change goes through the supervisor's transition tables.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import seal_pending
from countersign.audit.transparency_log import latest_checkpoint, sign_log_checkpoint
from countersign.engine.close_session import CloseSession
from countersign.engine.context import AdvanceReport, EngineContext, UnknownWorkflow, workflows_by_name
from countersign.engine.gate_outcomes import apply_gate_outcomes
from countersign.engine.leases import Connect, connect_to
from countersign.engine.outbox import enqueue_notices
from countersign.engine.runs import CloseRecord, load_close, refresh_close_status
from countersign.engine.sign_off_voids import reopen_voided_sign_offs
from countersign.engine.task_runner import run_ready_tasks
from countersign.states import RunState

MAX_ROUNDS = 32

__all__ = [
    "MAX_ROUNDS",
    "AdvanceReport",
    "EngineContext",
    "UnknownWorkflow",
    "advance",
    "workflows_by_name",
]


async def advance(db: AsyncConnection[Any] | Connect, close_id: str, ctx: EngineContext) -> AdvanceReport:
    """Advance one close as far as it can go without a person.

    `db` is a way to connect (the connection goes back to it around every specialist call) or an autocommit
    connection the caller keeps (then only the lock is let go around the calls).
    """
    connect = connect_to(db)
    async with connect() as conn:
        close = await load_close(conn, close_id)
    report = AdvanceReport(close.close_id, close.status)
    if close.status == RunState.CLOSED:
        return report
    workflow = ctx.workflow(close.workflow)
    session = CloseSession(connect, close.close_id)
    if not await session.acquire(wait=False):
        report.busy = True
        report.steps.append("another worker is advancing this close")
        return report
    try:
        skipped: set[str] = set()  # tasks that failed or wait on a specialist: not tried again in this call
        for _ in range(MAX_ROUNDS):
            progressed = await reopen_voided_sign_offs(session.conn, close, ctx, report)
            progressed |= await apply_gate_outcomes(session.conn, close, workflow, ctx, report)
            progressed |= await run_ready_tasks(session, close, workflow, ctx, report, skipped)
            if not progressed:
                break
        conn = session.conn
        report.status = await refresh_close_status(conn, close.close_id, ctx.actor)
        await seal_pending(conn)
        if report.status == RunState.CLOSED and ctx.signer is not None:  # it closed now: a closed close returned above
            await _sign_closing_checkpoint(conn, close, ctx, report)
    finally:
        await session.release()
    return report


async def _sign_closing_checkpoint(
    conn: AsyncConnection[Any], close: CloseRecord, ctx: EngineContext, report: AdvanceReport
) -> None:
    """Sign-off always ends with a signed checkpoint, announced in the close's channels as a witness.

    When another signer (a worker's checkpoint job) signed everything sealed a moment before, nothing is new to sign:
    that checkpoint already covers the sign-off and is the one announced."""
    assert ctx.signer is not None
    stored = await sign_log_checkpoint(conn, ctx.signer, ctx.origin, actor=ctx.actor, close_id=close.close_id)
    if stored is not None:
        key, step = f"checkpoint:{stored.tree_size}", f"trace checkpoint signed at tree size {stored.tree_size}"
    else:
        stored = await latest_checkpoint(conn)
        if stored is None:  # unreachable: signing finds nothing new only when a checkpoint covers the whole log
            return
        key = f"checkpoint:{stored.tree_size}:{close.close_id}"
        step = f"trace checkpoint at tree size {stored.tree_size}, signed a moment before, covers the sign-off"
    async with conn.transaction():
        await enqueue_notices(
            conn,
            key=key,
            template="checkpoint",
            args={"tree_size": stored.tree_size},
            close_id=close.close_id,
            channels=ctx.channels,
        )
    report.steps.append(step)
