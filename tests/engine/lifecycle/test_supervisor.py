"""`countersign.engine.supervisor` moves rows only along the table, returns False when another worker moved them first,
and
raises `IllegalTransition` (before the database would refuse) when the move is illegal."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from countersign.bootstrap.database import Database
from countersign.engine.lifecycle import IllegalTransition
from countersign.engine.supervisor import move_gate, move_run, move_task
from countersign.states import GateLifecycle, RunState, TaskState
from tests.engine.lifecycle_support import decide, new_close, put_gate, put_task, seed_approver


@pytest.fixture
def owner(database: Database) -> Iterator[psycopg.Connection[Any]]:
    with database.connect(autocommit=True) as conn:
        seed_approver(conn)
        yield conn


@pytest_asyncio.fixture
async def engine(database: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    conn = await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True)
    try:
        yield conn
    finally:
        await conn.close()


def _task(owner: psycopg.Connection[Any], close_id: str, task: str) -> tuple[Any, ...] | None:
    return owner.execute(
        "SELECT status, attempt, escalation, reason FROM close_task WHERE close_id = %s AND task = %s",
        (close_id, task),
    ).fetchone()


async def test_a_task_another_worker_moved_is_left_alone(
    owner: psycopg.Connection[Any], engine: psycopg.AsyncConnection[Any]
) -> None:
    close_id = new_close(owner)
    put_task(owner, close_id, "t", "running")
    moved = await move_task(engine, close_id, "t", TaskState.RUNNING, expect=(TaskState.PENDING,), reason="x")
    assert moved is False
    assert _task(owner, close_id, "t") == ("running", 1, None, None)


async def test_an_illegal_move_raises_before_the_database_sees_it(
    owner: psycopg.Connection[Any], engine: psycopg.AsyncConnection[Any]
) -> None:
    close_id = new_close(owner)
    put_task(owner, close_id, "t", "halted", escalation="missing_parameter")
    with pytest.raises(IllegalTransition, match="task cannot go from halted to done: escalated work") as refused:
        await move_task(engine, close_id, "t", TaskState.DONE, expect=(TaskState.HALTED,))
    assert (refused.value.source, refused.value.target) == ("halted", "done")
    assert _task(owner, close_id, "t") == ("halted", 1, "missing_parameter", None)


async def test_an_escalated_rerun_completes_only_through_an_applied_approved_gate(
    owner: psycopg.Connection[Any], engine: psycopg.AsyncConnection[Any]
) -> None:
    close_id = new_close(owner)
    put_task(owner, close_id, "t", "running", attempt=2, escalation="ungrounded_narrative")
    with pytest.raises(IllegalTransition, match="completes only through a human gate"):
        await move_task(engine, close_id, "t", TaskState.DONE, expect=(TaskState.RUNNING,))
    assert await move_task(
        engine, close_id, "t", TaskState.AWAITING_GATE, expect=(TaskState.RUNNING,), result={"n": 1}, reason="gate"
    )
    with pytest.raises(IllegalTransition, match="no applied, approved approval gate for attempt 2"):
        await move_task(engine, close_id, "t", TaskState.DONE, expect=(TaskState.AWAITING_GATE,))
    gate_id = put_gate(owner, close_id, "t", attempt=2)
    decide(owner, gate_id)
    async with engine.transaction():  # the engine applies the gate and completes the task together
        assert await move_gate(engine, gate_id, GateLifecycle.APPLIED)
        assert await move_task(engine, close_id, "t", TaskState.DONE, expect=(TaskState.AWAITING_GATE,))
    assert _task(owner, close_id, "t") == ("done", 2, "ungrounded_narrative", None)


async def test_a_halt_needs_a_reason_and_an_escalation_is_never_cleared(
    owner: psycopg.Connection[Any], engine: psycopg.AsyncConnection[Any]
) -> None:
    close_id = new_close(owner)
    put_task(owner, close_id, "t", "running")
    with pytest.raises(IllegalTransition, match="halts only with an escalation reason"):
        await move_task(engine, close_id, "t", TaskState.HALTED, expect=(TaskState.RUNNING,))
    assert await move_task(
        engine, close_id, "t", TaskState.HALTED, expect=(TaskState.RUNNING,), escalation="suspected_injection"
    )
    assert await move_task(engine, close_id, "t", TaskState.HALTED, expect=(TaskState.HALTED,), reason="again")
    assert _task(owner, close_id, "t") == ("halted", 1, "suspected_injection", "again")
    with pytest.raises(ValueError, match="felt_like_it"):
        await move_task(engine, close_id, "t", TaskState.HALTED, expect=(TaskState.HALTED,), escalation="felt_like_it")


async def test_a_run_moves_only_when_its_status_or_reason_changes(
    owner: psycopg.Connection[Any], engine: psycopg.AsyncConnection[Any]
) -> None:
    close_id = new_close(owner)
    assert await move_run(engine, close_id, RunState.RUNNING, reason=None) is False
    assert await move_run(engine, close_id, RunState.HALTED, reason="t: anomaly") is True
    assert await move_run(engine, close_id, RunState.HALTED, reason="t: anomaly") is False
    assert await move_run(engine, close_id, RunState.CLOSED, reason=None) is True  # no tasks: all done
    with pytest.raises(IllegalTransition, match="run cannot go from closed to running: a closed run stays closed"):
        await move_run(engine, close_id, RunState.RUNNING, reason=None)


async def test_a_gate_moves_once_from_open(
    owner: psycopg.Connection[Any], engine: psycopg.AsyncConnection[Any]
) -> None:
    close_id = new_close(owner)
    gate_id = put_gate(owner, close_id, "t")
    assert await move_gate(engine, gate_id, GateLifecycle.EXPIRED) is True
    assert await move_gate(engine, gate_id, GateLifecycle.APPLIED) is False  # another worker got there first
    with pytest.raises(IllegalTransition, match="gate cannot go from expired to open"):
        await move_gate(engine, gate_id, GateLifecycle.OPEN, expect=(GateLifecycle.EXPIRED,))
    row = owner.execute("SELECT lifecycle, applied_at IS NOT NULL FROM gate WHERE gate_id = %s", (gate_id,)).fetchone()
    assert row == ("expired", True)
