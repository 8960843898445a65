"""Every illegal transition of every machine is refused twice: by `countersign.engine.lifecycle` and by the database.

The illegal cases are generated from the transition table, so a move added to or removed from the table changes the
cases here. The database cases run as the engine's role, by raw SQL, the way a process bypassing Python would.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from countersign.bootstrap.database import Database
from countersign.engine.lifecycle import STATES, TRANSITIONS, IllegalTransition, check_transition, illegal_pairs
from countersign.policy import EscalationReason
from countersign.states import Machine, TaskState
from tests.engine.lifecycle_support import cloned_database, decide, new_close, put_gate, put_task, seed_approver

ILLEGAL = [(machine, source, target) for machine in Machine for source, target in illegal_pairs(machine)]
LEGAL = [(machine, source, target) for machine in Machine for source, target in TRANSITIONS[machine]]

# Where each machine's state lives, and the row standing in each state.
COLUMN = {
    Machine.TASK: ("close_task", "status"),
    Machine.RUN: ("close_run", "status"),
    Machine.GATE: ("gate", "lifecycle"),
}


def _case_id(case: tuple[Machine, str, str]) -> str:
    machine, source, target = case
    return f"{machine}:{source}->{target}"


@pytest.fixture(scope="module")
def rows(pg_server_url: str, template_url: str) -> Iterator[dict[str, Any]]:
    """One database holding a task row, a run and a gate in every state of their machines."""
    with cloned_database(pg_server_url, template_url) as database, database.connect(autocommit=True) as owner:
        seed_approver(owner)
        close_id = new_close(owner)
        where: dict[tuple[Machine, str], tuple[str, tuple[Any, ...]]] = {}
        for state in TaskState:
            escalation = "anomaly_over_tolerance" if state is TaskState.HALTED else None
            put_task(owner, close_id, f"t_{state}", state, escalation=escalation)
            where[Machine.TASK, state] = ("close_id = %s AND task = %s", (close_id, f"t_{state}"))
        for run_state in STATES[Machine.RUN]:
            where[Machine.RUN, run_state] = ("close_id = %s", (new_close(owner, status=run_state),))
        for lifecycle in STATES[Machine.GATE]:
            gate_id = put_gate(owner, close_id, f"g_{lifecycle}", lifecycle=lifecycle)
            where[Machine.GATE, lifecycle] = ("gate_id = %s", (gate_id,))
        yield {"database": database, "close_id": close_id, "where": where}


@pytest.fixture(scope="module")
def engine(rows: dict[str, Any]) -> Iterator[psycopg.Connection[Any]]:
    database: Database = rows["database"]
    with psycopg.connect(database.engine_url, autocommit=True) as conn:
        yield conn


def _move_as_engine(
    engine: psycopg.Connection[Any],
    rows: dict[str, Any],
    machine: Machine,
    source: str,
    target: str,
    *,
    extra: str = "",
) -> None:
    """Move the row standing in `source` to `target` by raw SQL, in a transaction that is always rolled back."""
    table, column = COLUMN[machine]
    condition, params = rows["where"][machine, source]
    with engine.transaction(force_rollback=True):
        engine.execute(f"UPDATE {table} SET {column} = %s{extra} WHERE {condition}", (target, *params))


# --- Python ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ILLEGAL, ids=_case_id)
def test_the_table_refuses_an_illegal_move_naming_from_to_and_why(case: tuple[Machine, str, str]) -> None:
    machine, source, target = case
    with pytest.raises(IllegalTransition) as refused:
        check_transition(machine, source, target)
    error = refused.value
    assert (error.machine, error.source, error.target) == (machine, source, target)
    assert error.why and error.why != "the move is legal"
    assert str(error) == f"{machine} cannot go from {source} to {target}: {error.why}"


@pytest.mark.parametrize("case", LEGAL, ids=_case_id)
def test_the_table_names_every_legal_move(case: tuple[Machine, str, str]) -> None:
    machine, source, target = case
    assert (
        check_transition(machine, source, target)
        == TRANSITIONS[machine][STATES[machine](source), STATES[machine](target)]
    )


def test_staying_in_a_state_is_not_a_move_and_always_allowed() -> None:
    for machine in Machine:
        for state in STATES[machine]:
            assert check_transition(machine, state, state) == "no change"


def test_escalated_work_never_completes_without_a_gate_in_the_table() -> None:
    with pytest.raises(IllegalTransition, match="task cannot go from halted to done: escalated work completes only"):
        check_transition(Machine.TASK, "halted", "done")


def test_a_state_of_another_machine_is_not_a_move() -> None:
    with pytest.raises(IllegalTransition, match="not a move of the gate machine"):
        check_transition(Machine.GATE, "open", "pending")


# --- the database ------------------------------------------------------------------------------------------------


def test_the_database_table_is_the_python_table(engine: psycopg.Connection[Any]) -> None:
    stored = {
        (m, s, t): n for m, s, t, n in engine.execute("SELECT machine, source, target, name FROM lifecycle_transition")
    }
    expected = {(str(m), str(s), str(t)): n for m in Machine for (s, t), n in TRANSITIONS[m].items()}
    assert stored == expected


def test_the_engine_role_cannot_rewrite_the_table(engine: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        engine.execute("INSERT INTO lifecycle_transition VALUES ('task', 'halted', 'done', 'let it through')")


@pytest.mark.parametrize("case", ILLEGAL, ids=_case_id)
def test_the_database_refuses_an_illegal_move_by_raw_sql(
    engine: psycopg.Connection[Any], rows: dict[str, Any], case: tuple[Machine, str, str]
) -> None:
    machine, source, target = case
    with pytest.raises((psycopg.errors.CheckViolation, psycopg.errors.InsufficientPrivilege)) as refused:
        _move_as_engine(engine, rows, machine, source, target)
    message = str(refused.value)
    if machine is Machine.GATE:  # migration 0006's forward-only rule fires first and names both states
        assert source in message and target in message
    else:
        assert f"illegal transition: {machine} cannot go from {source} to {target}" in message


@pytest.mark.parametrize(
    "case",
    [c for c in LEGAL if (c[1], c[2]) not in {("awaiting_gate", "done"), ("halted", "pending"), ("done", "pending")}],
    ids=_case_id,
)
def test_the_database_lets_a_legal_move_through(
    engine: psycopg.Connection[Any], rows: dict[str, Any], case: tuple[Machine, str, str]
) -> None:
    """The negative control: the trigger is not refusing everything (moves needing a gate are tested below, done ->
    pending over a voided sign-off in tests/engine/test_sign_off_voided.py)."""
    machine, source, target = case
    extra = ", escalation = 'missing_parameter'" if (machine, target) == (Machine.TASK, TaskState.HALTED) else ""
    _move_as_engine(engine, rows, machine, source, target, extra=extra)


def test_a_row_starts_in_its_first_state(engine: psycopg.Connection[Any], rows: dict[str, Any]) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="illegal transition: a task starts pending, not done"):
        engine.execute("INSERT INTO close_task (close_id, task, status) VALUES (%s, 'x', 'done')", (rows["close_id"],))


# --- escalation in the database ------------------------------------------------------------------------------------


@pytest.fixture
def owner(rows: dict[str, Any]) -> Iterator[psycopg.Connection[Any]]:
    with rows["database"].connect(autocommit=True) as conn:
        yield conn


def _set(engine: psycopg.Connection[Any], close_id: str, task: str, assignment: str) -> None:
    with engine.transaction(force_rollback=True):
        engine.execute(f"UPDATE close_task SET {assignment} WHERE close_id = %s AND task = %s", (close_id, task))


def test_an_escalation_is_never_cleared(engine: psycopg.Connection[Any], rows: dict[str, Any]) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="never cleared"):
        _set(engine, rows["close_id"], "t_halted", "escalation = NULL")
    _set(engine, rows["close_id"], "t_halted", "escalation = 'gate_expired'")  # another reason is fine


def test_a_task_halts_only_with_an_escalation_reason(engine: psycopg.Connection[Any], rows: dict[str, Any]) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="to halted without an escalation reason"):
        _set(engine, rows["close_id"], "t_running", "status = 'halted'")


def test_an_escalated_task_never_completes_from_running(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], rows: dict[str, Any]
) -> None:
    put_task(owner, rows["close_id"], "escalated_rerun", "running", attempt=2, escalation="ungrounded_narrative")
    with pytest.raises(psycopg.errors.CheckViolation, match="completes only through a human gate"):
        _set(engine, rows["close_id"], "escalated_rerun", "status = 'done'")
    _set(engine, rows["close_id"], "escalated_rerun", "status = 'awaiting_gate'")


def test_awaiting_gate_reaches_done_only_through_an_applied_approved_approval_gate(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], rows: dict[str, Any]
) -> None:
    close_id = rows["close_id"]
    put_task(owner, close_id, "gated", "awaiting_gate", attempt=3, escalation="anomaly_over_tolerance")
    with pytest.raises(psycopg.errors.CheckViolation, match="without an applied, approved approval gate"):
        _set(engine, close_id, "gated", "status = 'done'")
    gate_id = put_gate(owner, close_id, "gated", attempt=3)
    decide(owner, gate_id)
    with pytest.raises(psycopg.errors.CheckViolation, match="without an applied, approved approval gate"):
        _set(engine, close_id, "gated", "status = 'done'")  # approved, but the engine has not applied it
    with engine.transaction(force_rollback=True):
        engine.execute("UPDATE gate SET lifecycle = 'applied' WHERE gate_id = %s", (gate_id,))
        engine.execute("UPDATE close_task SET status = 'done' WHERE close_id = %s AND task = 'gated'", (close_id,))


def test_a_rejected_or_other_attempts_gate_does_not_complete_the_task(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], rows: dict[str, Any]
) -> None:
    close_id = rows["close_id"]
    put_task(owner, close_id, "rejected_gate", "awaiting_gate", attempt=2)
    rejected = put_gate(owner, close_id, "rejected_gate", attempt=2)
    decide(owner, rejected, "reject")
    earlier = put_gate(owner, close_id, "rejected_gate", attempt=1)
    decide(owner, earlier)
    with (
        pytest.raises(psycopg.errors.CheckViolation, match="without an applied, approved approval gate"),
        engine.transaction(force_rollback=True),
    ):
        engine.execute("UPDATE gate SET lifecycle = 'applied' WHERE gate_id IN (%s, %s)", (rejected, earlier))
        engine.execute(
            "UPDATE close_task SET status = 'done' WHERE close_id = %s AND task = 'rejected_gate'", (close_id,)
        )


def test_escalated_work_runs_again_only_through_its_escalation_gate(
    engine: psycopg.Connection[Any], owner: psycopg.Connection[Any], rows: dict[str, Any]
) -> None:
    close_id = rows["close_id"]
    put_task(owner, close_id, "escalated", "halted", escalation="suspected_injection")
    rerun = "status = 'pending', attempt = 2"
    refused = "until the escalation gate of attempt 1 is approved by a person or expired"
    with pytest.raises(psycopg.errors.CheckViolation, match=refused):
        _set(engine, close_id, "escalated", rerun)
    gate_id = put_gate(owner, close_id, "escalated", kind="escalation")
    with pytest.raises(psycopg.errors.CheckViolation, match=refused), engine.transaction(force_rollback=True):
        engine.execute("UPDATE gate SET lifecycle = 'applied' WHERE gate_id = %s", (gate_id,))  # undecided
        engine.execute(f"UPDATE close_task SET {rerun} WHERE close_id = %s AND task = 'escalated'", (close_id,))
    with engine.transaction(force_rollback=True):  # expired undecided: the re-run stays escalated
        engine.execute("UPDATE gate SET lifecycle = 'expired' WHERE gate_id = %s", (gate_id,))
        engine.execute(f"UPDATE close_task SET {rerun} WHERE close_id = %s AND task = 'escalated'", (close_id,))
    decide(owner, gate_id)
    with engine.transaction(force_rollback=True):
        engine.execute("UPDATE gate SET lifecycle = 'applied' WHERE gate_id = %s", (gate_id,))
        engine.execute(f"UPDATE close_task SET {rerun} WHERE close_id = %s AND task = 'escalated'", (close_id,))


def test_the_escalation_column_admits_exactly_the_policy_reasons(
    engine: psycopg.Connection[Any], rows: dict[str, Any]
) -> None:
    for reason in EscalationReason:
        _set(engine, rows["close_id"], "t_running", f"escalation = '{reason}'")
    with pytest.raises(psycopg.errors.CheckViolation, match="close_task_escalation_check"):
        _set(engine, rows["close_id"], "t_running", "escalation = 'felt_like_it'")


def test_a_run_closes_only_when_every_task_is_done(engine: psycopg.Connection[Any], rows: dict[str, Any]) -> None:
    with (
        pytest.raises(psycopg.errors.CheckViolation, match="to closed while a task is not done"),
        engine.transaction(force_rollback=True),
    ):
        engine.execute("UPDATE close_run SET status = 'closed' WHERE close_id = %s", (rows["close_id"],))
