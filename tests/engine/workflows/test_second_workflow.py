"""A workflow the engine has never seen — a YAML file and two handlers written here — runs end to end.

It goes through the shipped engine unchanged: an A2A specialist call, a policy-derived gate, a person's decision
over the signed callback, and the trace, which verifies at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from psycopg import AsyncConnection

from countersign.audit.trace import append_event, verify_chain
from countersign.engine.orchestrator import EngineContext, UnknownWorkflow, advance
from countersign.engine.runs import close_status
from countersign.engine.workflows import TaskContext, TaskHandler, UnknownHandler
from countersign.policy import PolicyError
from countersign.specialists.client import open_in_process
from tests.engine.workflow_support import approve_open_gates, start_workflow_close, write_workflow
from tests.support import count

VENDOR_REVIEW = """\
version: 1
workflow: vendor_review
title: Vendor payment review
tasks:
  - id: statement_tieout
    title: Vendor statement tie-out
    handler: vendor_review.tieout
    specialist: reconciliation
    depends_on: []
    risk_tier: low
    requires_gate: false

  - id: payment_release
    title: Release of the vendor payment run
    handler: vendor_review.release
    specialist: null
    depends_on: [statement_tieout]
    risk_tier: medium
    requires_gate: true
"""


class StatementTieOut(TaskHandler):
    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return {"kind": "vendor_tieout", "vendor": "V-001", "statement_total": "1200.00", "ledger_total": "1200.00"}


class PaymentRelease(TaskHandler):
    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return {"kind": "payment_release", "total": "1200.00", "narrative": "Release one payment of 1,200.00."}

    async def complete(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        await append_event(
            conn,
            actor=tc.actor,
            close_id=tc.close.close_id,
            kind="payment_released",
            payload={"total": result["total"]},
        )
        return [f"{tc.task.id}: payment run released"]


HANDLERS = {"vendor_review.tieout": StatementTieOut(), "vendor_review.release": PaymentRelease()}


def tieout_specialist(payload: dict[str, Any]) -> dict[str, Any]:
    """The reconciliation specialist's stand-in for this workflow: it ties the statement to the ledger."""
    assert payload["kind"] == "vendor_tieout"
    difference = float(payload["statement_total"]) - float(payload["ledger_total"])
    return {"kind": "vendor_tieout", "difference": f"{difference:.2f}", "model_steps": MODEL_STEPS}


# What a model-backed specialist reports of its agent loop; the engine traces the known kinds only.
MODEL_STEPS = [
    {
        "kind": "model_step",
        "step": 1,
        "model": "countersign-narrator-v1",
        "template_hash": "ab" * 32,
        "request_key": "cd" * 32,
        "tokens_in": 120,
        "tokens_out": 40,
        "latency_ms": 7,
        "attempts": 2,
        "tool_calls": [],
        "finish_reason": "stop",
    },
    {"kind": "gate_decided", "step": 2, "decision": "approve"},  # not a model event kind: never traced
]


async def test_a_workflow_defined_in_a_test_runs_through_gates_callback_and_trace(
    conn: Any, runtime: Any, api: Any, default_books: Path, tmp_path: Path
) -> None:
    workflow = write_workflow(tmp_path / "workflows", "vendor_review", VENDOR_REVIEW, runtime.policy)
    close_id = await start_workflow_close(conn, runtime.policy, workflow, default_books)
    async with open_in_process({"reconciliation": tieout_specialist}) as client:
        ctx = EngineContext(runtime.policy, {workflow.name: workflow}, client.call, handlers=HANDLERS)
        first = await advance(conn, close_id, ctx)
        assert first.status == "awaiting_approval", first.steps
        status = await close_status(conn, close_id)
        tasks = {t["task"]: t for t in status["tasks"]}
        assert tasks["statement_tieout"]["status"] == "done"
        assert tasks["payment_release"]["status"] == "awaiting_gate"
        assert tasks["payment_release"]["title"] == "Release of the vendor payment run"
        (gate,) = status["gates"]
        assert (gate["task"], gate["kind"], gate["tier"], gate["approver_role"]) == (
            "payment_release",
            "approval",
            "medium",
            "controller",
        )
        assert gate["title"] == "Release of the vendor payment run"

        decided = await approve_open_gates(api, conn, close_id)
        assert [g["gate_id"] for g in decided] == [gate["gate_id"]]
        final = await advance(conn, close_id, ctx)
    assert final.status == "closed", final.steps
    assert "payment_release: payment run released" in final.steps
    assert await count(conn, "SELECT count(*) FROM dispatch WHERE close_id = %s", close_id) == 1
    assert await count(conn, "SELECT count(*) FROM close_run WHERE workflow = 'vendor_review'") == 1
    kinds = await _event_kinds(conn, close_id)
    for kind in ("close_started", "task_started", "gate_opened", "gate_decided", "gate_passed", "payment_released"):
        assert kind in kinds, kind
    assert (await verify_chain(conn)).ok
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT actor, kind, payload FROM trace_event"
            " WHERE close_id = %s AND kind IN ('model_step', 'gate_decided') ORDER BY seq",
            (close_id,),
        )
        model_events = [row for row in await cur.fetchall() if row[1] == "model_step" or row[0] != "alice.chen"]
    assert [(actor, kind) for actor, kind, _ in model_events] == [("reconciliation-agent", "model_step")]
    step = model_events[0][2]
    assert (step["task"], step["model"], step["tokens_in"], step["tokens_out"], step["attempts"]) == (
        "statement_tieout",
        "countersign-narrator-v1",
        120,
        40,
        2,
    )


async def _event_kinds(conn: AsyncConnection[Any], close_id: str) -> set[str]:
    async with conn.cursor() as cur:
        await cur.execute("SELECT DISTINCT kind FROM trace_event WHERE close_id = %s", (close_id,))
        return {row[0] for row in await cur.fetchall()}


async def test_an_engine_refuses_a_close_of_a_workflow_it_was_not_given(
    conn: Any, runtime: Any, default_books: Path, tmp_path: Path
) -> None:
    workflow = write_workflow(tmp_path / "workflows", "vendor_review", VENDOR_REVIEW, runtime.policy)
    close_id = await start_workflow_close(conn, runtime.policy, workflow, default_books)
    async with open_in_process() as client:
        ctx = EngineContext(runtime.policy, {"close": runtime.workflow}, client.call)
        with pytest.raises(UnknownWorkflow, match="vendor_review"):
            await advance(conn, close_id, ctx)
    assert (
        await count(conn, "SELECT count(*) FROM close_task WHERE close_id = %s AND status <> 'pending'", close_id) == 0
    )


async def test_a_workflow_naming_an_unregistered_handler_is_refused_before_anything_runs(
    runtime: Any, tmp_path: Path
) -> None:
    workflow = write_workflow(tmp_path / "workflows", "vendor_review", VENDOR_REVIEW, runtime.policy)
    with pytest.raises(UnknownHandler, match=r"vendor_review\.release"):
        EngineContext(
            runtime.policy,
            {workflow.name: workflow},
            _never_called,
            handlers={"vendor_review.tieout": StatementTieOut()},
        )


async def _never_called(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("no specialist may be called")


def test_the_policy_check_applies_to_a_test_workflow_file_too(runtime: Any, tmp_path: Path) -> None:
    """payment_release is medium tier, so policy gates it; a file claiming otherwise is refused at load."""
    lying = VENDOR_REVIEW.replace(
        "risk_tier: medium\n    requires_gate: true", "risk_tier: medium\n    requires_gate: false"
    )
    assert lying != VENDOR_REVIEW
    with pytest.raises(PolicyError, match="payment_release"):
        write_workflow(tmp_path / "workflows", "vendor_review", lying, runtime.policy)


class PaymentReleaseWithFindings(PaymentRelease):
    """The same release, reporting two findings (say, two violated rules) about the payment run."""

    def gate_findings(self, result: Mapping[str, Any]) -> int:
        return 2


async def test_a_result_with_findings_is_gated_at_the_policys_findings_tier(
    conn: Any, runtime: Any, default_books: Path, tmp_path: Path
) -> None:
    workflow = write_workflow(tmp_path / "workflows", "vendor_review", VENDOR_REVIEW, runtime.policy)
    close_id = await start_workflow_close(conn, runtime.policy, workflow, default_books)
    handlers = {**HANDLERS, "vendor_review.release": PaymentReleaseWithFindings()}
    async with open_in_process({"reconciliation": tieout_specialist}) as client:
        ctx = EngineContext(runtime.policy, {workflow.name: workflow}, client.call, handlers=handlers)
        assert (await advance(conn, close_id, ctx)).status == "awaiting_approval"
    (gate,) = (await close_status(conn, close_id))["gates"]
    assert (gate["task"], gate["tier"]) == ("payment_release", runtime.policy.findings_tier)
    assert "2 findings raise the gate to at least tier high" in gate["rule"]
