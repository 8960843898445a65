from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.policy import (
    EscalationReason,
    GateInputError,
    Policy,
    UnknownTierError,
    WorkflowTask,
    derive_escalation_gate,
    derive_gate,
    effective_tier,
    load_policy,
)
from countersign.policy.wording import in_words
from tests.policy.conftest import RISK_PATH

SHIPPED_POLICY = load_policy(RISK_PATH)  # hypothesis tests cannot use function-scoped fixtures


def make_task(risk_tier: str, requires_gate: bool = False, task_id: str = "t") -> WorkflowTask:
    return WorkflowTask(
        id=task_id,
        title="Task",
        handler="test.task",
        specialist=None,
        depends_on=(),
        risk_tier=risk_tier,
        requires_gate=requires_gate,
    )


def test_derive_gate_ignores_the_workflow_files_false_claim(policy: Policy) -> None:
    gate = derive_gate(policy, make_task("high", requires_gate=False))
    assert gate is not None
    assert (gate.tier, gate.quorum, gate.approver_role, gate.due_hours, gate.kind) == (
        "high",
        1,
        "controller",
        24,
        "approval",
    )
    assert gate.rule.startswith("tier high requires 1 approver (role controller)")


def test_derive_gate_ignores_the_workflow_files_true_claim(policy: Policy) -> None:
    assert derive_gate(policy, make_task("low", requires_gate=True)) is None


def test_amount_at_threshold_raises_tier_and_names_why(policy: Policy) -> None:
    gate = derive_gate(policy, make_task("low"), Decimal("250000.00"))
    assert gate is not None
    assert gate.tier == "high"
    assert gate.rule.startswith("amount GBP 250,000.00 >= GBP 250,000.00 raises tier low to high")


def test_amount_just_below_threshold_does_not_raise(policy: Policy) -> None:
    assert derive_gate(policy, make_task("low"), Decimal("249999.99")) is None


def test_negative_amount_raises_by_absolute_value(policy: Policy) -> None:
    gate = derive_gate(policy, make_task("medium"), Decimal("-1250000.00"))
    assert gate is not None
    assert (gate.tier, gate.quorum, gate.approver_role) == ("critical", 2, "cfo")
    assert "GBP 1,000,000.00 raises tier medium to critical" in gate.rule


def test_amount_never_lowers_the_task_tier(policy: Policy) -> None:
    gate = derive_gate(policy, make_task("critical"), Decimal("0.01"))
    assert gate is not None and gate.tier == "critical"
    assert "amount" not in gate.rule


@pytest.mark.parametrize("bad", [0.5, 1, Decimal("NaN"), Decimal("Infinity")])
def test_non_decimal_or_non_finite_amount_is_refused(policy: Policy, bad: object) -> None:
    with pytest.raises(GateInputError) as caught:
        derive_gate(policy, make_task("low"), bad)  # type: ignore[arg-type]
    assert caught.value.field == "amount"


def test_unknown_task_tier_is_refused(policy: Policy) -> None:
    with pytest.raises(UnknownTierError):
        derive_gate(policy, make_task("extreme"))


def test_escalation_gate_uses_escalation_tier_and_names_reason_and_detail(policy: Policy) -> None:
    task = make_task("low", task_id="bank_reconciliation")
    gate = derive_escalation_gate(policy, task, EscalationReason.BUDGET_EXHAUSTED, "agent timed out")
    assert (gate.kind, gate.tier, gate.quorum, gate.approver_role) == ("escalation", "high", 1, "controller")
    assert gate.task == "bank_reconciliation"
    assert f"{in_words('budget_exhausted')}: agent timed out" in gate.rule and policy.escalation_rule in gate.rule


@pytest.mark.parametrize("detail", ["", "  ", None])
def test_escalation_without_detail_is_refused(policy: Policy, detail: object) -> None:
    with pytest.raises(GateInputError) as caught:
        derive_escalation_gate(policy, make_task("low"), EscalationReason.GATE_EXPIRED, detail)  # type: ignore[arg-type]
    assert caught.value.field == "detail"


@pytest.mark.parametrize("reason", ["anomaly_over_tolerance", "agent timed out", None, 3])
def test_escalation_with_an_untyped_reason_is_refused(policy: Policy, reason: object) -> None:
    with pytest.raises(GateInputError) as caught:
        derive_escalation_gate(policy, make_task("low"), reason, "detail")  # type: ignore[arg-type]
    assert caught.value.field == "reason"
    if reason is not None:  # None means "not escalated" to derive_gate
        with pytest.raises(GateInputError):
            derive_gate(policy, make_task("low"), escalated=reason)  # type: ignore[arg-type]


amounts = st.decimals(min_value=Decimal("-1e9"), max_value=Decimal("1e9"), places=2, allow_nan=False)
tier_names = st.sampled_from(["low", "medium", "high", "critical"])


@given(tier=tier_names, first=amounts, second=amounts)
def test_effective_tier_is_monotonic_in_absolute_amount(tier: str, first: Decimal, second: Decimal) -> None:
    policy = SHIPPED_POLICY
    smaller, larger = sorted((first, second), key=abs)
    task = make_task(tier)
    assert effective_tier(policy, task, smaller).rank <= effective_tier(policy, task, larger).rank


@given(tier=tier_names, amount=amounts)
def test_effective_tier_is_never_below_task_tier(tier: str, amount: Decimal) -> None:
    policy = SHIPPED_POLICY
    task = make_task(tier)
    assert effective_tier(policy, task, amount).rank >= policy.tier(tier).rank
    gate = derive_gate(policy, task, amount)
    assert (gate is not None) == effective_tier(policy, task, amount).gate


def test_findings_raise_the_gate_to_the_findings_tier_and_say_why(policy: Policy) -> None:
    gate = derive_gate(policy, make_task("medium"), Decimal("1000.00"), findings=2)
    assert gate is not None
    assert gate.tier == "high"
    assert "2 findings raise the gate to at least tier high" in gate.rule


def test_no_findings_leave_the_tier_alone(policy: Policy) -> None:
    gate = derive_gate(policy, make_task("medium"), Decimal("1000.00"), findings=0)
    assert gate is not None and gate.tier == "medium"


def test_findings_never_lower_a_tier_an_amount_raised(policy: Policy) -> None:
    gate = derive_gate(policy, make_task("medium"), Decimal("1000000.00"), findings=1)
    assert gate is not None and gate.tier == "critical"


def test_findings_gate_a_task_whose_own_tier_has_no_gate(policy: Policy) -> None:
    gate = derive_gate(policy, make_task("low"), findings=1)
    assert gate is not None and gate.tier == "high"


@pytest.mark.parametrize("findings", [-1, True, 1.5, "2"])
def test_a_findings_count_that_is_not_a_count_is_refused(policy: Policy, findings: object) -> None:
    with pytest.raises(GateInputError, match="findings"):
        derive_gate(policy, make_task("medium"), findings=findings)  # type: ignore[arg-type]
