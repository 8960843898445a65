"""The close policy as frozen values: risk tiers, amount thresholds, escalation (tier, rule, owners), settings."""

from dataclasses import dataclass
from decimal import Decimal

from policy.errors import UnknownTierError
from policy.escalation import EscalationReason


@dataclass(frozen=True)
class Tier:
    """A risk tier. `rank` orders tiers (0 = lowest); ungated tiers carry quorum 0 and no role or deadline."""

    name: str
    gate: bool
    quorum: int
    approver_role: str | None
    due_hours: int | None
    rank: int
    expire_hours: int | None = None  # after this, decisions are refused and the work must be redone
    accepted_proofs: tuple[str, ...] = ()  # PROOF_KINDS a decision on a gate of this tier may carry; () if ungated


# What may prove that a person decided (records.states.ProofKind holds the same words; so does the database).
PLATFORM_IDENTITY = "platform_identity"
PERSON_KEY_PROOFS = ("ed25519", "passkey")
PROOF_KINDS = (PLATFORM_IDENTITY, *PERSON_KEY_PROOFS)


@dataclass(frozen=True)
class AmountThreshold:
    """An absolute amount at or above `min_amount` raises a task to at least `tier`."""

    min_amount: Decimal
    tier: str


@dataclass(frozen=True)
class ReconciliationPolicy:
    unmatched_tolerance: Decimal
    date_window_days: int
    subledger_tolerance_amount: Decimal
    intercompany_tolerance_amount: Decimal


@dataclass(frozen=True)
class VariancePolicy:
    threshold_amount: Decimal
    threshold_pct: Decimal
    grounding_tolerance: Decimal


@dataclass(frozen=True)
class AccrualsPolicy:
    accrual_account: str
    materiality_amount: Decimal


@dataclass(frozen=True)
class Policy:
    version: int
    currency: str
    tiers: tuple[Tier, ...]
    amount_thresholds: tuple[AmountThreshold, ...]
    escalation_tier: str
    escalation_rule: str
    escalation_owners: tuple[tuple[EscalationReason, str], ...]  # every reason once, with the role that owns it
    reconciliation: ReconciliationPolicy
    variance: VariancePolicy
    accruals: AccrualsPolicy
    digest: str
    findings_tier: str | None = None
    """A result with findings (a payment certificate's violated invariants and duplicate holds) is decided at least
    at this gated tier; None (risk.yaml without `findings`) means findings do not raise the tier."""

    def tier(self, name: str) -> Tier:
        for tier in self.tiers:
            if tier.name == name:
                return tier
        raise UnknownTierError(name, self.tier_names)

    @property
    def tier_names(self) -> tuple[str, ...]:
        return tuple(tier.name for tier in self.tiers)

    def escalation_owner(self, reason: EscalationReason) -> str:
        """The approver role that resolves an escalation for `reason` (risk.yaml `escalation.owners`)."""
        for owned, role in self.escalation_owners:
            if owned is reason:
                return role
        raise KeyError(f"no owner for escalation reason {reason!r}")
