"""The state machines of a close: runs, tasks and gates, each with one transition table. Pure: no I/O.

The states themselves are stored words and live with the others in `countersign.states`.

Every state change in the engine goes through `countersign.engine.supervisor`, which checks it here; migration
0011 seeds the same table into `lifecycle_transition`, and triggers refuse any other change, whoever connects.
Self-transitions (a running task storing its result) are not state changes and are always allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeAlias

from countersign.states import GateLifecycle, Machine, RunState, TaskState

State: TypeAlias = RunState | TaskState | GateLifecycle

STATES: Mapping[Machine, type[RunState] | type[TaskState] | type[GateLifecycle]] = MappingProxyType(
    {Machine.RUN: RunState, Machine.TASK: TaskState, Machine.GATE: GateLifecycle}
)

NO_CHANGE = "no change"

_R, _T, _G = RunState, TaskState, GateLifecycle
_RUN_TARGET_NAMES = {
    _R.RUNNING: "work resumed",
    _R.HALTED: "a task escalated",
    _R.AWAITING_APPROVAL: "waiting on a gate",
    _R.BLOCKED: "a task was rejected or failed",
    _R.CLOSED: "every task done",
}
_RUN_OPEN = (_R.RUNNING, _R.HALTED, _R.AWAITING_APPROVAL, _R.BLOCKED)

# A run's status is a summary of its tasks, recomputed after every step; a step may be lost before the summary is
# stored, so any open status may follow any other. Only `closed` is final (and the database admits it only when
# every task is done).
RUN_TRANSITIONS: Mapping[tuple[State, State], str] = MappingProxyType(
    {(source, target): _RUN_TARGET_NAMES[target] for source in _RUN_OPEN for target in _R if source != target}
)

TASK_TRANSITIONS: Mapping[tuple[State, State], str] = MappingProxyType(
    {
        (_T.PENDING, _T.RUNNING): "start",
        (_T.RUNNING, _T.PENDING): "retry later",
        (_T.RUNNING, _T.AWAITING_GATE): "record result awaiting gate",
        (_T.RUNNING, _T.DONE): "complete without gate",
        (_T.RUNNING, _T.HALTED): "escalate",
        (_T.RUNNING, _T.FAILED): "fail",
        (_T.AWAITING_GATE, _T.DONE): "gate approved",
        (_T.AWAITING_GATE, _T.REJECTED): "gate rejected",
        (_T.AWAITING_GATE, _T.PENDING): "gate expired: run again",
        (_T.AWAITING_GATE, _T.HALTED): "escalate while awaiting gate",
        (_T.AWAITING_GATE, _T.FAILED): "decision proof invalid",
        (_T.HALTED, _T.PENDING): "escalation approved or expired: run again",
        (_T.HALTED, _T.REJECTED): "escalation rejected",
        (_T.HALTED, _T.FAILED): "decision proof invalid",
        (_T.FAILED, _T.PENDING): "dead letter replayed",
        (_T.DONE, _T.PENDING): "sign-off voided: run again",
    }
)

GATE_TRANSITIONS: Mapping[tuple[State, State], str] = MappingProxyType(
    {
        (_G.OPEN, _G.APPLIED): "outcome applied",
        (_G.OPEN, _G.EXPIRED): "expired undecided",
        (_G.OPEN, _G.CANCELLED): "cancelled",
    }
)

TRANSITIONS: Mapping[Machine, Mapping[tuple[State, State], str]] = MappingProxyType(
    {Machine.RUN: RUN_TRANSITIONS, Machine.TASK: TASK_TRANSITIONS, Machine.GATE: GATE_TRANSITIONS}
)

TERMINAL: Mapping[Machine, frozenset[str]] = MappingProxyType(
    {
        Machine.RUN: frozenset({_R.CLOSED}),
        Machine.TASK: frozenset({_T.DONE, _T.REJECTED}),
        Machine.GATE: frozenset({_G.APPLIED, _G.EXPIRED, _G.CANCELLED}),
    }
)


class IllegalTransition(Exception):
    """A state change the machine's table does not allow, with the reason it does not."""

    def __init__(self, machine: Machine | str, source: str, target: str, why: str) -> None:
        super().__init__(f"{machine} cannot go from {source} to {target}: {why}")
        self.machine = machine
        self.source = source
        self.target = target
        self.why = why


def illegal_pairs(machine: Machine) -> list[tuple[str, str]]:
    """Every (source, target) pair of distinct states the machine's table does not allow."""
    states = list(STATES[machine])
    table = TRANSITIONS[machine]
    return [(s, t) for s in states for t in states if s != t and (s, t) not in table]


def why_illegal(machine: Machine | str, source: str, target: str) -> str:
    """Why the move is not in the table, in words a person reading an error understands."""
    try:
        machine = Machine(machine)
        states = STATES[machine]
        source_state, target_state = states(source), states(target)
    except ValueError:
        return f"{source} -> {target} is not a move of the {machine} machine (unknown machine or state)"
    if (source_state, target_state) in TRANSITIONS[machine]:
        return "the move is legal"
    if machine is Machine.RUN:
        return "a closed run stays closed: its period is closed"
    if machine is Machine.GATE:
        if source_state in TERMINAL[machine]:
            return f"a gate's lifecycle moves only forward, from open; {source} is final"
        return "nothing reopens a gate"
    return _why_task_move_is_illegal(TaskState(source_state), TaskState(target_state))


def _why_task_move_is_illegal(source: TaskState, target: TaskState) -> str:
    if source in TERMINAL[Machine.TASK]:
        return f"{source} is terminal: the task's outcome is final (a voided sign-off alone reopens done work)"
    if source is _T.HALTED:
        return (
            "escalated work completes only through a human gate: it leaves halted when a person approves a re-run "
            "(to pending) or rejects it"
        )
    if source is _T.FAILED:
        return "failed work comes back only by replaying its dead letter (to pending)"
    if source is _T.PENDING:
        return "work that has not started has no result: it must start first (pending -> running)"
    if target is _T.REJECTED:
        return "only a person rejects work, through a gate"
    if source is _T.AWAITING_GATE:
        return "a gate's outcome decides what happens next; running again starts from pending as a new attempt"
    return f"{target} is not reachable from {source}"


def check_transition(machine: Machine | str, source: str, target: str) -> str:
    """The name of the move from `source` to `target`; raises `IllegalTransition` when the table forbids it."""
    if source == target and _is_state(machine, source):
        return NO_CHANGE
    try:
        states = STATES[Machine(machine)]
        name = TRANSITIONS[Machine(machine)].get((states(source), states(target)))
    except ValueError:
        name = None
    if name is None:
        raise IllegalTransition(machine, source, target, why_illegal(machine, source, target))
    return name


def _is_state(machine: Machine | str, value: str) -> bool:
    try:
        STATES[Machine(machine)](value)
    except ValueError:
        return False
    return True
