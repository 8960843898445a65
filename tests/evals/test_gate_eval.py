import copy
import dataclasses
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from countersign.evals.gates import (
    GateSpec,
    load_cases,
    negative_control,
    parse_cases,
    run_gate_eval,
    without_one_gate,
)
from countersign.policy import (
    EscalationReason,
    GateInputError,
    Policy,
    PolicyError,
    UnknownTierError,
    Workflow,
    load_policy,
    load_workflow,
)
from tests.policy.conftest import CLOSE_WORKFLOW_PATH, CONFIG_DIR, RISK_PATH

CASES_PATH = CONFIG_DIR / "evals" / "gate_cases.yaml"
SHIPPED_POLICY = load_policy(RISK_PATH)  # hypothesis tests cannot use function-scoped fixtures
SHIPPED_CHECKLIST = load_workflow(CLOSE_WORKFLOW_PATH, SHIPPED_POLICY)
SHIPPED_CASES_DATA: dict[str, Any] = yaml.safe_load(CASES_PATH.read_text())
GATED_TIERS = tuple(tier.name for tier in SHIPPED_POLICY.tiers if tier.gate)


@pytest.fixture
def checklist(policy: Policy) -> Workflow:
    return load_workflow(CLOSE_WORKFLOW_PATH, policy)


@pytest.fixture
def cases_data() -> dict[str, Any]:
    """A fresh, mutable copy of the shipped case table as plain data."""
    return copy.deepcopy(SHIPPED_CASES_DATA)


def write_cases(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "gate_cases.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- the shipped table against the shipped policy ---------------------------------------------------------------


def test_shipped_cases_pass_against_the_shipped_policy(policy: Policy, checklist: Workflow) -> None:
    report = run_gate_eval(policy, checklist, load_cases(CASES_PATH))
    assert report.passed, "\n".join(failure.describe() for failure in report.failures)
    assert report.cases == len(SHIPPED_CASES_DATA["cases"]) >= 20


def test_shipped_cases_cover_every_task_every_tier_both_thresholds_negatives_and_anomalies(
    checklist: Workflow,
) -> None:
    cases = load_cases(CASES_PATH)
    assert {case.task for case in cases} == set(checklist.task_ids)
    assert {case.tier for case in cases} == set(SHIPPED_POLICY.tier_names)
    amounts = {case.amount for case in cases if case.amount is not None}
    for threshold in ("250000.00", "1000000.00"):
        at = Decimal(threshold)
        assert {abs(amount) for amount in amounts} >= {at - Decimal("0.01"), at, at + Decimal("0.01")}
    assert any(amount < 0 for amount in amounts)
    anomalies = [case for case in cases if case.anomaly]
    assert anomalies and all([gate.kind for gate in case.expect] == ["escalation"] for case in anomalies), (
        "an anomaly case expects the escalation gate only"
    )
    assert {case.reason for case in anomalies} > {EscalationReason.ANOMALY_OVER_TOLERANCE}, "an owner other than R8's"
    rerun_after_escalation = [case for case in cases if case.escalated is not None]
    assert {case.tier for case in rerun_after_escalation} >= {"low", "critical"}
    assert all(case.expect for case in rerun_after_escalation), "escalated work always needs a person"


# --- the negative control ----------------------------------------------------------------------------------------


def test_negative_control_fails_with_the_medium_gate_deleted(policy: Policy, checklist: Workflow) -> None:
    report = negative_control(policy, checklist, load_cases(CASES_PATH))
    assert not report.passed
    assert {failure.task for failure in report.failures} >= {
        "bank_reconciliation",
        "intercompany",
        "variance_analysis",
    }


@pytest.mark.parametrize("tier", GATED_TIERS)
def test_negative_control_fails_for_each_gated_tier_deleted(policy: Policy, checklist: Workflow, tier: str) -> None:
    report = negative_control(policy, checklist, load_cases(CASES_PATH), tier=tier)
    assert not report.passed
    assert all(any(gate.tier == tier for gate in failure.expected) for failure in report.failures)


def test_gated_tiers_include_medium_high_and_critical() -> None:
    assert set(GATED_TIERS) == {"medium", "high", "critical"}


def test_without_one_gate_ungates_only_the_named_tier(policy: Policy) -> None:
    control = without_one_gate(policy, "high")
    ungated = control.tier("high")
    assert (ungated.gate, ungated.quorum, ungated.approver_role, ungated.due_hours) == (False, 0, None, None)
    assert ungated.rank == policy.tier("high").rank
    assert [tier for tier in control.tiers if tier.name != "high"] == [
        tier for tier in policy.tiers if tier.name != "high"
    ]
    assert control.digest != policy.digest
    assert policy.tier("high").gate, "the original policy is untouched"


def test_without_one_gate_refuses_a_tier_that_has_no_gate(policy: Policy) -> None:
    with pytest.raises(GateInputError) as caught:
        without_one_gate(policy, "low")
    assert caught.value.field == "tier"


def test_without_one_gate_refuses_an_unknown_tier(policy: Policy) -> None:
    with pytest.raises(UnknownTierError):
        without_one_gate(policy, "urgent")


# --- a wrong table fails, naming the case ------------------------------------------------------------------------

MUTATIONS = {
    "kind": lambda gate: {**gate, "kind": "escalation" if gate["kind"] == "approval" else "approval"},
    "tier": lambda gate: {**gate, "tier": "medium" if gate["tier"] != "medium" else "high"},
    "quorum": lambda gate: {**gate, "quorum": gate["quorum"] + 1},
    "approver_role": lambda gate: {**gate, "approver_role": "auditor"},
}
GATED_CASE_INDEXES = [index for index, case in enumerate(SHIPPED_CASES_DATA["cases"]) if case["expect"]]


@given(index=st.sampled_from(GATED_CASE_INDEXES), field=st.sampled_from(sorted(MUTATIONS)))
def test_one_changed_expectation_fails_naming_that_case(index: int, field: str) -> None:
    data = copy.deepcopy(SHIPPED_CASES_DATA)
    case = data["cases"][index]
    case["expect"] = [MUTATIONS[field](case["expect"][0])]
    report = run_gate_eval(SHIPPED_POLICY, SHIPPED_CHECKLIST, parse_cases(data, "mutated.yaml"))
    assert not report.passed
    assert [failure.index for failure in report.failures] == [index]
    failure = report.failures[0]
    assert failure.task == case["task"]
    assert f"cases[{index}] {case['task']}" in failure.describe()
    assert failure.expected != failure.actual


@given(index=st.sampled_from(range(len(SHIPPED_CASES_DATA["cases"]))))
def test_dropping_or_adding_an_expected_gate_fails_naming_that_case(index: int) -> None:
    data = copy.deepcopy(SHIPPED_CASES_DATA)
    case = data["cases"][index]
    extra = {"kind": "approval", "tier": "low", "quorum": 1, "approver_role": "clerk"}
    case["expect"] = case["expect"][1:] if case["expect"] else [extra]
    report = run_gate_eval(SHIPPED_POLICY, SHIPPED_CHECKLIST, parse_cases(data, "mutated.yaml"))
    assert [failure.index for failure in report.failures] == [index]


def test_changed_expectation_in_a_case_file_names_the_case(
    tmp_path: Path, policy: Policy, checklist: Workflow, cases_data: dict[str, Any]
) -> None:
    index = next(i for i, case in enumerate(cases_data["cases"]) if case["task"] == "close_signoff")
    cases_data["cases"][index]["expect"][0]["quorum"] = 1
    report = run_gate_eval(policy, checklist, load_cases(write_cases(tmp_path, cases_data)))
    assert [(failure.index, failure.task) for failure in report.failures] == [(index, "close_signoff")]
    failure = report.failures[0]
    assert failure.expected == (GateSpec("approval", "critical", 1, "cfo"),)
    assert failure.actual == (GateSpec("approval", "critical", 2, "cfo"),)


def test_a_case_whose_tier_disagrees_with_the_checklist_fails(
    policy: Policy, checklist: Workflow, cases_data: dict[str, Any]
) -> None:
    index = next(i for i, case in enumerate(cases_data["cases"]) if case["task"] == "accruals")
    cases_data["cases"][index]["tier"] = "medium"
    report = run_gate_eval(policy, checklist, parse_cases(cases_data, "cases.yaml"))
    assert [failure.index for failure in report.failures] == [index]
    assert "checklist says high" in report.failures[0].describe()
    assert report.failures[0].actual == report.failures[0].expected, "only the tier claim is wrong"


def test_a_case_for_a_task_not_in_the_checklist_fails(
    policy: Policy, checklist: Workflow, cases_data: dict[str, Any]
) -> None:
    cases_data["cases"][0]["task"] = "payroll"
    report = run_gate_eval(policy, checklist, parse_cases(cases_data, "cases.yaml"))
    assert [failure.index for failure in report.failures] == [0]
    assert "'payroll' is not in the checklist" in report.failures[0].describe()


def test_running_no_cases_is_refused(policy: Policy, checklist: Workflow) -> None:
    with pytest.raises(GateInputError) as caught:
        run_gate_eval(policy, checklist, ())
    assert caught.value.field == "cases"


# --- independence from the checklist's own flags -----------------------------------------------------------------


def test_eval_still_passes_when_every_requires_gate_flag_is_flipped(policy: Policy, checklist: Workflow) -> None:
    flipped = dataclasses.replace(
        checklist,
        tasks=tuple(dataclasses.replace(task, requires_gate=not task.requires_gate) for task in checklist.tasks),
    )
    assert all(a.requires_gate != b.requires_gate for a, b in zip(flipped.tasks, checklist.tasks, strict=True))
    assert run_gate_eval(policy, flipped, load_cases(CASES_PATH)).passed


def test_eval_fails_when_the_checklist_moves_a_task_to_another_tier(policy: Policy, checklist: Workflow) -> None:
    moved = dataclasses.replace(
        checklist,
        tasks=tuple(
            dataclasses.replace(task, risk_tier="low") if task.id == "bank_reconciliation" else task
            for task in checklist.tasks
        ),
    )
    report = run_gate_eval(policy, moved, load_cases(CASES_PATH))
    assert not report.passed
    assert {failure.task for failure in report.failures} == {"bank_reconciliation"}


# --- malformed case files name the field -------------------------------------------------------------------------


def _set(path: tuple[Any, ...], value: object) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        target: Any = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(path: tuple[Any, ...]) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        target: Any = data
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


@pytest.mark.parametrize(
    ("mutate", "field", "reason"),
    [
        (_delete(("cases", 2, "expect")), "cases[2].expect", "missing required key"),
        (_delete(("version",)), "version", "missing required key"),
        (_set(("version",), 2), "version", "unsupported version"),
        (_set(("cases",), []), "cases", "at least one case"),
        (_set(("cases",), {"task": "accruals"}), "cases", "expected a list"),
        (_set(("cases", 1), "bank_reconciliation"), "cases[1]", "expected a mapping"),
        (_set(("cases", 1, "amount"), 250000.0), "cases[1].amount", "quoted string"),
        (_set(("cases", 1, "amount"), 250000), "cases[1].amount", "quoted string"),
        (_set(("cases", 1, "amount"), "a lot"), "cases[1].amount", "not a decimal"),
        (_set(("cases", 1, "amount"), "NaN"), "cases[1].amount", "finite"),
        (_set(("cases", 3, "anomaly"), "yes"), "cases[3].anomaly", "true or false"),
        (_set(("cases", 3, "task"), ""), "cases[3].task", "must not be empty"),
        (_set(("cases", 3, "tier"), None), "cases[3].tier", "expected a string"),
        (_set(("cases", 3, "owner"), "me"), "cases[3].owner", "unknown key"),
        (_set(("cases", 0, "expect"), {"kind": "approval"}), "cases[0].expect", "expected a list"),
        (_set(("cases", 0, "expect", 0, "kind"), "approve"), "cases[0].expect[0].kind", "unknown gate kind"),
        (_set(("cases", 0, "expect", 0, "quorum"), 0), "cases[0].expect[0].quorum", "must be >= 1"),
        (_set(("cases", 0, "expect", 0, "quorum"), "1"), "cases[0].expect[0].quorum", "expected an integer"),
        (_delete(("cases", 0, "expect", 0, "approver_role")), "cases[0].expect[0].approver_role", "missing"),
        (_set(("cases", 5, "reason"), "boredom"), "cases[5].reason", "unknown escalation reason"),
        (_set(("cases", 5, "escalated"), "gate_expired"), "cases[5].escalated", "only for a case that did not halt"),
        (_set(("cases", 0, "reason"), "gate_expired"), "cases[0].reason", "only for a case that halted"),
        (_set(("cases", 0, "escalated"), "bored"), "cases[0].escalated", "unknown escalation reason"),
    ],
)
def test_malformed_case_file_names_the_file_and_field(
    tmp_path: Path, cases_data: dict[str, Any], mutate: Any, field: str, reason: str
) -> None:
    mutate(cases_data)
    path = write_cases(tmp_path, cases_data)
    with pytest.raises(PolicyError) as caught:
        load_cases(path)
    assert (caught.value.source, caught.value.field) == (str(path), field)
    assert reason in caught.value.reason


def test_case_file_with_duplicate_keys_or_broken_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gate_cases.yaml"
    path.write_text("version: 1\nversion: 1\ncases: []\n")
    with pytest.raises(PolicyError, match="duplicate key"):
        load_cases(path)
    path.write_text("version: 1\ncases: [\n")
    with pytest.raises(PolicyError, match="malformed YAML"):
        load_cases(path)


def test_missing_case_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(PolicyError) as caught:
        load_cases(path)
    assert caught.value.source == str(path)


@given(amount=st.decimals(allow_nan=False, allow_infinity=False, places=2))
def test_amount_strings_parse_to_the_exact_decimal(amount: Decimal) -> None:
    data = {
        "version": 1,
        "cases": [{"task": "accruals", "tier": "high", "amount": str(amount), "anomaly": False, "expect": []}],
    }
    assert parse_cases(data, "cases.yaml")[0].amount == amount
