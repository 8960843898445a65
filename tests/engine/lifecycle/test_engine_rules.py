"""Engine rules that a refactor could quietly break: gates from policy, grounded narratives."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from countersign.engine.orchestrator import EngineContext, advance, workflows_by_name
from countersign.engine.runs import close_status
from countersign.policy import EscalationReason, Workflow
from countersign.specialists import variance
from countersign.specialists.client import open_in_process
from tests.support import count, start_default_close


def _flip_requires_gate(checklist: Workflow) -> Workflow:
    """A checklist that lies about every gate (the loader would refuse it; the engine must not care)."""
    flipped = tuple(replace(t, requires_gate=not t.requires_gate) for t in checklist.tasks)
    return replace(checklist, tasks=flipped, digest="lying")


async def test_gates_come_from_policy_even_when_the_checklist_claims_otherwise(
    conn: Any, runtime: Any, default_books: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    async with open_in_process() as client:
        ctx = EngineContext(runtime.policy, workflows_by_name(_flip_requires_gate(runtime.workflow)), client.call)
        await advance(conn, close_id, ctx)
    status = await close_status(conn, close_id)
    gated = {g["task"] for g in status["gates"] if g["kind"] == "approval"}
    # intercompany (medium) and accruals (high) need gates per policy although the lying checklist says no;
    # AP and AR (low) need none although it says yes.
    assert {"intercompany", "accruals"} <= gated
    assert not {"ap_reconciliation", "ar_reconciliation"} & gated
    tasks = {t["task"]: t["status"] for t in status["tasks"]}
    assert tasks["ap_reconciliation"] == "done" and tasks["ar_reconciliation"] == "done"


def _variance_only(checklist: Workflow) -> Workflow:
    task = replace(checklist.task("variance_analysis"), depends_on=())
    return replace(checklist, tasks=(task,), digest="variance-only")


async def _run_variance_with(conn: Any, runtime: Any, default_books: Any, handler: Any) -> tuple[str, dict[str, Any]]:
    close_id = await start_default_close(conn, runtime, default_books)
    async with open_in_process({"variance": handler}) as client:
        ctx = EngineContext(runtime.policy, workflows_by_name(_variance_only(runtime.workflow)), client.call)
        await advance(conn, close_id, ctx)
    return close_id, await close_status(conn, close_id)


async def test_a_narrative_citing_an_unqueried_number_is_not_emitted(
    conn: Any, runtime: Any, default_books: Any
) -> None:
    def inventing_specialist(payload: dict[str, Any]) -> dict[str, Any]:
        result = variance.handle(payload)
        result["narrative"] += " Travel rose by £12,345.67 against budget."
        return result

    close_id, status = await _run_variance_with(conn, runtime, default_books, inventing_specialist)
    task = next(t for t in status["tasks"] if t["task"] == "variance_analysis")
    # The draft is not recorded or shown; the task escalates to a person, whose card names the unqueried figure.
    assert task["status"] == "halted"
    assert "£12,345.67" in task["reason"]
    (gate,) = status["gates"]
    assert gate["kind"] == "escalation"
    assert gate["approver_role"] == runtime.policy.escalation_owner(EscalationReason.UNGROUNDED_NARRATIVE)
    assert await count(conn, "SELECT count(*) FROM close_task WHERE result IS NOT NULL") == 0
    assert await count(conn, "SELECT count(*) FROM gate WHERE summary::text LIKE '%%Travel rose%%'") == 0
    assert (
        await count(
            conn,
            "SELECT count(*) FROM trace_event WHERE kind = 'task_halted' AND close_id = %s"
            " AND payload->>'escalation' = 'ungrounded_narrative'",
            close_id,
        )
        == 1
    )


async def test_a_narrative_citing_only_queried_numbers_reaches_its_gate(
    conn: Any, runtime: Any, default_books: Any
) -> None:
    _, status = await _run_variance_with(conn, runtime, default_books, variance.handle)
    task = next(t for t in status["tasks"] if t["task"] == "variance_analysis")
    assert task["status"] == "awaiting_gate"
    assert [g["task"] for g in status["gates"]] == ["variance_analysis"]
