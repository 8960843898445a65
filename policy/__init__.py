"""Risk tiers, gate derivation and checklist loading. Pure: imports nothing else of Countersign."""

from policy.checklist import SPECIALISTS, Checklist, ChecklistTask
from policy.checklist_loader import load_checklist, parse_checklist
from policy.errors import (
    ChecklistPolicyMismatch,
    GateInputError,
    PolicyError,
    UnknownTaskError,
    UnknownTierError,
)
from policy.gates import (
    APPROVAL,
    ESCALATION,
    GateRequirement,
    derive_escalation_gate,
    derive_gate,
    effective_tier,
    gates_for_checklist,
)
from policy.model import AccrualsPolicy, AmountThreshold, Policy, ReconciliationPolicy, Tier, VariancePolicy
from policy.policy_loader import load_policy, parse_policy

__all__ = [
    "APPROVAL",
    "ESCALATION",
    "SPECIALISTS",
    "AccrualsPolicy",
    "AmountThreshold",
    "Checklist",
    "ChecklistPolicyMismatch",
    "ChecklistTask",
    "GateInputError",
    "GateRequirement",
    "Policy",
    "PolicyError",
    "ReconciliationPolicy",
    "Tier",
    "UnknownTaskError",
    "UnknownTierError",
    "VariancePolicy",
    "derive_escalation_gate",
    "derive_gate",
    "effective_tier",
    "gates_for_checklist",
    "load_checklist",
    "load_policy",
    "parse_checklist",
    "parse_policy",
]
