"""Gate derivation: the only source of truth for which tasks need a human decision."""

from dataclasses import dataclass
from decimal import Decimal

from policy.checklist import Checklist, ChecklistTask
from policy.errors import GateInputError
from policy.model import AmountThreshold, Policy, Tier

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


def effective_tier(policy: Policy, task: ChecklistTask, amount: Decimal | None = None) -> Tier:
    """max(task.risk_tier, the tier any amount threshold raises it to)."""
    tier = policy.tier(task.risk_tier)
    if amount is None:
        return tier
    threshold = raising_threshold(policy, amount)
    if threshold is None:
        return tier
    return max(tier, policy.tier(threshold.tier), key=lambda candidate: candidate.rank)


def derive_gate(policy: Policy, task: ChecklistTask, amount: Decimal | None = None) -> GateRequirement | None:
    base = policy.tier(task.risk_tier)
    tier = effective_tier(policy, task, amount)
    if not tier.gate:
        return None
    why = _approvers_sentence(tier)
    if tier.rank > base.rank and amount is not None:
        threshold = raising_threshold(policy, amount)
        assert threshold is not None  # the tier only rises through a threshold
        why = f"amount {_money(amount)} >= {_money(threshold.min_amount)} raises tier {base.name} to {tier.name}; {why}"
    return _requirement(task, tier, why, APPROVAL)


def derive_escalation_gate(policy: Policy, task: ChecklistTask, reason: str) -> GateRequirement:
    if not reason.strip():
        raise GateInputError("reason", "an escalation must say why the task halted")
    tier = policy.tier(policy.escalation_tier)
    why = f"{task.id} halted ({reason.strip()}): {policy.escalation_rule}; {_approvers_sentence(tier)}"
    return _requirement(task, tier, why, ESCALATION)


def gates_for_checklist(policy: Policy, checklist: Checklist) -> tuple[GateRequirement, ...]:
    """Approval gates the checklist needs before any amounts are known, in checklist order."""
    gates = (derive_gate(policy, task) for task in checklist.tasks)
    return tuple(gate for gate in gates if gate is not None)


def _requirement(task: ChecklistTask, tier: Tier, rule: str, kind: str) -> GateRequirement:
    if tier.approver_role is None or tier.due_hours is None:
        raise GateInputError("tier", f"gated tier {tier.name!r} lacks approver_role or due_hours")
    return GateRequirement(
        task=task.id,
        tier=tier.name,
        quorum=tier.quorum,
        approver_role=tier.approver_role,
        due_hours=tier.due_hours,
        rule=rule,
        kind=kind,
        expire_hours=tier.expire_hours,
    )


def _approvers_sentence(tier: Tier) -> str:
    approvers = "1 approver" if tier.quorum == 1 else f"{tier.quorum} distinct approvers"
    return f"tier {tier.name} requires {approvers} (role {tier.approver_role}) within {tier.due_hours}h"


def _money(amount: Decimal) -> str:
    return f"{amount:,.2f}" if amount >= 0 else f"{amount:,.2f} (absolute {abs(amount):,.2f})"


def _check_amount(amount: object) -> None:
    if isinstance(amount, bool) or not isinstance(amount, Decimal):
        raise GateInputError("amount", f"expected a Decimal, got {type(amount).__name__} {amount!r}")
    if not amount.is_finite():
        raise GateInputError("amount", f"must be a finite decimal, got {amount!r}")
