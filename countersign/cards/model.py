"""Plain data the chat adapters fill in and the renderers turn into Slack or Teams cards."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from countersign.states import Decision, GateKind, GateStatus, RunState, TaskState, ViewerState

# The words a card admits: the stored words of `countersign.states` (a card's fields hold the Enum members).
GATE_KINDS = tuple(kind.value for kind in GateKind)
GATE_STATUSES = tuple(status.value for status in GateStatus)
DECISIONS = tuple(decision.value for decision in Decision)
RUN_STATES = tuple(state.value for state in RunState)
TASK_STATES = tuple(state.value for state in TaskState)
REASON_MAX_CHARS = 1000  # our cap on a reason typed into a chat door (a Slack modal, a Teams card's input)

# Who a card is shown to, when a door renders one card per person (a Teams refresh): what that person may still do
# (`countersign.states.ViewerState`; the names below are its members).
MAY_DECIDE = ViewerState.MAY_DECIDE  # the gate waits on them
APPROVED_BY_VIEWER = ViewerState.APPROVED
REJECTED_BY_VIEWER = ViewerState.REJECTED
PREPARED_BY_VIEWER = ViewerState.PREPARED  # they prepared or requested the work: someone else decides
NOT_ENTITLED = ViewerState.NOT_ENTITLED  # not a known person, or without the gate's role
VIEWER_STATES = tuple(state.value for state in ViewerState)


S = TypeVar("S", bound=StrEnum)


class CardDataError(ValueError):
    """Card data that cannot be shown. `field` is a path such as `gates[2].quorum`."""

    def __init__(self, field: str, reason: str, source: str = "card data") -> None:
        super().__init__(f"{source}: {field}: {reason}")
        self.source = source
        self.field = field
        self.reason = reason


def _word(states: type[S], value: object, name: str, source: str) -> S:
    """`value` as its member of `states`: a word the Enum does not name is refused, naming the field."""
    allowed = tuple(state.value for state in states)
    if not isinstance(value, str) or value not in allowed:
        raise CardDataError(name, f"expected one of {allowed}, got {value!r}", source)
    return states(value)


@dataclass(frozen=True)
class DecisionLine:
    principal: str
    name: str
    decision: Decision
    reason: str
    decided_at: str
    channel: str
    certified: str = ""  # an approval with edits: the sum certified (decimal text) instead of `proposed`
    proposed: str = ""
    currency: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "decision", _word(Decision, self.decision, "decision", "DecisionLine"))


@dataclass(frozen=True)
class GateCard:
    gate_id: str
    close_id: str
    entity: str
    period: str
    task: str
    task_title: str
    kind: GateKind
    tier: str
    rule: str
    quorum: int
    approvals: int
    approver_role: str
    status: GateStatus
    due_at: str
    overdue: bool
    summary: Mapping[str, Any] = field(default_factory=dict)
    decisions: tuple[DecisionLine, ...] = ()
    page_url: str = (
        ""  # the gate's page on the Close Board (countersign.cards.links.gate_page_url); "" for a status line's gate
    )
    needs_person_key: bool = False  # the gate accepts only a person's own key: decided on the board, never one tap
    voided: tuple[str, ...] = ()  # one sentence per change that voided its approval (countersign.cards.voids)

    def __post_init__(self) -> None:
        if not self.gate_id:
            raise CardDataError("gate_id", "must not be empty", "GateCard")
        if self.needs_person_key and not self.page_url:
            raise CardDataError("page_url", "a gate that needs a person's own key must link to its page", "GateCard")
        object.__setattr__(self, "kind", _word(GateKind, self.kind, "kind", "GateCard"))
        object.__setattr__(self, "status", _word(GateStatus, self.status, "status", "GateCard"))
        if self.quorum < 1:
            raise CardDataError("quorum", f"must be at least 1, got {self.quorum}", "GateCard")
        if self.approvals < 0:
            raise CardDataError("approvals", f"must not be negative, got {self.approvals}", "GateCard")

    @property
    def approvals_missing(self) -> int:
        return max(self.quorum - self.approvals, 0)


@dataclass(frozen=True)
class Viewer:
    """The one person a card is rendered for, and a word for them (`prompt`: e.g. a rejection needs a reason)."""

    state: ViewerState
    prompt: str = ""

    def __post_init__(self) -> None:
        if self.state not in VIEWER_STATES:
            raise CardDataError("state", f"expected one of {VIEWER_STATES}, got {self.state!r}", "Viewer")
        object.__setattr__(self, "state", ViewerState(self.state))

    @property
    def may_decide(self) -> bool:
        return self.state == MAY_DECIDE


@dataclass(frozen=True)
class TaskLine:
    task: str
    status: TaskState
    attempt: int
    reason: str | None = None
    title: str = ""  # the workflow file's title; the task id when the close recorded none

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", _word(TaskState, self.status, "status", "TaskLine"))

    @property
    def display_title(self) -> str:
        return self.title or self.task


@dataclass(frozen=True)
class StatusCard:
    close_id: str
    entity: str
    period: str
    status: RunState
    status_reason: str | None
    tasks: tuple[TaskLine, ...]
    gates: tuple[GateCard, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", _word(RunState, self.status, "status", "StatusCard"))

    @classmethod
    def from_status_json(cls, d: Mapping[str, Any]) -> StatusCard:
        """Build from the `close status --json` object. Its gates carry no summary: they get an empty one.

        Task titles come from the object (the workflow file's, recorded when the close started); a task without one
        is shown by its id.
        """
        reader = _Reader(d, "", "close status JSON")
        entity = reader.text("entity")
        period = reader.text("period")
        close_id = reader.text("close_id")
        tasks = tuple(
            TaskLine(
                task=t.text("task"),
                status=t.state("status", TaskState),
                attempt=t.integer("attempt"),
                reason=t.optional_text("reason"),
                title=t.optional_text("title") or "",
            )
            for t in reader.objects("tasks")
        )
        gates = tuple(_gate_from_status(g, close_id, entity, period) for g in reader.objects("gates"))
        return cls(
            close_id=close_id,
            entity=entity,
            period=period,
            status=reader.state("status", RunState),
            status_reason=reader.optional_text("status_reason"),
            tasks=tasks,
            gates=gates,
        )


@dataclass(frozen=True)
class TraceExportCard:
    close_id: str
    entity: str
    period: str
    format: str
    events: int
    first_seq: int
    last_seq: int
    head_hash_hex: str
    filename: str


def _gate_from_status(g: _Reader, close_id: str, entity: str, period: str) -> GateCard:
    task = g.text("task")
    decisions = tuple(
        DecisionLine(
            principal=d.text("principal"),
            name=d.optional_text("name") or d.text("principal"),
            decision=d.state("decision", Decision),
            reason=d.optional_text("reason") or "",
            decided_at=d.text("decided_at"),
            channel=d.optional_text("channel") or "",
        )
        for d in g.objects("decisions", required=False)
    )
    return GateCard(
        gate_id=g.text("gate_id"),
        close_id=close_id,
        entity=entity,
        period=period,
        task=task,
        task_title=g.optional_text("title") or task,
        kind=g.state("kind", GateKind),
        tier=g.text("tier"),
        rule=g.optional_text("rule") or "",
        quorum=g.integer("quorum", minimum=1),
        approvals=g.integer("approvals"),
        approver_role=g.text("approver_role"),
        status=g.state("status", GateStatus),
        due_at=g.text("due_at"),
        overdue=g.flag("overdue"),
        summary={},
        decisions=decisions,
    )


class _Reader:
    """Typed access to one JSON object, naming the field path in every error."""

    def __init__(self, value: object, path: str, source: str) -> None:
        if not isinstance(value, Mapping):
            raise CardDataError(path or "$", f"expected an object, got {type(value).__name__}", source)
        self._value: Mapping[str, Any] = value
        self._path = path
        self._source = source

    def _where(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def _error(self, key: str, reason: str) -> CardDataError:
        return CardDataError(self._where(key), reason, self._source)

    def text(self, key: str) -> str:
        value = self._value.get(key)
        if not isinstance(value, str) or not value:
            raise self._error(key, f"expected a non-empty string, got {value!r}")
        return value

    def optional_text(self, key: str) -> str | None:
        value = self._value.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._error(key, f"expected a string or null, got {value!r}")
        return value

    def state(self, key: str, states: type[S]) -> S:
        """The word at `key` as its member of `states` (an Enum of countersign.states); any other word is refused."""
        return _word(states, self._value.get(key), self._where(key), self._source)

    def integer(self, key: str, minimum: int = 0) -> int:
        value = self._value.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._error(key, f"expected an integer, got {value!r}")
        if value < minimum:
            raise self._error(key, f"must be at least {minimum}, got {value}")
        return value

    def flag(self, key: str) -> bool:
        value = self._value.get(key, False)
        if not isinstance(value, bool):
            raise self._error(key, f"expected true or false, got {value!r}")
        return value

    def objects(self, key: str, required: bool = True) -> list[_Reader]:
        value = self._value.get(key)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise self._error(key, f"expected a list, got {type(value).__name__}")
        return [_Reader(item, f"{self._where(key)}[{i}]", self._source) for i, item in enumerate(value)]
