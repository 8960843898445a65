"""Random sequences of legal and illegal moves of one task: `move_task` agrees with the model, and so does the row.

The model knows only the transition table and the escalation rules. Each step asks `move_task` (as the engine's
role) to take the task somewhere, with or without a new attempt or an escalation reason; or opens, decides and
settles a gate for the current attempt. After every step the database row must equal the model.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from countersign.bootstrap.database import Database
from countersign.engine.lifecycle import TRANSITIONS, IllegalTransition
from countersign.engine.supervisor import move_gate, move_task
from countersign.policy import EscalationReason
from countersign.states import GateLifecycle, Machine, TaskState
from tests.engine.lifecycle_support import cloned_database, decide, new_close, put_gate, seed_approver

GATE_ENDINGS = ("approved", "rejected", "expired", "undecided")


@dataclass
class GateModel:
    kind: str
    lifecycle: str
    status: str


@dataclass
class TaskModel:
    status: TaskState = TaskState.PENDING
    attempt: int = 1
    escalation: str | None = None
    gates: dict[int, GateModel] = field(default_factory=dict)

    def allows(self, to: TaskState, *, attempt: int, escalation: str | None) -> bool:
        """Whether the supervisor must let the task go from its status to `to` (the rules of migrations 0011, 0015)."""
        source = self.status
        if attempt != self.attempt and not (attempt == self.attempt + 1 and to is TaskState.PENDING != source):
            return False  # an attempt counts up by one, into a re-run (migration 0015)
        if source == to:
            return True
        if (source, to) not in TRANSITIONS[Machine.TASK]:
            return False
        if source is TaskState.DONE:
            return False  # done work reopens only over a voided sign-off (ADR 0046), which this model never records
        if to is TaskState.HALTED and escalation is None:
            return False
        if to is TaskState.DONE:
            if source != TaskState.AWAITING_GATE:
                return escalation is None
            gate = self.gates.get(attempt)
            return gate is not None and (gate.kind, gate.lifecycle, gate.status) == ("approval", "applied", "approved")
        if source == TaskState.HALTED and to is TaskState.PENDING:
            gate = self.gates.get(self.attempt)
            return gate is not None and (
                (gate.kind, gate.lifecycle, gate.status) == ("escalation", "applied", "approved")
                or (gate.kind, gate.lifecycle) == ("escalation", "expired")
            )
        return True


class TaskLifecycle(RuleBasedStateMachine):
    database: Database
    close_id: str

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.owner = self.database.connect(autocommit=True)
        self.engine = self.loop.run_until_complete(
            psycopg.AsyncConnection.connect(self.database.engine_url, autocommit=True)
        )
        self.task = f"model_{uuid.uuid4().hex[:12]}"
        self.model = TaskModel()
        self._run(
            self.engine.execute("INSERT INTO close_task (close_id, task) VALUES (%s, %s)", (self.close_id, self.task))
        )

    def _run(self, step: Any) -> Any:
        return self.loop.run_until_complete(step)

    def teardown(self) -> None:
        self._run(self.engine.close())
        self.loop.close()
        self.owner.close()

    @rule(
        to=st.sampled_from(TaskState),
        expect=st.sets(st.sampled_from(TaskState), min_size=1) | st.just(set(TaskState)),
        new_attempt=st.booleans(),
        escalation=st.none() | st.sampled_from(EscalationReason),
    )
    def move(self, to: TaskState, expect: set[TaskState], new_attempt: bool, escalation: str | None) -> None:
        self._step(to, expect, new_attempt, escalation)

    @rule(data=st.data(), new_attempt=st.booleans(), escalation=st.none() | st.sampled_from(EscalationReason))
    def move_along_the_table(self, data: st.DataObject, new_attempt: bool, escalation: str | None) -> None:
        """A move the table has from the current state, so that walks go deep (the escalation rules may refuse it)."""
        targets = sorted(TaskState(t) for s, t in TRANSITIONS[Machine.TASK] if s == self.model.status)
        if targets:
            self._step(data.draw(st.sampled_from(targets)), set(TaskState), new_attempt, escalation)

    def _step(self, to: TaskState, expect: set[TaskState], new_attempt: bool, escalation: str | None) -> None:
        attempt = self.model.attempt + 1 if new_attempt else None
        escalation_after = escalation or self.model.escalation
        attempt_after = attempt or self.model.attempt
        if self.model.status not in expect:
            assert self._move(to, expect, attempt, escalation) is False
            return
        allowed = self.model.allows(to, attempt=attempt_after, escalation=escalation_after)
        event(f"{self.model.status} -> {to}: {'moved' if allowed else 'refused'}")
        if allowed:
            assert self._move(to, expect, attempt, escalation) is True
            self.model.status, self.model.attempt, self.model.escalation = to, attempt_after, escalation_after
            return
        with pytest.raises(IllegalTransition) as refused:
            self._move(to, expect, attempt, escalation)
        assert (refused.value.source, refused.value.target) == (self.model.status, to)

    def _move(self, to: TaskState, expect: set[TaskState], attempt: int | None, escalation: str | None) -> bool:
        moved: bool = self._run(
            move_task(
                self.engine,
                self.close_id,
                self.task,
                to,
                expect=expect,
                attempt=attempt,
                escalation=escalation,
                reason=f"to {to}",
            )
        )
        return moved

    @rule(kind=st.sampled_from(("fitting", "approval", "escalation")), ending=st.sampled_from(GATE_ENDINGS))
    def settle_gate(self, kind: str, ending: str) -> None:
        """Open the current attempt's gate (once), let a person decide it or not, and let the engine settle it.

        A `fitting` gate is the kind the task's state waits for (escalation when halted, approval otherwise).
        """
        if kind == "fitting":
            kind = "escalation" if self.model.status == TaskState.HALTED else "approval"
        attempt = self.model.attempt
        if attempt in self.model.gates:
            return
        gate_id = put_gate(self.owner, self.close_id, self.task, attempt=attempt, kind=kind)
        gate = GateModel(kind, "open", "open")
        if ending in ("approved", "rejected"):
            decide(self.owner, gate_id, "approve" if ending == "approved" else "reject")
            assert self._run(move_gate(self.engine, gate_id, GateLifecycle.APPLIED)) is True
            gate = GateModel(kind, "applied", ending)
        elif ending == "expired":
            assert self._run(move_gate(self.engine, gate_id, GateLifecycle.EXPIRED)) is True
            gate = GateModel(kind, "expired", "expired")
        if gate.lifecycle != "open":  # a settled gate moves no further
            assert self._run(move_gate(self.engine, gate_id, GateLifecycle.CANCELLED)) is False
        self.model.gates[attempt] = gate

    @precondition(
        lambda self: (
            self.model.status in (TaskState.AWAITING_GATE, TaskState.HALTED)
            and self.model.attempt not in self.model.gates
        )
    )
    @rule()
    def a_person_approves_the_waiting_gate(self) -> None:
        self.settle_gate("fitting", "approved")

    @invariant()
    def the_row_is_the_model(self) -> None:
        row = self.owner.execute(
            "SELECT status, attempt, escalation FROM close_task WHERE close_id = %s AND task = %s",
            (self.close_id, self.task),
        ).fetchone()
        assert row == (self.model.status, self.model.attempt, self.model.escalation)


@pytest.fixture(scope="module")
def shared_close(pg_server_url: str, template_url: str) -> Iterator[tuple[Database, str]]:
    with cloned_database(pg_server_url, template_url) as database, database.connect(autocommit=True) as owner:
        seed_approver(owner)
        yield database, new_close(owner)


def test_move_task_succeeds_exactly_when_the_model_allows_and_the_row_follows(
    shared_close: tuple[Database, str],
) -> None:
    database, close_id = shared_close

    class Run(TaskLifecycle):
        pass

    Run.database, Run.close_id = database, close_id
    run_state_machine_as_test(
        Run,
        settings=settings(
            max_examples=40,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
