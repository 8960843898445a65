"""Typed escalations: every reason has an owner role from policy, and escalated work always reaches a person."""

from decimal import Decimal
from typing import Any

import pytest

from countersign.policy import (
    APPROVAL,
    ESCALATION,
    EscalationReason,
    Policy,
    PolicyError,
    WorkflowTask,
    derive_escalation_gate,
    derive_gate,
    parse_policy,
)
from countersign.policy.wording import in_words

SOURCE = "config/risk.yaml"
EXPECTED_REASONS = {
    "anomaly_over_tolerance",
    "contradictory_evidence",
    "missing_parameter",
    "suspected_injection",
    "budget_exhausted",
    "specialist_dead_lettered",
    "ungrounded_narrative",
    "gate_expired",
    "no_recorded_response",
    "model_unavailable",
}


def low_task(task_id: str = "ap_reconciliation") -> WorkflowTask:
    return WorkflowTask(
        id=task_id,
        title="AP",
        handler="close.ap_reconciliation",
        specialist="reconciliation",
        depends_on=(),
        risk_tier="low",
        requires_gate=False,
    )


def refuse(data: object) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        parse_policy(data, SOURCE)
    assert str(caught.value).startswith(f"{SOURCE}: {caught.value.field}: ")
    return caught.value


def test_the_reasons_are_exactly_the_named_ones() -> None:
    assert {reason.value for reason in EscalationReason} == EXPECTED_REASONS


# --- owners in risk.yaml -----------------------------------------------------------------------------------------


def test_shipped_policy_names_an_approver_owner_for_every_reason(policy: Policy) -> None:
    approver_roles = {tier.approver_role for tier in policy.tiers if tier.gate}
    owners = {reason: policy.escalation_owner(reason) for reason in EscalationReason}
    assert set(owners.values()) <= approver_roles
    assert owners[EscalationReason.SUSPECTED_INJECTION] == "cfo"
    assert owners[EscalationReason.ANOMALY_OVER_TOLERANCE] == "controller"


@pytest.mark.parametrize("reason", sorted(EXPECTED_REASONS))
def test_a_missing_reason_is_refused_naming_it(policy_data: dict[str, Any], reason: str) -> None:
    del policy_data["escalation"]["owners"][reason]
    error = refuse(policy_data)
    assert error.field == f"escalation.owners.{reason}"
    assert "missing" in error.reason


def test_an_unknown_reason_is_refused_naming_it(policy_data: dict[str, Any]) -> None:
    policy_data["escalation"]["owners"]["felt_uneasy"] = "controller"
    error = refuse(policy_data)
    assert error.field == "escalation.owners.felt_uneasy"
    assert "unknown key" in error.reason


@pytest.mark.parametrize("role", ["auditor", "accountant", "Controller"])
def test_an_owner_that_no_gated_tier_asks_for_is_refused(policy_data: dict[str, Any], role: str) -> None:
    policy_data["escalation"]["owners"]["gate_expired"] = role
    error = refuse(policy_data)
    assert error.field == "escalation.owners.gate_expired"
    assert repr(role) in error.reason and "controller" in error.reason


@pytest.mark.parametrize("owners", [None, ["controller"], "controller"])
def test_owners_must_be_a_mapping(policy_data: dict[str, Any], owners: object) -> None:
    policy_data["escalation"]["owners"] = owners
    assert refuse(policy_data).field == "escalation.owners"


def test_owners_are_required(policy_data: dict[str, Any]) -> None:
    del policy_data["escalation"]["owners"]
    assert refuse(policy_data).field == "escalation.owners"


def test_an_owner_role_of_a_gated_tier_other_than_the_escalation_tier_is_allowed(
    policy_data: dict[str, Any],
) -> None:
    policy_data["escalation"]["owners"]["budget_exhausted"] = "cfo"
    policy = parse_policy(policy_data, SOURCE)
    assert policy.escalation_owner(EscalationReason.BUDGET_EXHAUSTED) == "cfo"


# --- escalated work always reaches a person ----------------------------------------------------------------------


@pytest.mark.parametrize("reason", list(EscalationReason), ids=str)
def test_escalated_low_tier_work_needs_a_human_approval_never_none(policy: Policy, reason: EscalationReason) -> None:
    task = low_task()
    assert derive_gate(policy, task) is None, "without the escalation a low task needs no gate"
    gate = derive_gate(policy, task, escalated=reason)
    assert gate is not None
    assert gate.kind == APPROVAL and gate.quorum >= 1 and gate.approver_role
    assert policy.tier(gate.tier).rank >= policy.tier(policy.escalation_tier).rank
    assert f"escalated earlier ({reason.value})" in gate.rule


@pytest.mark.parametrize("reason", list(EscalationReason), ids=str)
def test_escalation_gate_goes_to_the_reasons_owner(policy: Policy, reason: EscalationReason) -> None:
    gate = derive_escalation_gate(policy, low_task(), reason, "the specialist said so")
    assert gate.kind == ESCALATION
    assert gate.approver_role == policy.escalation_owner(reason)
    assert gate.tier == policy.escalation_tier and gate.quorum == policy.tier(gate.tier).quorum
    assert in_words(reason.value) in gate.rule and "the specialist said so" in gate.rule
    assert reason.value not in gate.rule  # words, not the code


def test_escalated_work_keeps_a_higher_tier_than_the_escalation_tier(policy: Policy) -> None:
    critical = WorkflowTask("close_signoff", "Sign-off", "close.close_signoff", None, (), "critical", True)
    gate = derive_gate(policy, critical, escalated=EscalationReason.GATE_EXPIRED)
    assert gate is not None and (gate.tier, gate.quorum, gate.approver_role) == ("critical", 2, "cfo")
    raised = derive_gate(policy, low_task(), Decimal("1000000.00"), escalated=EscalationReason.MISSING_PARAMETER)
    assert raised is not None and raised.tier == "critical"
    assert "raises tier low to critical" in raised.rule and "escalated earlier (missing_parameter)" in raised.rule


def test_without_escalation_derive_gate_is_unchanged(policy: Policy) -> None:
    task = low_task()
    assert derive_gate(policy, task, escalated=None) is None
    gate = derive_gate(policy, task, Decimal("250000.00"))
    assert gate is not None and gate.rule.startswith("amount GBP 250,000.00 >= GBP 250,000.00 raises tier low to high")
    assert "escalated" not in gate.rule
