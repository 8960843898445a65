from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from countersign.policy import (
    Policy,
    PolicyError,
    WorkflowPolicyMismatch,
    load_workflow,
    load_workflows,
    parse_workflow,
)
from tests.policy.conftest import CLOSE_WORKFLOW_PATH, WORKFLOWS_DIR

SOURCE = "config/workflows/close.yaml"
TaskEntry = Callable[[str], dict[str, Any]]


def refuse(data: object, policy: Policy) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        parse_workflow(data, SOURCE, policy)
    assert str(caught.value).startswith(f"{SOURCE}: {caught.value.field}: ")
    return caught.value


def test_flipped_requires_gate_on_gated_task_is_refused_naming_task_and_values(
    policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry
) -> None:
    task_entry("intercompany")["requires_gate"] = False
    with pytest.raises(WorkflowPolicyMismatch) as caught:
        parse_workflow(workflow_data, SOURCE, policy)
    mismatch = caught.value
    assert (mismatch.task, mismatch.workflow_value, mismatch.policy_value) == ("intercompany", False, True)
    assert str(mismatch) == (
        "config/workflows/close.yaml: tasks[intercompany].requires_gate: "
        "workflow says false but policy (tier medium) requires a gate"
    )


def test_claimed_gate_on_ungated_task_is_refused(
    policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry
) -> None:
    task_entry("ap_reconciliation")["requires_gate"] = True
    with pytest.raises(WorkflowPolicyMismatch) as caught:
        parse_workflow(workflow_data, SOURCE, policy)
    assert (caught.value.task, caught.value.workflow_value, caught.value.policy_value) == (
        "ap_reconciliation",
        True,
        False,
    )
    assert "workflow says true but policy (tier low) requires no gate" in str(caught.value)


def small_workflow(name: str, *, risk_tier: str = "critical", requires_gate: bool = True) -> str:
    """A one-task workflow file's text, named `name`."""
    return (
        f"version: 1\nworkflow: {name}\ntitle: A test workflow\ntasks:\n"
        f"  - {{id: sign_off, title: Sign-off, handler: {name}.sign_off, depends_on: [],"
        f" risk_tier: {risk_tier}, requires_gate: {str(requires_gate).lower()}}}\n"
    )


def test_mismatch_in_a_workflow_other_than_the_close_names_that_file(tmp_path: Path, policy: Policy) -> None:
    path = tmp_path / "payment_certificate.yaml"
    path.write_text(small_workflow("payment_certificate", requires_gate=False))
    with pytest.raises(WorkflowPolicyMismatch, match=rf"^{path}: tasks\[sign_off\]\.requires_gate: "):
        load_workflow(path, policy)


def test_claimed_gate_on_an_ungated_task_of_another_workflow_is_refused(tmp_path: Path, policy: Policy) -> None:
    path = tmp_path / "payment_certificate.yaml"
    path.write_text(small_workflow("payment_certificate", risk_tier="low", requires_gate=True))
    with pytest.raises(WorkflowPolicyMismatch) as caught:
        load_workflow(path, policy)
    assert (caught.value.task, caught.value.workflow_value, caught.value.policy_value) == ("sign_off", True, False)


def test_a_workflow_that_agrees_with_policy_loads_under_its_own_name(tmp_path: Path, policy: Policy) -> None:
    path = tmp_path / "payment_certificate.yaml"
    path.write_text(small_workflow("payment_certificate"))
    workflow = load_workflow(path, policy)
    assert (workflow.name, workflow.title, workflow.task_ids) == (
        "payment_certificate",
        "A test workflow",
        ("sign_off",),
    )
    assert workflow.task("sign_off").handler == "payment_certificate.sign_off"
    assert workflow.task("sign_off").specialist is None, "specialist may be left out"


def test_a_workflow_named_differently_from_its_file_is_refused(tmp_path: Path, policy: Policy) -> None:
    path = tmp_path / "close.yaml"
    path.write_text(small_workflow("payment_certificate"))
    with pytest.raises(PolicyError) as caught:
        load_workflow(path, policy)
    assert (caught.value.source, caught.value.field) == (str(path), "workflow")
    assert "'payment_certificate'" in caught.value.reason and "'close.yaml'" in caught.value.reason


@pytest.mark.parametrize("path", sorted(WORKFLOWS_DIR.glob("*.yaml")), ids=lambda path: path.name)
def test_every_shipped_workflow_file_loads_against_the_shipped_policy(path: Path, policy: Policy) -> None:
    workflow = load_workflow(path, policy)
    assert workflow.name == path.stem and workflow.tasks


def test_the_shipped_folder_holds_the_close(policy: Policy) -> None:
    workflows = load_workflows(WORKFLOWS_DIR, policy)
    assert "close" in workflows
    assert sorted(workflows) == sorted(path.stem for path in WORKFLOWS_DIR.glob("*.yaml"))


def test_load_workflows_checks_every_file_in_the_folder(tmp_path: Path, policy: Policy) -> None:
    (tmp_path / "close.yaml").write_bytes(CLOSE_WORKFLOW_PATH.read_bytes())
    (tmp_path / "payment_certificate.yaml").write_text(small_workflow("payment_certificate"))
    (tmp_path / "notes.txt").write_text("not a workflow")
    assert sorted(load_workflows(tmp_path, policy)) == ["close", "payment_certificate"]
    (tmp_path / "payment_certificate.yaml").write_text(small_workflow("payment_certificate", requires_gate=False))
    with pytest.raises(WorkflowPolicyMismatch) as caught:
        load_workflows(tmp_path, policy)
    assert caught.value.source == str(tmp_path / "payment_certificate.yaml")


def test_load_workflows_refuses_an_empty_or_missing_folder(tmp_path: Path, policy: Policy) -> None:
    with pytest.raises(PolicyError, match="no workflow files"):
        load_workflows(tmp_path, policy)
    with pytest.raises(PolicyError, match="cannot read folder"):
        load_workflows(tmp_path / "absent", policy)


@pytest.mark.parametrize(
    "handler", ["bank_reconciliation", "Close.bank", "close.", "close..bank", "close.bank-rec", ""]
)
def test_bad_handler_name_is_refused(
    policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry, handler: str
) -> None:
    task_entry("accruals")["handler"] = handler
    assert refuse(workflow_data, policy).field == "tasks[accruals].handler"


def test_missing_handler_is_named(policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry) -> None:
    del task_entry("accruals")["handler"]
    assert refuse(workflow_data, policy).field == "tasks[accruals].handler"


@pytest.mark.parametrize("name", ["Close", "close-2", "", 7])
def test_bad_workflow_name_is_refused(policy: Policy, workflow_data: dict[str, Any], name: object) -> None:
    workflow_data["workflow"] = name
    assert refuse(workflow_data, policy).field == "workflow"


@pytest.mark.parametrize("key", ["workflow", "title", "version", "tasks"])
def test_missing_top_level_key_is_named(policy: Policy, workflow_data: dict[str, Any], key: str) -> None:
    del workflow_data[key]
    assert refuse(workflow_data, policy).field == key


def test_malformed_yaml_is_refused(tmp_path: Path, policy: Policy) -> None:
    path = tmp_path / "close.yaml"
    path.write_text("tasks:\n  - id: a\n   title: misindented\n")
    with pytest.raises(PolicyError) as caught:
        load_workflow(path, policy)
    assert caught.value.field == "<document>"
    assert "malformed YAML" in caught.value.reason


def test_missing_task_field_is_named(policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry) -> None:
    del task_entry("accruals")["risk_tier"]
    assert refuse(workflow_data, policy).field == "tasks[accruals].risk_tier"


def test_unknown_tier_is_named(policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["risk_tier"] = "extreme"
    error = refuse(workflow_data, policy)
    assert error.field == "tasks[accruals].risk_tier"
    assert "extreme" in error.reason


def test_unknown_dependency_is_named(policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["depends_on"] = ["fixed_assets"]
    error = refuse(workflow_data, policy)
    assert error.field == "tasks[accruals].depends_on"
    assert "fixed_assets" in error.reason


def test_duplicate_task_id_is_named(policy: Policy, workflow_data: dict[str, Any]) -> None:
    workflow_data["tasks"].append(dict(workflow_data["tasks"][0]))
    error = refuse(workflow_data, policy)
    assert error.field == "tasks[7].id"
    assert "bank_reconciliation" in error.reason


def test_cycle_is_refused_naming_the_cycle(
    policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry
) -> None:
    task_entry("ap_reconciliation")["depends_on"] = ["close_signoff"]
    error = refuse(workflow_data, policy)
    assert error.field == "tasks[ap_reconciliation].depends_on"
    assert error.reason == (
        "dependency cycle: ap_reconciliation -> close_signoff -> variance_analysis -> ap_reconciliation"
    )


def test_self_dependency_is_a_cycle(policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("intercompany")["depends_on"] = ["intercompany"]
    assert refuse(workflow_data, policy).reason == "dependency cycle: intercompany -> intercompany"


def test_unknown_specialist_is_refused(policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["specialist"] = "payroll"
    assert refuse(workflow_data, policy).field == "tasks[accruals].specialist"


def test_requires_gate_must_be_a_boolean(policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["requires_gate"] = "yes"
    assert refuse(workflow_data, policy).field == "tasks[accruals].requires_gate"


def test_non_string_dependency_is_named(policy: Policy, workflow_data: dict[str, Any], task_entry: TaskEntry) -> None:
    task_entry("accruals")["depends_on"] = [7]
    assert refuse(workflow_data, policy).field == "tasks[accruals].depends_on[0]"


def test_task_without_id_is_named_by_position(policy: Policy, workflow_data: dict[str, Any]) -> None:
    del workflow_data["tasks"][2]["id"]
    assert refuse(workflow_data, policy).field == "tasks[2].id"


def test_a_smaller_workflow_is_allowed(policy: Policy) -> None:
    data = {
        "version": 1,
        "workflow": "bank_only",
        "title": "Bank only",
        "tasks": [
            {
                "id": "bank",
                "title": "Bank",
                "handler": "close.bank_reconciliation",
                "specialist": "reconciliation",
                "depends_on": [],
                "risk_tier": "low",
                "requires_gate": False,
            },
        ],
    }
    assert parse_workflow(data, SOURCE, policy).task_ids == ("bank",)
