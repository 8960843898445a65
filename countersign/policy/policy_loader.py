"""Load and validate config/risk.yaml into a Policy."""

import dataclasses
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path

from countersign.policy.errors import PolicyError
from countersign.policy.escalation import EscalationReason
from countersign.policy.fields import Fields, describe
from countersign.policy.model import (
    ANY_CONTRACT,
    ENTITY_PATTERN,
    PERSON_KEY_PROOFS,
    PROOF_KINDS,
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
from countersign.policy.yaml_source import DOCUMENT, canonical_digest, read_yaml_file

SUPPORTED_POLICY_VERSIONS = (1,)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_GATED_TIER_KEYS = ("quorum", "approver_role", "due_hours", "expire_hours")
_ACCOUNT = re.compile(r"[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]{0,62}[^\s\x00-\x1f\x7f])?")


def load_policy(path: Path) -> Policy:
    data, file_digest = read_yaml_file(path)
    return dataclasses.replace(parse_policy(data, str(path)), digest=file_digest)


def parse_policy(data: object, source: str) -> Policy:
    """Validate plain data (as parsed from YAML); digest is sha256 of its canonical JSON."""
    root = Fields(
        data,
        source,
        DOCUMENT,
        required=(
            "version",
            "currency",
            "tiers",
            "amount_thresholds",
            "escalation",
            "reconciliation",
            "variance",
            "accruals",
        ),
        optional=("findings", "always_human", "entities"),
    )
    version = root.integer("version", minimum=1)
    if version not in SUPPORTED_POLICY_VERSIONS:
        raise root.error("version", f"unsupported version {version} (supported: {SUPPORTED_POLICY_VERSIONS})")
    currency = root.text("currency")
    if not _CURRENCY.match(currency):
        raise root.error("currency", f"expected an ISO 4217 code like GBP, got {currency!r}")
    tiers = _parse_tiers(root)
    tier_ranks = {tier.name: tier.rank for tier in tiers}
    escalation_tier, escalation_rule, escalation_owners = _parse_escalation(root, tiers)
    findings_tier = _parse_findings(root, tiers)  # every section is validated before the digest reads the data
    always_human = _parse_always_human(root, tiers)
    entities = _parse_entities(root, tier_ranks, always_human)
    return Policy(
        version=version,
        currency=currency,
        tiers=tiers,
        amount_thresholds=_parse_thresholds(root, tier_ranks),
        escalation_tier=escalation_tier,
        escalation_rule=escalation_rule,
        escalation_owners=escalation_owners,
        reconciliation=_parse_reconciliation(root),
        variance=_parse_variance(root),
        accruals=_parse_accruals(root),
        digest=canonical_digest(data, source),
        findings_tier=findings_tier,
        always_human=always_human,
        entities=entities,
    )


def _parse_tiers(root: Fields) -> tuple[Tier, ...]:
    entries = root.items("tiers")
    if not entries:
        raise root.error("tiers", "must list at least one tier")
    tiers: list[Tier] = []
    for rank, entry in enumerate(entries):
        first = Fields(entry, root.source, f"tiers[{rank}]", ("name", "gate"), (*_GATED_TIER_KEYS, "proofs"))
        name = first.text("name")
        if not _NAME.match(name):
            raise first.error("name", f"tier names are lower_snake_case, got {name!r}")
        if any(tier.name == name for tier in tiers):
            raise first.error("name", f"duplicate tier {name!r}")
        fields = Fields(entry, root.source, f"tiers[{name}]", ("name", "gate"), (*_GATED_TIER_KEYS, "proofs"))
        if fields.flag("gate"):
            for key in _GATED_TIER_KEYS:
                if not fields.has(key):
                    raise fields.error(
                        key, "missing required key (a gated tier needs quorum, approver_role, due_hours, expire_hours)"
                    )
            due_hours = fields.integer("due_hours", minimum=1)
            expire_hours = fields.integer("expire_hours", minimum=1)
            if expire_hours <= due_hours:
                raise fields.error("expire_hours", f"must be later than due_hours ({due_hours}), got {expire_hours}")
            tiers.append(
                Tier(
                    accepted_proofs=_accepted_proofs(fields),
                    name=name,
                    gate=True,
                    quorum=fields.integer("quorum", minimum=1),
                    approver_role=fields.text("approver_role"),
                    due_hours=due_hours,
                    rank=rank,
                    expire_hours=expire_hours,
                )
            )
        else:
            for key in (*_GATED_TIER_KEYS, "proofs"):
                if fields.has(key):
                    raise fields.error(key, "only allowed on a tier with gate: true")
            tiers.append(Tier(name=name, gate=False, quorum=0, approver_role=None, due_hours=None, rank=rank))
    return tuple(tiers)


def _accepted_proofs(fields: Fields) -> tuple[str, ...]:
    """A gated tier's `proofs`: which proofs a decision may carry. Without the key only a person's own key counts
    (Ed25519 or a passkey): a platform identity proves only what the platform's shared secret proves."""
    if not fields.has("proofs"):
        return PERSON_KEY_PROOFS
    entries = fields.items("proofs")
    if not entries:
        raise fields.error("proofs", f"must list at least one of {', '.join(PROOF_KINDS)}")
    proofs: list[str] = []
    for entry in entries:
        if not isinstance(entry, str) or entry not in PROOF_KINDS:
            raise fields.error("proofs", f"unknown proof {entry!r}; known: {', '.join(PROOF_KINDS)}")
        if entry in proofs:
            raise fields.error("proofs", f"{entry} is listed twice")
        proofs.append(entry)
    return tuple(proofs)


def _tier_reference(fields: Fields, key: str, tier_ranks: dict[str, int]) -> str:
    name = fields.text(key)
    if name not in tier_ranks:
        raise fields.error(key, f"unknown tier {name!r} (known: {', '.join(tier_ranks)})")
    return name


def _parse_thresholds(root: Fields, tier_ranks: dict[str, int]) -> tuple[AmountThreshold, ...]:
    return _threshold_list(root, "amount_thresholds", tier_ranks)


def _threshold_list(
    parent: Fields, key: str, tier_ranks: dict[str, int], *, max_places: int | None = None
) -> tuple[AmountThreshold, ...]:
    """`parent[key]`: thresholds ascending in min_amount and in tier, each error naming its index."""
    thresholds: list[AmountThreshold] = []
    for index, entry in enumerate(parent.items(key)):
        fields = Fields(entry, parent.source, f"{parent.field(key)}[{index}]", ("min_amount", "tier"))
        min_amount = fields.decimal("min_amount")
        if max_places is not None and min_amount != min_amount.quantize(Decimal(1).scaleb(-max_places)):
            raise fields.error("min_amount", f"at most {max_places} decimal places, got {fields.raw('min_amount')!r}")
        threshold = AmountThreshold(min_amount=min_amount, tier=_tier_reference(fields, "tier", tier_ranks))
        if thresholds:
            previous = thresholds[-1]
            if threshold.min_amount <= previous.min_amount:
                raise fields.error("min_amount", f"must be greater than the previous {previous.min_amount}")
            if tier_ranks[threshold.tier] <= tier_ranks[previous.tier]:
                raise fields.error(
                    "tier", f"{threshold.tier!r} must rank above the previous threshold's {previous.tier!r}"
                )
        thresholds.append(threshold)
    return tuple(thresholds)


def _parse_escalation(
    root: Fields, tiers: tuple[Tier, ...]
) -> tuple[str, str, tuple[tuple[EscalationReason, str], ...]]:
    fields = Fields(root.raw("escalation"), root.source, "escalation", ("tier", "rule", "owners"))
    name = _tier_reference(fields, "tier", {tier.name: tier.rank for tier in tiers})
    if not next(tier for tier in tiers if tier.name == name).gate:
        raise fields.error("tier", f"escalation tier {name!r} has gate: false, so nobody would be asked")
    rule = fields.text("rule")
    return name, rule, _parse_escalation_owners(fields, tiers)


def _parse_escalation_owners(escalation: Fields, tiers: tuple[Tier, ...]) -> tuple[tuple[EscalationReason, str], ...]:
    """Every EscalationReason, each owned by a role some gated tier asks for; an unknown reason is refused."""
    owners = Fields(
        escalation.raw("owners"),
        escalation.source,
        escalation.field("owners"),
        tuple(reason.value for reason in EscalationReason),
    )
    approver_roles = sorted({tier.approver_role for tier in tiers if tier.gate and tier.approver_role})
    owned: list[tuple[EscalationReason, str]] = []
    for reason in EscalationReason:
        role = owners.text(reason.value)
        if role not in approver_roles:
            raise owners.error(
                reason.value, f"unknown role {role!r} (approver roles of gated tiers: {', '.join(approver_roles)})"
            )
        owned.append((reason, role))
    return tuple(owned)


def _parse_reconciliation(root: Fields) -> ReconciliationPolicy:
    fields = Fields(
        root.raw("reconciliation"),
        root.source,
        "reconciliation",
        (
            "unmatched_tolerance",
            "date_window_days",
            "subledger_tolerance_amount",
            "intercompany_tolerance_amount",
        ),
    )
    return ReconciliationPolicy(
        unmatched_tolerance=fields.decimal("unmatched_tolerance"),
        date_window_days=fields.integer("date_window_days", minimum=0),
        subledger_tolerance_amount=fields.decimal("subledger_tolerance_amount"),
        intercompany_tolerance_amount=fields.decimal("intercompany_tolerance_amount"),
    )


def _parse_variance(root: Fields) -> VariancePolicy:
    fields = Fields(
        root.raw("variance"),
        root.source,
        "variance",
        ("threshold_amount", "threshold_pct", "grounding_tolerance"),
    )
    return VariancePolicy(
        threshold_amount=fields.decimal("threshold_amount"),
        threshold_pct=fields.decimal("threshold_pct"),
        grounding_tolerance=fields.decimal("grounding_tolerance"),
    )


def _parse_accruals(root: Fields) -> AccrualsPolicy:
    fields = Fields(
        root.raw("accruals"), root.source, "accruals", ("accrual_account", "materiality_amount"), ("certified",)
    )
    accrual_account = _account(fields, "accrual_account")
    return AccrualsPolicy(
        accrual_account=accrual_account,
        materiality_amount=fields.decimal("materiality_amount"),
        certified=_parse_certified(fields, accrual_account) if fields.has("certified") else None,
    )


def _account(fields: Fields, key: str) -> str:
    account = fields.text(key)
    if not _ACCOUNT.fullmatch(account):
        raise fields.error(key, f"expected an account code as the chart writes it, got {account!r}")
    return account


def _parse_certified(accruals: Fields, accrual_account: str) -> CertifiedAccruals:
    """`accruals.certified`: the cost account a certified sum is debited to, the accrual account credited (the
    accruals' own when absent) and, per contract id (`*` for any other), the entity whose books carry it."""
    fields = Fields(
        accruals.raw("certified"),
        accruals.source,
        accruals.field("certified"),
        ("cost_account", "contracts"),
        ("accrual_account",),
    )
    cost_account = _account(fields, "cost_account")
    credited = _account(fields, "accrual_account") if fields.has("accrual_account") else accrual_account
    if credited == cost_account:
        raise fields.error("accrual_account", f"is the cost account {cost_account!r}: the journal would net to nothing")
    raw = fields.raw("contracts")
    if not isinstance(raw, Mapping) or not raw:
        raise fields.error("contracts", f"expected a mapping of contract ids to entity codes, got {describe(raw)}")
    contracts: list[tuple[str, str]] = []
    for contract, entity in raw.items():
        where = f"contracts.{contract}"
        if not isinstance(contract, str) or not (contract == ANY_CONTRACT or 1 <= len(contract.strip()) <= 64):
            raise PolicyError(fields.source, fields.field(where), "a contract id is 1-64 characters, or * for any")
        if not isinstance(entity, str) or not ENTITY_PATTERN.fullmatch(entity):
            raise PolicyError(
                fields.source,
                fields.field(where),
                f"expected an entity code (1-64 letters, digits, '.', '_' or '-'), got {describe(entity)}",
            )
        contracts.append((contract, entity))
    return CertifiedAccruals(cost_account=cost_account, accrual_account=credited, contracts=tuple(contracts))


def _parse_findings(root: Fields, tiers: tuple[Tier, ...]) -> str | None:
    """`findings.tier`: a gated tier (findings must reach a person), or None when the section is absent."""
    if not root.has("findings"):
        return None
    fields = Fields(root.raw("findings"), root.source, "findings", ("tier",))
    name = _tier_reference(fields, "tier", {tier.name: tier.rank for tier in tiers})
    if not next(tier for tier in tiers if tier.name == name).gate:
        raise fields.error("tier", f"findings tier {name!r} has gate: false, so findings would reach nobody")
    return name


def _parse_always_human(root: Fields, tiers: tuple[Tier, ...]) -> AlwaysHuman | None:
    """`always_human`: a gated tier, and the accounts (every entity's) and events that always need a person."""
    if not root.has("always_human"):
        return None
    fields = Fields(root.raw("always_human"), root.source, "always_human", ("tier",), ("accounts", "events"))
    name = _tier_reference(fields, "tier", {tier.name: tier.rank for tier in tiers})
    if not next(tier for tier in tiers if tier.name == name).gate:
        raise fields.error("tier", f"always_human tier {name!r} has gate: false, so nobody would be asked")
    accounts = _account_list(fields, "accounts") if fields.has("accounts") else ()
    events = _event_list(fields, "events") if fields.has("events") else ()
    if not accounts and not events:
        raise PolicyError(root.source, "always_human", "lists no accounts and no events (omit the section instead)")
    return AlwaysHuman(tier=name, accounts=accounts, events=events)


def _account_list(fields: Fields, key: str, already: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Account codes as quoted strings, each once (and none of `already`, the global always-human accounts)."""
    accounts: list[str] = []
    for index, entry in enumerate(fields.items(key)):
        where = f"{fields.field(key)}[{index}]"
        if not isinstance(entry, str):
            raise PolicyError(fields.source, where, f"expected a quoted account code, got {describe(entry)}")
        if not _ACCOUNT.fullmatch(entry):
            raise PolicyError(
                fields.source, where, f"an account code is 1-64 characters, no spaces at either end, got {entry!r}"
            )
        if entry in accounts:
            raise PolicyError(fields.source, where, f"account {entry} is listed twice")
        if entry in already:
            raise PolicyError(fields.source, where, f"account {entry} is already in always_human.accounts")
        accounts.append(entry)
    return tuple(accounts)


def _event_list(fields: Fields, key: str) -> tuple[AlwaysHumanEvent, ...]:
    known = ", ".join(event.value for event in AlwaysHumanEvent)
    events: list[AlwaysHumanEvent] = []
    for index, entry in enumerate(fields.items(key)):
        where = f"{fields.field(key)}[{index}]"
        if not isinstance(entry, str) or entry not in {event.value for event in AlwaysHumanEvent}:
            raise PolicyError(fields.source, where, f"unknown event {entry!r} (known: {known})")
        event = AlwaysHumanEvent(entry)
        if event in events:
            raise PolicyError(fields.source, where, f"event {entry} is listed twice")
        events.append(event)
    return tuple(events)


def _parse_entities(
    root: Fields, tier_ranks: dict[str, int], always_human: AlwaysHuman | None
) -> tuple[EntityPolicy, ...]:
    """`entities`: per entity code, its functional currency, its own materiality and its own always-human accounts."""
    if not root.has("entities"):
        return ()
    entries = root.raw("entities")
    if not isinstance(entries, Mapping):
        raise PolicyError(root.source, "entities", f"expected a mapping of entity codes, got {describe(entries)}")
    entities: list[EntityPolicy] = []
    for name, entry in entries.items():
        if not isinstance(name, str) or not ENTITY_PATTERN.fullmatch(name):
            raise PolicyError(
                root.source,
                f"entities.{name}",
                "an entity code is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
            )
        fields = Fields(
            entry, root.source, f"entities.{name}", ("currency",), ("amount_thresholds", "always_human_accounts")
        )
        currency = fields.text("currency")
        if not _CURRENCY.match(currency):
            raise fields.error("currency", f"expected an ISO 4217 code like USD, got {currency!r}")
        thresholds = None
        if fields.has("amount_thresholds"):
            thresholds = _threshold_list(fields, "amount_thresholds", tier_ranks, max_places=2)
            if not thresholds:
                raise fields.error(
                    "amount_thresholds", "lists no threshold (omit it to use the global amount_thresholds)"
                )
        accounts: tuple[str, ...] = ()
        if fields.has("always_human_accounts"):
            if always_human is None:
                raise fields.error(
                    "always_human_accounts", "needs the always_human section (its tier is the least a gate may be)"
                )
            accounts = _account_list(fields, "always_human_accounts", always_human.accounts)
        entities.append(EntityPolicy(name, currency, thresholds, accounts))
    return tuple(entities)
