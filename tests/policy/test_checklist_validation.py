from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from policy import ChecklistPolicyMismatch, Policy, PolicyError, load_checklist, parse_checklist

SOURCE = "config/checklist.yaml"
TaskEntry = Callable[[str], dict[str, Any]]


def refuse(data: object, policy: Policy) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        parse_checklist(data, SOURCE, policy)
    assert str(caught.value).startswith(f"{SOURCE}: {caught.value.field}: ")
    return caught.value


def test_flipped_requires_gate_on_gated_task_is_refused_naming_task_and_values(
    policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry
) -> None:
    task_entry("intercompany")["requires_gate"] = False
    with pytest.raises(ChecklistPolicyMismatch) as caught:
        parse_checklist(checklist_data, SOURCE, policy)
    mismatch = caught.value
    assert (mismatch.task, mismatch.checklist_value, mismatch.policy_value) == ("intercompany", False, True)
    assert str(mismatch) == (
        "config/checklist.yaml: tasks[intercompany].requires_gate: "
        "checklist says false but policy (tier medium) requires a gate"
    )


def test_claimed_gate_on_ungated_task_is_refused(
    policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry
) -> None:
    task_entry("ap_reconciliation")["requires_gate"] = True
    with pytest.raises(ChecklistPolicyMismatch) as caught:
        parse_checklist(checklist_data, SOURCE, policy)
    assert (caught.value.task, caught.value.checklist_value, caught.value.policy_value) == (
        "ap_reconciliation",
        True,
        False,
    )
    assert "checklist says true but policy (tier low) requires no gate" in str(caught.value)


def test_mismatch_in_a_file_names_that_file(tmp_path: Path, policy: Policy) -> None:
    path = tmp_path / "checklist.yaml"
    path.write_text(
        "version: 1\ntasks:\n"
        "  - {id: close_signoff, title: Sign-off, specialist: null, depends_on: [],"
        " risk_tier: critical, requires_gate: false}\n"
    )
    with pytest.raises(ChecklistPolicyMismatch, match=rf"^{path}: tasks\[close_signoff\]\.requires_gate: "):
        load_checklist(path, policy)


def test_malformed_yaml_is_refused(tmp_path: Path, policy: Policy) -> None:
    path = tmp_path / "checklist.yaml"
    path.write_text("tasks:\n  - id: a\n   title: misindented\n")
    with pytest.raises(PolicyError) as caught:
        load_checklist(path, policy)
    assert caught.value.field == "<document>"
    assert "malformed YAML" in caught.value.reason


def test_missing_task_field_is_named(policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry) -> None:
    del task_entry("accruals")["risk_tier"]
    assert refuse(checklist_data, policy).field == "tasks[accruals].risk_tier"


def test_unknown_tier_is_named(policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["risk_tier"] = "extreme"
    error = refuse(checklist_data, policy)
    assert error.field == "tasks[accruals].risk_tier"
    assert "extreme" in error.reason


def test_unknown_dependency_is_named(policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["depends_on"] = ["fixed_assets"]
    error = refuse(checklist_data, policy)
    assert error.field == "tasks[accruals].depends_on"
    assert "fixed_assets" in error.reason


def test_duplicate_task_id_is_named(policy: Policy, checklist_data: dict[str, Any]) -> None:
    checklist_data["tasks"].append(dict(checklist_data["tasks"][0]))
    error = refuse(checklist_data, policy)
    assert error.field == "tasks[7].id"
    assert "bank_reconciliation" in error.reason


def test_cycle_is_refused_naming_the_cycle(
    policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry
) -> None:
    task_entry("ap_reconciliation")["depends_on"] = ["close_signoff"]
    error = refuse(checklist_data, policy)
    assert error.field == "tasks[ap_reconciliation].depends_on"
    assert error.reason == (
        "dependency cycle: ap_reconciliation -> close_signoff -> variance_analysis -> ap_reconciliation"
    )


def test_self_dependency_is_a_cycle(policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("intercompany")["depends_on"] = ["intercompany"]
    assert refuse(checklist_data, policy).reason == "dependency cycle: intercompany -> intercompany"


def test_unknown_specialist_is_refused(policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["specialist"] = "payroll"
    assert refuse(checklist_data, policy).field == "tasks[accruals].specialist"


def test_requires_gate_must_be_a_boolean(policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["requires_gate"] = "yes"
    assert refuse(checklist_data, policy).field == "tasks[accruals].requires_gate"


def test_non_string_dependency_is_named(policy: Policy, checklist_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["depends_on"] = [7]
    assert refuse(checklist_data, policy).field == "tasks[accruals].depends_on[0]"


def test_task_without_id_is_named_by_position(policy: Policy, checklist_data: dict[str, Any]) -> None:
    del checklist_data["tasks"][2]["id"]
    assert refuse(checklist_data, policy).field == "tasks[2].id"


def test_a_smaller_checklist_is_allowed(policy: Policy) -> None:
    data = {
        "version": 1,
        "tasks": [
            {
                "id": "bank",
                "title": "Bank",
                "specialist": "reconciliation",
                "depends_on": [],
                "risk_tier": "low",
                "requires_gate": False,
            },
        ],
    }
    assert parse_checklist(data, SOURCE, policy).task_ids == ("bank",)
