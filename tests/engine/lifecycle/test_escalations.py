"""Every escalation reason halts the work behind a person, and escalated work never completes without one.

A test workflow of one low-tier task (policy asks no gate for it) escalates on its first attempt; after the
escalation's owner approves the re-run, the re-run still waits for a human approval gate instead of completing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from psycopg import AsyncConnection

from countersign.engine.orchestrator import EngineContext, advance
from countersign.engine.runs import close_status
from countersign.engine.workflows import Escalate, TaskContext, TaskHandler
from countersign.policy import EscalationReason
from countersign.specialists.client import open_in_process
from tests.engine.workflow_support import approve_open_gates, start_workflow_close, write_workflow
from tests.support import count

PROBE = """\
version: 1
workflow: probe
title: Escalation probe
tasks:
  - id: probe
    title: Probe task
    handler: probe.escalate_first
    specialist: null
    depends_on: []
    risk_tier: low
    requires_gate: false
"""


class EscalateFirstAttempt(TaskHandler):
    def __init__(self, reason: EscalationReason | None) -> None:
        self.reason = reason
        self.first_attempt: int | None = None

    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        self.first_attempt = tc.attempt if self.first_attempt is None else self.first_attempt
        if self.reason is not None and tc.attempt == self.first_attempt:
            raise Escalate(self.reason, f"probe cannot go on: {self.reason.value}")
        return {"kind": "probe", "total": "10.00"}


async def _probe_close(
    conn: Any, runtime: Any, books: Path, tmp_path: Path, reason: EscalationReason | None
) -> tuple[str, EngineContext, Any]:
    workflow = write_workflow(tmp_path / "workflows", "probe", PROBE, runtime.policy)
    close_id = await start_workflow_close(conn, runtime.policy, workflow, books)
    return close_id, workflow, EscalateFirstAttempt(reason)


async def _task(conn: Any, close_id: str) -> dict[str, Any]:
    (task,) = (await close_status(conn, close_id))["tasks"]
    return task


async def test_without_an_escalation_the_low_tier_probe_completes_with_no_gate(
    conn: Any, runtime: Any, default_books: Path, tmp_path: Path
) -> None:
    """The control: the same task, never escalated, needs no person (so the tests below measure escalation)."""
    close_id, workflow, handler = await _probe_close(conn, runtime, default_books, tmp_path, None)
    async with open_in_process() as client:
        ctx = EngineContext(
            runtime.policy, {"probe": workflow}, client.call, handlers={"probe.escalate_first": handler}
        )
        report = await advance(conn, close_id, ctx)
    assert report.status == "closed", report.steps
    assert (await _task(conn, close_id))["status"] == "done"
    assert await count(conn, "SELECT count(*) FROM gate WHERE close_id = %s", close_id) == 0


@pytest.mark.parametrize("reason", list(EscalationReason), ids=lambda r: r.value)
async def test_each_escalation_reason_reaches_its_owner_and_the_rerun_still_needs_a_person(
    conn: Any, runtime: Any, api: Any, default_books: Path, tmp_path: Path, reason: EscalationReason
) -> None:
    close_id, workflow, handler = await _probe_close(conn, runtime, default_books, tmp_path, reason)
    async with open_in_process() as client:
        ctx = EngineContext(
            runtime.policy, {"probe": workflow}, client.call, handlers={"probe.escalate_first": handler}
        )
        halted = await advance(conn, close_id, ctx)
        assert halted.status == "halted", halted.steps
        task = await _task(conn, close_id)
        assert task["status"] == "halted" and reason.value in task["reason"]
        (escalation,) = (await close_status(conn, close_id))["gates"]
        assert escalation["kind"] == "escalation"
        assert escalation["approver_role"] == runtime.policy.escalation_owner(reason)

        await approve_open_gates(api, conn, close_id)
        rerun = await advance(conn, close_id, ctx)
        # The re-run's work is fine and its tier asks no gate, yet it waits for a person: it was escalated.
        assert rerun.status == "awaiting_approval", rerun.steps
        task = await _task(conn, close_id)
        assert (task["status"], task["attempt"]) == ("awaiting_gate", handler.first_attempt + 1)
        gates = (await close_status(conn, close_id))["gates"]
        approval = next(g for g in gates if g["kind"] == "approval")
        assert (
            approval["attempt"] == handler.first_attempt + 1
            and approval["status"] == "open"
            and approval["quorum"] >= 1
        )
        assert reason.value in approval["rule"]
        assert (
            await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'task_done' AND close_id = %s", close_id)
            == 0
        )

        await approve_open_gates(api, conn, close_id)
        done = await advance(conn, close_id, ctx)
    assert done.status == "closed", done.steps


async def test_the_engine_role_cannot_complete_escalated_work_by_sql(
    conn: Any, runtime: Any, api: Any, default_books: Path, tmp_path: Path, database: Any
) -> None:
    """The database holds the rule too: escalated work reaches `done` only through an applied approval gate."""
    import psycopg

    close_id, workflow, handler = await _probe_close(
        conn, runtime, default_books, tmp_path, EscalationReason.SUSPECTED_INJECTION
    )
    async with open_in_process() as client:
        ctx = EngineContext(
            runtime.policy, {"probe": workflow}, client.call, handlers={"probe.escalate_first": handler}
        )
        await advance(conn, close_id, ctx)
        await approve_open_gates(api, conn, close_id)
        await advance(conn, close_id, ctx)
    assert (await _task(conn, close_id))["status"] == "awaiting_gate"
    async with await psycopg.AsyncConnection.connect(database.url_for("engine"), autocommit=True) as engine:
        for sql in (
            "UPDATE close_task SET status = 'done' WHERE close_id = %s",
            "UPDATE close_task SET status = 'running' WHERE close_id = %s",
            "UPDATE close_task SET escalation = NULL WHERE close_id = %s",
        ):
            with pytest.raises(psycopg.Error):
                await engine.execute(sql, (close_id,))
    assert (await _task(conn, close_id))["status"] == "awaiting_gate"
