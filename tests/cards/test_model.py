from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from countersign.cards.model import CardDataError, StatusCard, TaskLine
from countersign.states import Decision, GateKind, GateStatus, RunState, TaskState
from tests.cards.fixtures import DEMO_STATUS, SIGNOFF_GATE_ID, open_gate_cards


def test_status_card_from_demo_status_json_keeps_every_task_gate_and_decision() -> None:
    status = StatusCard.from_status_json({**DEMO_STATUS, "deliveries_failed": 0})
    assert (status.entity, status.period, status.status) == ("DEMO-42-1", "2026-10", "closed")
    assert [t.task for t in status.tasks][:2] == ["bank_reconciliation", "ap_reconciliation"]
    assert len(status.tasks) == 7 and len(status.gates) == 6
    signoff = next(g for g in status.gates if g.gate_id == SIGNOFF_GATE_ID)
    assert (signoff.entity, signoff.period, signoff.close_id) == ("DEMO-42-1", "2026-10", DEMO_STATUS["close_id"])
    assert signoff.task_title == "Close sign-off"
    assert signoff.summary == {}
    assert (signoff.quorum, signoff.approvals, signoff.approver_role) == (2, 2, "cfo")
    assert [d.principal for d in signoff.decisions] == ["bob.osei", "carol.main"]


def _corrupt(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(DEMO_STATUS)
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("gates", 1, "quorum"), "two", "gates[1].quorum"),
        (("gates", 1, "quorum"), 0, "gates[1].quorum"),
        (("gates", 0, "status"), "pending", "gates[0].status"),
        (("gates", 2, "kind"), None, "gates[2].kind"),
        (("gates", 5, "decisions", 1, "decision"), "abstain", "gates[5].decisions[1].decision"),
        (("tasks", 3, "attempt"), True, "tasks[3].attempt"),
        (("tasks", 2, "status"), "finished", "tasks[2].status"),
        (("status",), "done", "status"),
        (("tasks",), KeyError, "tasks"),
        (("entity",), "", "entity"),
    ],
)
def test_bad_status_json_names_the_field_and_the_reason(path: tuple[Any, ...], value: Any, field: str) -> None:
    with pytest.raises(CardDataError) as excinfo:
        StatusCard.from_status_json(_corrupt(path, value))
    assert excinfo.value.field == field
    assert excinfo.value.source == "close status JSON"
    assert str(excinfo.value).startswith(f"close status JSON: {field}: ")


def test_status_json_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(CardDataError, match="expected an object"):
        StatusCard.from_status_json([])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind": "vote"}, "kind"),
        ({"status": "closed"}, "status"),
        ({"quorum": 0}, "quorum"),
        ({"approvals": -1}, "approvals"),
        ({"gate_id": ""}, "gate_id"),
    ],
)
def test_gate_card_refuses_values_no_gate_can_have(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(CardDataError) as excinfo:
        replace(open_gate_cards()["bank"], **changes)
    assert excinfo.value.field == field and excinfo.value.source == "GateCard"


def test_approvals_missing_never_goes_negative() -> None:
    card = open_gate_cards()["signoff"]
    assert [replace(card, approvals=n).approvals_missing for n in (0, 1, 2, 3)] == [2, 1, 0, 0]


def test_a_cards_states_are_the_enums_of_the_stored_words() -> None:
    """Status JSON's words come back as the Enums of countersign.states, and render as the same words."""
    status = StatusCard.from_status_json(DEMO_STATUS)
    assert type(status.status) is RunState and status.status is RunState.CLOSED
    assert all(type(t.status) is TaskState for t in status.tasks)
    assert all(type(g.kind) is GateKind and type(g.status) is GateStatus for g in status.gates)
    assert all(type(d.decision) is Decision for g in status.gates for d in g.decisions)
    assert f"{status.status}" == "closed" and str(status.gates[0].kind) == DEMO_STATUS["gates"][0]["kind"]


def test_a_card_built_with_a_word_holds_its_enum() -> None:
    """A builder passing the word itself gets the member; a word no Enum names is refused, naming the field."""
    card = replace(open_gate_cards()["bank"], kind="approval", status="open")
    assert card.kind is GateKind.APPROVAL and card.status is GateStatus.OPEN
    assert TaskLine("close.bank", "done", 1).status is TaskState.DONE  # type: ignore[arg-type]
    with pytest.raises(CardDataError) as excinfo:
        TaskLine("close.bank", "finished", 1)  # type: ignore[arg-type]
    assert (excinfo.value.field, excinfo.value.source) == ("status", "TaskLine")
