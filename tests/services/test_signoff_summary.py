"""A sign-off gate's summary, as the Close Board reads it: each task's status is the TaskState its word names, and a
word no TaskState names is refused, naming the task, never shown as a guess. Pure: no database."""

from __future__ import annotations

import pytest

from countersign.services.board_evidence import SummaryWordUnknown, signoff
from countersign.states import TaskState


def _summary(*statuses: object) -> dict[str, object]:
    return {
        "kind": "signoff",
        "tasks": [
            {"task": f"close.t{i}", "title": f"Task {i}", "status": status, "attempt": 1}
            for i, status in enumerate(statuses)
        ],
        "journals": [],
    }


def test_each_task_status_is_its_task_state() -> None:
    view = signoff(_summary("done", "awaiting_gate"))
    assert view is not None
    assert [t.status for t in view.tasks] == [TaskState.DONE, TaskState.AWAITING_GATE]
    assert all(type(t.status) is TaskState for t in view.tasks)


@pytest.mark.parametrize("word", ["finished", "", None, 3, "DONE"])
def test_a_status_no_task_state_names_is_refused_naming_the_task(word: object) -> None:
    with pytest.raises(SummaryWordUnknown) as refused:
        signoff(_summary("done", word))
    assert refused.value.field == "tasks[1].status"
    assert f"tasks[1].status: expected one of {tuple(s.value for s in TaskState)}, got {word!r}" in str(refused.value)


def test_another_gate_has_no_signoff() -> None:
    assert signoff({"kind": "bank", "accounts": []}) is None
