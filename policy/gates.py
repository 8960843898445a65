"""Gate derivation: the only source of truth for which tasks need a human decision."""

from dataclasses import dataclass
from decimal import Decimal

from money.formatting import format_money
from policy.errors import GateInputError
from policy.escalation import EscalationReason
from policy.model import AmountThreshold, Policy, Tier
from policy.wording import in_words
from policy.workflow import Workflow, WorkflowTask

APPROVAL = "approval"
ESCALATION = "escalation"


@dataclass(frozen=True)
class GateRequirement:
    task: str
    tier: str
    quorum: int
    approver_role: str
    due_hours: int
    rule: str
    kind: str  # APPROVAL or ESCALATION
    expire_hours: int | None = None


def raising_threshold(policy: Policy, amount: Decimal) -> AmountThreshold | None:
    """The highest-ranked threshold that abs(amount) meets, if any."""
    _check_amount(amount)
    met = [threshold for threshold in policy.amount_thresholds if abs(amount) >= threshold.min_amount]
    return max(met, key=lambda threshold: policy.tier(threshold.tier).rank, default=None)


def effective_tier(policy: Policy, task: WorkflowTask, amount: Decimal | None = None) -> Tier:
    """max(task.risk_tier, the tier any amount threshold raises it to)."""
    tier = policy.tier(task.risk_tier)
    if amount is None:
        return tier
    threshold = raising_threshold(policy, amount)
    if threshold is None:
        return tier
    return max(tier, policy.tier(threshold.tier), key=lambda candidate: candidate.rank)


def derive_gate(
    policy: Policy,
    task: WorkflowTask,
    amount: Decimal | None = None,
    *,
    escalated: EscalationReason | None = None,
    findings: int = 0,
) -> GateRequirement | None:
    """The approval gate `task`'s result needs, or None.

    Work that was `escalated` earlier (the reason it halted) is never completed without a person: the gate is at
    least the escalation tier, whatever the task's own tier and amount say. A result with `findings` (violated
    invariants, duplicate holds) is decided at least at the policy's findings tier.
    """
    if isinstance(findings, bool) or not isinstance(findings, int) or findings < 0:
        raise GateInputError("findings", f"expected a count of at least 0, got {findings!r}")
    base = policy.tier(task.risk_tier)
    tier = effective_tier(policy, task, amount)
    reasons: list[str] = []
    if tier.rank > base.rank and amount is not None:
        threshold = raising_threshold(policy, amount)
        assert threshold is not None  # the tier only rises through a threshold
        reasons.append(
            f"amount {_money(amount, policy.currency)} >= {_money(threshold.min_amount, policy.currency)} raises tier "
            f"{base.name} to {tier.name}"
        )
    if findings and policy.findings_tier is not None:
        findings_tier = policy.tier(policy.findings_tier)
        if findings_tier.rank > tier.rank:
            tier = findings_tier
        reasons.append(f"{findings} finding{'s' if findings != 1 else ''} raise the gate to at least tier {tier.name}")
    if escalated is not None:
        _check_reason(escalated)
        escalation_tier = policy.tier(policy.escalation_tier)
        if escalation_tier.rank > tier.rank or not tier.gate:
            tier = escalation_tier
        if not tier.gate:
            raise GateInputError("tier", f"escalation tier {tier.name!r} has no gate; escalated work needs a person")
        reasons.append(
            f"{task.id} was escalated earlier ({escalated.value}), so a person must approve its work "
            f"at tier {escalation_tier.name} or above"
        )
    if not tier.gate:
        return None
    return _requirement(task, tier, "; ".join([*reasons, _approvers_sentence(tier, tier.approver_role)]), APPROVAL)


def derive_escalation_gate(
    policy: Policy, task: WorkflowTask, reason: EscalationReason, detail: str
) -> GateRequirement:
    """The gate a halted task opens: the escalation tier, decided by the role that owns `reason`."""
    _check_reason(reason)
    if not isinstance(detail, str) or not detail.strip():
        raise GateInputError("detail", "an escalation must say what a person should look at")
    tier = policy.tier(policy.escalation_tier)
    owner = policy.escalation_owner(reason)
    why = (
        f"{task.id} halted ({in_words(reason.value)}: {detail.strip()}): {policy.escalation_rule}; "
        f"{_approvers_sentence(tier, owner)}, who answers for {in_words(reason.value)}"
    )
    return _requirement(task, tier, why, ESCALATION, approver_role=owner)


def gates_for_workflow(policy: Policy, workflow: Workflow) -> tuple[GateRequirement, ...]:
    """Approval gates the workflow needs before any amounts are known, in file order."""
    gates = (derive_gate(policy, task) for task in workflow.tasks)
    return tuple(gate for gate in gates if gate is not None)


def _requirement(
    task: WorkflowTask, tier: Tier, rule: str, kind: str, approver_role: str | None = None
) -> GateRequirement:
    """A gate at `tier`; `approver_role` overrides the tier's role (an escalation goes to its reason's owner)."""
    role = approver_role or tier.approver_role
    if not tier.gate or role is None or tier.due_hours is None:
        raise GateInputError("tier", f"gated tier {tier.name!r} lacks approver_role or due_hours")
    return GateRequirement(
        task=task.id,
        tier=tier.name,
        quorum=tier.quorum,
        approver_role=role,
        due_hours=tier.due_hours,
        rule=rule,
        kind=kind,
        expire_hours=tier.expire_hours,
    )


def _approvers_sentence(tier: Tier, role: str | None) -> str:
    approvers = "1 approver" if tier.quorum == 1 else f"{tier.quorum} distinct approvers"
    return f"tier {tier.name} requires {approvers} (role {role}) within {tier.due_hours}h"


def _check_reason(reason: object) -> None:
    if not isinstance(reason, EscalationReason):
        known = ", ".join(member.value for member in EscalationReason)
        raise GateInputError("reason", f"expected an EscalationReason ({known}), got {reason!r}")


def _money(amount: Decimal, currency: str) -> str:
    """`GBP 250,000.00`; a negative amount says the absolute value the tiers compare."""
    shown = format_money(amount, currency)
    return shown if amount >= 0 else f"{shown} (absolute {format_money(abs(amount), currency)})"


def _check_amount(amount: object) -> None:
    if isinstance(amount, bool) or not isinstance(amount, Decimal):
        raise GateInputError("amount", f"expected a Decimal, got {type(amount).__name__} {amount!r}")
    if not amount.is_finite():
        raise GateInputError("amount", f"must be a finite decimal, got {amount!r}")
