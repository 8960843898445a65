"""The run tables' statements (countersign.store.runs) against real PostgreSQL, as the engine role runs them: a close
and its tasks insert once, its period reads its state, a lock holds its row to the transaction's end, an update
writes what it is given and keeps what it is not, and only the supervisor calls the moves."""

from __future__ import annotations

import ast
import dataclasses
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio

import countersign
from countersign.bootstrap.database import Database
from countersign.states import GateLifecycle, GateStatus, PeriodState, RunState, TaskState
from countersign.store import books as book_store
from countersign.store import runs as store
from tests.engine.lifecycle_support import decide, new_close, put_gate, put_task, seed_approver

PERIOD = "2026-10"


@pytest.fixture
def owner(database: Database) -> Iterator[psycopg.Connection[Any]]:
    with database.connect(autocommit=True) as conn:
        seed_approver(conn)
        yield conn


@pytest_asyncio.fixture
async def engine(database: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as conn:
        yield conn


def _book_set(owner: psycopg.Connection[Any], entity: str, *, currency: str = "GBP", manifest: str = "{}") -> int:
    row = owner.execute(
        "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
        " VALUES (%s, %s, %s, 'test', %s, 'd') RETURNING book_set_id",
        (entity, PERIOD, currency, manifest),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _locked_elsewhere(owner: psycopg.Connection[Any], statement: str, *params: Any) -> bool:
    """Whether another session finds the rows locked (NOWAIT: it does not wait for them)."""
    try:
        with owner.transaction():
            owner.execute(statement + " FOR UPDATE NOWAIT", params)
    except psycopg.errors.LockNotAvailable:
        return True
    return False


def _task(owner: psycopg.Connection[Any], close_id: str, task: str) -> tuple[Any, ...] | None:
    return owner.execute(
        "SELECT status, attempt, escalation, reason, result FROM close_task WHERE close_id = %s AND task = %s",
        (close_id, task),
    ).fetchone()


# --- closes --------------------------------------------------------------------------------------------------------


async def test_a_close_and_its_tasks_insert_once_and_read_back(owner: Any, engine: Any) -> None:
    entity = f"S{uuid.uuid4().hex[:10]}"
    book_set_id = _book_set(owner, entity)
    close_id = str(uuid.uuid4())
    new = store.NewClose(close_id, entity, PERIOD, book_set_id, "p", "c", "test-starter", "close")
    async with engine.transaction():
        assert await store.open_period(engine, entity, PERIOD) is PeriodState.OPEN
        await store.insert_close(engine, new, [("gather", "Gather the books"), ("sign_off", None)])

    close = await store.read_close(engine, close_id)
    assert close == store.CloseRecord(close_id, entity, PERIOD, book_set_id, RunState.RUNNING, "test-starter", "close")
    assert close is not None and close.status is RunState.RUNNING
    assert await store.read_close(engine, str(uuid.uuid4())) is None
    tasks = {row.task: row for row in await store.read_tasks(engine, close_id)}
    assert tasks == {
        "gather": store.TaskRow("gather", TaskState.PENDING, 1, None, None),
        "sign_off": store.TaskRow("sign_off", TaskState.PENDING, 1, None, None),
    }
    lines = {line.task: line for line in await store.read_task_status_lines(engine, close_id)}
    assert (lines["gather"].title, lines["sign_off"].title) == ("Gather the books", None)
    assert lines["gather"].status is TaskState.PENDING
    assert await store.read_status_reason(engine, close_id) is None

    assert await store.find_close(engine, entity, PERIOD) == close_id
    assert await store.find_close(engine, entity, "2026-11") is None
    assert await store.latest_close_id(engine, entity) == close_id
    assert await store.latest_close_id(engine, "nobody") is None
    assert await store.runnable_close_ids(engine, close_id) == [close_id]
    assert await store.count_closes_with_entity_prefix(engine, entity[:4]) == 1
    assert await store.count_closes_with_entity_prefix(engine, "Z") == 0

    with pytest.raises(psycopg.errors.UniqueViolation):  # one close per entity and period
        async with engine.transaction():
            await store.insert_close(engine, dataclasses.replace(new, close_id=str(uuid.uuid4())), [])


async def test_a_period_opens_once_and_reads_closed_once_closed(owner: Any, engine: Any) -> None:
    entity = f"P{uuid.uuid4().hex[:10]}"
    assert await store.open_period(engine, entity, PERIOD) is PeriodState.OPEN
    owner.execute("UPDATE accounting_period SET status = 'closed' WHERE entity = %s AND period = %s", (entity, PERIOD))
    assert await store.open_period(engine, entity, PERIOD) is PeriodState.CLOSED  # the insert left the row alone
    rows = owner.execute("SELECT count(*) FROM accounting_period WHERE entity = %s", (entity,)).fetchone()
    assert rows == (1,)


async def test_runnable_closes_leave_the_closed_out_oldest_first(owner: Any, engine: Any) -> None:
    first = new_close(owner)
    closed = new_close(owner, status="closed")
    second = new_close(owner)
    assert await store.runnable_close_ids(engine) == [first, second]
    assert await store.runnable_close_ids(engine, closed) == []
    assert await store.latest_close_id(engine) == second


# --- locks ---------------------------------------------------------------------------------------------------------


async def test_each_lock_holds_its_rows_until_the_transaction_ends(owner: Any, engine: Any) -> None:
    close_id = new_close(owner)
    put_task(owner, close_id, "t", "running", attempt=2, escalation="ungrounded_narrative")
    gate_id = put_gate(owner, close_id, "t", attempt=2)
    task_lock = "SELECT 1 FROM close_task WHERE close_id = %s"
    run_lock = "SELECT 1 FROM close_run WHERE close_id = %s"
    gate_lock = "SELECT 1 FROM gate WHERE gate_id = %s"

    async with engine.transaction():
        assert await store.lock_task_for_move(engine, close_id, "t") == store.LockedTask(
            TaskState.RUNNING, 2, "ungrounded_narrative"
        )
        assert _locked_elsewhere(owner, task_lock, close_id)
    assert not _locked_elsewhere(owner, task_lock, close_id)

    async with engine.transaction():
        row = await store.lock_task(engine, close_id, "t")
        assert row == store.TaskRow("t", TaskState.RUNNING, 2, None, "ungrounded_narrative")
        assert _locked_elsewhere(owner, task_lock, close_id)
    async with engine.transaction():
        assert await store.lock_task_outcomes(engine, close_id) == [store.TaskOutcome(TaskState.RUNNING, None, "t")]
        assert _locked_elsewhere(owner, task_lock, close_id)
    async with engine.transaction():
        assert await store.lock_run(engine, close_id) == store.LockedRun(RunState.RUNNING, None)
        assert _locked_elsewhere(owner, run_lock, close_id)
    assert not _locked_elsewhere(owner, run_lock, close_id)
    async with engine.transaction():
        assert await store.lock_gate_lifecycle(engine, gate_id) is GateLifecycle.OPEN
        assert _locked_elsewhere(owner, gate_lock, gate_id)
    assert not _locked_elsewhere(owner, gate_lock, gate_id)

    assert await store.lock_task(engine, close_id, "missing") is None
    assert await store.lock_task_for_move(engine, close_id, "missing") is None
    assert await store.lock_run(engine, str(uuid.uuid4())) is None
    assert await store.lock_gate_lifecycle(engine, str(uuid.uuid4())) is None


# --- the supervisor's moves ----------------------------------------------------------------------------------------


async def test_a_task_update_writes_what_it_is_given_and_keeps_what_it_is_not(owner: Any, engine: Any) -> None:
    close_id = new_close(owner)
    put_task(owner, close_id, "t", "pending")

    async def update(status: TaskState, **changes: Any) -> None:
        values = {"result": None, "reason": None, "attempt": None, "escalation": None, **changes}
        await store.update_task(engine, close_id, "t", status=status, **values)

    await update(TaskState.RUNNING, reason="started")
    assert _task(owner, close_id, "t") == ("running", 1, None, "started", None)
    await update(TaskState.RUNNING, result={"n": 1})
    assert _task(owner, close_id, "t") == ("running", 1, None, None, {"n": 1})  # the reason is always written
    await update(TaskState.HALTED, reason="escalated", escalation="ungrounded_narrative")
    assert _task(owner, close_id, "t") == ("halted", 1, "ungrounded_narrative", "escalated", {"n": 1})
    await update(TaskState.HALTED, reason="still")  # no escalation given: the stored one stays
    assert _task(owner, close_id, "t") == ("halted", 1, "ungrounded_narrative", "still", {"n": 1})


async def test_a_run_update_writes_its_status_and_reason(owner: Any, engine: Any) -> None:
    close_id = new_close(owner)
    await store.update_run(engine, close_id, RunState.HALTED, "t: escalated")
    assert await store.lock_run(engine, close_id) == store.LockedRun(RunState.HALTED, "t: escalated")
    assert await store.read_status_reason(engine, close_id) == "t: escalated"
    await store.update_run(engine, close_id, RunState.AWAITING_APPROVAL, None)
    assert await store.lock_run(engine, close_id) == store.LockedRun(RunState.AWAITING_APPROVAL, None)


async def test_a_gate_update_stamps_applied_at_only_when_applied_or_expired(owner: Any, engine: Any) -> None:
    close_id = new_close(owner)
    for task in ("a", "b"):
        put_task(owner, close_id, task, "awaiting_gate")
    cancelled = put_gate(owner, close_id, "a")
    applied = put_gate(owner, close_id, "b")
    decide(owner, applied)
    await store.update_gate_lifecycle(engine, cancelled, GateLifecycle.CANCELLED)
    await store.update_gate_lifecycle(engine, applied, GateLifecycle.APPLIED)
    rows = {
        gate: (lifecycle, stamped)
        for gate, lifecycle, stamped in owner.execute(
            "SELECT gate_id::text, lifecycle, applied_at IS NOT NULL FROM gate WHERE close_id = %s", (close_id,)
        ).fetchall()
    }
    assert rows == {cancelled: ("cancelled", False), applied: ("applied", True)}
    assert await store.lock_gate_lifecycle(engine, applied) is GateLifecycle.APPLIED


async def test_the_gates_the_rules_ask_after(owner: Any, engine: Any) -> None:
    close_id = new_close(owner)
    put_task(owner, close_id, "t", "awaiting_gate")
    approval = put_gate(owner, close_id, "t", attempt=1)
    decide(owner, approval)
    assert not await store.gate_applied_with(engine, close_id, "t", 1, kind="approval", status=GateStatus.APPROVED)
    await store.update_gate_lifecycle(engine, approval, GateLifecycle.APPLIED)
    assert await store.gate_applied_with(engine, close_id, "t", 1, kind="approval", status=GateStatus.APPROVED)
    assert not await store.gate_applied_with(engine, close_id, "t", 1, kind="approval", status=GateStatus.REJECTED)
    assert not await store.gate_applied_with(engine, close_id, "t", 2, kind="approval", status=GateStatus.APPROVED)
    assert not await store.gate_applied_with(engine, close_id, "t", 1, kind="escalation", status=GateStatus.APPROVED)

    escalation = put_gate(owner, close_id, "t", attempt=2, kind="escalation")
    assert not await store.escalation_gate_settled(engine, close_id, "t", 2)  # open
    put_gate(owner, close_id, "t", attempt=3, kind="escalation", lifecycle="expired")
    assert await store.escalation_gate_settled(engine, close_id, "t", 3)  # expired undecided
    decide(owner, escalation, "reject")
    await store.update_gate_lifecycle(engine, escalation, GateLifecycle.APPLIED)
    assert not await store.escalation_gate_settled(engine, close_id, "t", 2)  # applied, but rejected
    rerun = put_gate(owner, close_id, "t", attempt=4, kind="escalation")
    decide(owner, rerun)
    await store.update_gate_lifecycle(engine, rerun, GateLifecycle.APPLIED)
    assert await store.escalation_gate_settled(engine, close_id, "t", 4)
    assert not await store.escalation_gate_settled(engine, close_id, "t", 1)  # attempt 1's gate is an approval


async def test_open_gates_count_only_the_open(owner: Any, engine: Any) -> None:
    close_id = new_close(owner)
    for task in ("a", "b", "c", "d"):
        put_task(owner, close_id, task, "awaiting_gate")
    put_gate(owner, close_id, "a")
    put_gate(owner, close_id, "b")
    put_gate(owner, close_id, "c", lifecycle="cancelled")
    decide(owner, put_gate(owner, close_id, "d"))  # approved, not yet applied
    assert await store.count_open_gates(engine, close_id) == 2
    assert await store.count_open_gates(engine, new_close(owner)) == 0


# --- the books a close starts from ---------------------------------------------------------------------------------


async def test_a_book_sets_currency_and_manifest(owner: Any, engine: Any) -> None:
    book_set_id = _book_set(owner, f"B{uuid.uuid4().hex[:10]}", currency="EUR", manifest='{"profile": "default"}')
    assert await book_store.book_set_currency(engine, book_set_id) == "EUR"
    assert await book_store.book_set_manifest(engine, book_set_id) == {"profile": "default"}
    assert await book_store.book_set_currency(engine, book_set_id + 1) is None
    assert await book_store.book_set_manifest(engine, book_set_id + 1) is None


# --- who calls the moves -------------------------------------------------------------------------------------------

_PACKAGE = Path(countersign.__file__).parent
_MOVES = {"lock_task_for_move", "update_task", "lock_run", "update_run", "lock_gate_lifecycle", "update_gate_lifecycle"}


def _moves_used(source: str) -> set[str]:
    """The moves of countersign.store.runs a module's source names, imported by name or read off the module."""
    tree = ast.parse(source)
    used: set[str] = set()
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "countersign.store.runs":
            used.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "countersign.store":
            aliases.update(alias.asname or alias.name for alias in node.names if alias.name == "runs")
        elif isinstance(node, ast.Import):
            aliases.update(
                alias.asname for alias in node.names if alias.name == "countersign.store.runs" and alias.asname
            )
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            used.add(node.attr)
    return used & _MOVES


def test_only_the_supervisor_calls_the_moves() -> None:
    callers = {
        path.relative_to(_PACKAGE).as_posix(): moves
        for path in _PACKAGE.rglob("*.py")
        if path.relative_to(_PACKAGE).parts[0] != "store" and (moves := _moves_used(path.read_text(encoding="utf-8")))
    }
    assert callers == {"engine/supervisor.py": _MOVES}  # the supervisor makes every move, and nothing else does


def test_negative_control_a_module_that_names_a_move_is_seen() -> None:
    assert _moves_used("from countersign.store.runs import update_run\n") == {"update_run"}
    assert _moves_used("from countersign.store import runs as s\ns.update_task(conn)\n") == {"update_task"}
    assert _moves_used("from countersign.store import runs\nruns.read_tasks(conn)\n") == set()
