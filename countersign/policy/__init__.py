"""Risk tiers, gate derivation, escalation reasons, who may decide a gate and workflow loading. Pure: imports nothing
else of Countersign but its states."""

from countersign.policy.errors import (
    GateInputError,
    PolicyError,
    UnknownTaskError,
    UnknownTierError,
    WorkflowPolicyMismatch,
)
from countersign.policy.escalation import EscalationReason
from countersign.policy.fx import FxRate, convert
from countersign.policy.gates import (
    APPROVAL,
    ESCALATION,
    AlwaysHumanReason,
    GateRequirement,
    Materiality,
    always_human_reasons,
    derive_escalation_gate,
    derive_gate,
    effective_tier,
    gates_for_workflow,
    materiality,
    raising_threshold,
)
from countersign.policy.model import (
    AccrualsPolicy,
    AlwaysHuman,
    AlwaysHumanEvent,
    AmountThreshold,
    CertifiedAccruals,
    EntityPolicy,
    Policy,
    ReconciliationPolicy,
    Tier,
    VariancePolicy,
)
from countersign.policy.policy_loader import load_policy, parse_policy
from countersign.policy.workflow import SPECIALISTS, Workflow, WorkflowTask
from countersign.policy.workflow_loader import load_workflow, load_workflows, parse_workflow

__all__ = [
    "APPROVAL",
    "ESCALATION",
    "SPECIALISTS",
    "AccrualsPolicy",
    "AlwaysHuman",
    "AlwaysHumanEvent",
    "AlwaysHumanReason",
    "AmountThreshold",
    "CertifiedAccruals",
    "EntityPolicy",
    "EscalationReason",
    "FxRate",
    "GateInputError",
    "GateRequirement",
    "Materiality",
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
    "always_human_reasons",
    "convert",
    "derive_escalation_gate",
    "derive_gate",
    "effective_tier",
    "gates_for_workflow",
    "load_policy",
    "load_workflow",
    "load_workflows",
    "materiality",
    "parse_policy",
    "parse_workflow",
    "raising_threshold",
]
