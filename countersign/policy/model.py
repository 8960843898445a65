"""The close policy as frozen values: risk tiers, amount thresholds, escalation (tier, rule, owners), settings, the
accounts and events that always need a person, and each entity's functional currency and materiality."""

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from countersign.policy.errors import UnknownTierError
from countersign.policy.escalation import EscalationReason


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


# What may prove that a person decided (countersign.states.ProofKind holds the same words; so does the database).
PLATFORM_IDENTITY = "platform_identity"
PERSON_KEY_PROOFS = ("ed25519", "passkey")
PROOF_KINDS = (PLATFORM_IDENTITY, *PERSON_KEY_PROOFS)


@dataclass(frozen=True)
class AmountThreshold:
    """An absolute amount at or above `min_amount` raises a task to at least `tier`."""

    min_amount: Decimal
    tier: str


# An entity code as a close names it (countersign/engine/runs.py check_entity_and_period): it becomes folder names and
# chat text.
ENTITY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class AlwaysHumanEvent(StrEnum):
    """Something that happened in the books which a person must see whatever the amount (risk.yaml
    `always_human.events`)."""

    SUPPLIER_BANK_DETAILS_CHANGED = "supplier_bank_details_changed"


@dataclass(frozen=True)
class AlwaysHuman:
    """A gate touching one of `accounts` (for every entity) or reporting one of `events` is at least `tier` (gated)."""

    tier: str
    accounts: tuple[str, ...]
    events: tuple[AlwaysHumanEvent, ...]


@dataclass(frozen=True)
class EntityPolicy:
    """One entity's functional currency, its own materiality (None: the global `amount_thresholds`, converted from
    `currency` to the policy's currency when they differ) and the accounts always-human for it beyond the global ones.
    Own thresholds are in the entity's currency."""

    entity: str
    currency: str
    amount_thresholds: tuple[AmountThreshold, ...] | None
    always_human_accounts: tuple[str, ...]


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


ANY_CONTRACT = "*"
"""In `accruals.certified.contracts`: every contract not named there."""


@dataclass(frozen=True)
class CertifiedAccruals:
    """`accruals.certified`: where a certified payment is accrued. The database records one accrual proposal per
    certification for the close of the contract's entity and the certificate's period (ADR 0050)."""

    cost_account: str
    """Debited: the construction cost (or work in progress) the certified sum is."""
    accrual_account: str
    """Credited: the accrued liability until the contractor's invoice is posted."""
    contracts: tuple[tuple[str, str], ...]
    """(contract id, entity whose books carry it), in file order; the contract id `*` stands for every other one."""

    def entity_of(self, contract_id: str) -> str | None:
        found = dict(self.contracts)
        return found.get(contract_id, found.get(ANY_CONTRACT))


@dataclass(frozen=True)
class AccrualsPolicy:
    accrual_account: str
    materiality_amount: Decimal
    certified: CertifiedAccruals | None = None
    """None (risk.yaml without `accruals.certified`): no contract is carried by an entity, and the database refuses a
    certification, since its accrual would have nowhere to go."""


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
    always_human: AlwaysHuman | None = None
    """Accounts and events that always need a person; None (risk.yaml without `always_human`): none do."""
    entities: tuple[EntityPolicy, ...] = ()
    """Entities risk.yaml names (`entities`), in file order; any other entity gets `entity(name)`'s defaults."""

    def tier(self, name: str) -> Tier:
        for tier in self.tiers:
            if tier.name == name:
                return tier
        raise UnknownTierError(name, self.tier_names)

    @property
    def tier_names(self) -> tuple[str, ...]:
        return tuple(tier.name for tier in self.tiers)

    def entity(self, name: str) -> EntityPolicy:
        """`name`'s policy; an entity risk.yaml does not name keeps the policy's currency and the global thresholds."""
        for entity in self.entities:
            if entity.entity == name:
                return entity
        return EntityPolicy(entity=name, currency=self.currency, amount_thresholds=None, always_human_accounts=())

    def always_human_accounts(self, entity: str) -> frozenset[str]:
        """The accounts a gate of `entity` always needs a person for: the global ones and the entity's own."""
        if self.always_human is None:
            return frozenset()
        return frozenset((*self.always_human.accounts, *self.entity(entity).always_human_accounts))

    def escalation_owner(self, reason: EscalationReason) -> str:
        """The approver role that resolves an escalation for `reason` (risk.yaml `escalation.owners`)."""
        for owned, role in self.escalation_owners:
            if owned is reason:
                return role
        raise KeyError(f"no owner for escalation reason {reason!r}")
