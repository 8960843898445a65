"""Risk tiers, gate derivation, escalation reasons and workflow loading. Pure: imports nothing else of Countersign."""

from policy.errors import (
    GateInputError,
    PolicyError,
    UnknownTaskError,
    UnknownTierError,
    WorkflowPolicyMismatch,
)
from policy.escalation import EscalationReason
from policy.gates import (
    APPROVAL,
    ESCALATION,
    GateRequirement,
    derive_escalation_gate,
    derive_gate,
    effective_tier,
    gates_for_workflow,
)
from policy.model import AccrualsPolicy, AmountThreshold, Policy, ReconciliationPolicy, Tier, VariancePolicy
from policy.policy_loader import load_policy, parse_policy
from policy.workflow import SPECIALISTS, Workflow, WorkflowTask
from policy.workflow_loader import load_workflow, load_workflows, parse_workflow

__all__ = [
    "APPROVAL",
    "ESCALATION",
    "SPECIALISTS",
    "AccrualsPolicy",
    "AmountThreshold",
    "EscalationReason",
    "GateInputError",
    "GateRequirement",
    "Policy",
    "PolicyError",
    "ReconciliationPolicy",
    "Tier",
    "UnknownTaskError",
    "UnknownTierError",
    "VariancePolicy",
    "Workflow",
    "WorkflowPolicyMismatch",
    "WorkflowTask",
    "derive_escalation_gate",
    "derive_gate",
    "effective_tier",
    "gates_for_workflow",
    "load_policy",
    "load_workflow",
    "load_workflows",
    "parse_policy",
    "parse_workflow",
]
