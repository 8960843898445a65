"""Gate derivation: the only source of truth for which tasks need a human decision."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from countersign.money.formatting import format_money
from countersign.policy.errors import GateInputError
from countersign.policy.escalation import EscalationReason
from countersign.policy.fx import FxRate, convert
from countersign.policy.model import ENTITY_PATTERN, AlwaysHumanEvent, AmountThreshold, Policy, Tier
from countersign.policy.wording import in_words
from countersign.policy.workflow import Workflow, WorkflowTask
from countersign.states import GateKind

APPROVAL = GateKind.APPROVAL
ESCALATION = GateKind.ESCALATION


@dataclass(frozen=True)
class GateRequirement:
    task: str
    tier: str
    quorum: int
    approver_role: str
    due_hours: int
    rule: str
    kind: GateKind
    expire_hours: int | None = None


@dataclass(frozen=True)
class AlwaysHumanReason:
    """Why a gate always needs a person: an always-human account it touches or an event it reports.

    `subject` is the account code or the event's value; `detail` what a person recognises it by (the account's name;
    the supplier and the date of a change), or empty."""

    kind: Literal["account", "event"]
    subject: str
    detail: str

    @property
    def sentence(self) -> str:
        what = f"account {self.subject}" if self.kind == "account" else in_words(self.subject)
        detail = f" ({self.detail.strip()})" if self.detail.strip() else ""
        return f"{what}{detail} always needs a person"


@dataclass(frozen=True)
class Materiality:
    """How an amount was judged: `compared` (absolute, in `currency`) against `thresholds`.

    `entity` is set when the thresholds are the entity's own; `fx` when the amount was converted into the policy's
    currency first (then `original` is its absolute value in the entity's currency)."""

    compared: Decimal
    currency: str
    thresholds: tuple[AmountThreshold, ...]
    entity: str | None = None
    fx: FxRate | None = None
    original: Decimal | None = None


def materiality(policy: Policy, amount: Decimal, *, entity: str | None = None, fx: FxRate | None = None) -> Materiality:
    """The thresholds `amount` (in `entity`'s currency; the policy's without an entity) is compared with, and how.

    An entity with its own `amount_thresholds` is judged on them, in its own currency. Otherwise the global thresholds
    apply, and an amount in another currency is converted first at `fx` (from the entity's currency to the policy's),
    which must then be given: a GateInputError names `fx` when it is missing or for another pair.
    """
    _check_amount(amount)
    if entity is None:
        if fx is not None:
            raise GateInputError("fx", "a rate converts an entity's amount; no entity was given")
        return Materiality(abs(amount), policy.currency, policy.amount_thresholds)
    _check_entity(entity)
    own = policy.entity(entity)
    if own.amount_thresholds is not None:
        return Materiality(abs(amount), own.currency, own.amount_thresholds, entity=entity)
    if own.currency == policy.currency:
        return Materiality(abs(amount), policy.currency, policy.amount_thresholds)
    pair = f"{own.currency}->{policy.currency}"
    if fx is None:
        raise GateInputError("fx", f"amount in {own.currency} needs a {pair} rate the close records")
    if not isinstance(fx, FxRate):
        raise GateInputError("fx", f"expected an FxRate, got {type(fx).__name__}")
    if (fx.from_currency, fx.to_currency) != (own.currency, policy.currency):
        raise GateInputError(
            "fx", f"amount in {own.currency} needs a {pair} rate, got {fx.from_currency}->{fx.to_currency}"
        )
    return Materiality(convert(abs(amount), fx), policy.currency, policy.amount_thresholds, fx=fx, original=abs(amount))


def raising_threshold(
    policy: Policy, amount: Decimal, *, entity: str | None = None, fx: FxRate | None = None
) -> AmountThreshold | None:
    """The highest-ranked threshold that abs(amount) meets, if any (judged as `materiality` says)."""
    return _raising(policy, materiality(policy, amount, entity=entity, fx=fx))


def _raising(policy: Policy, judged: Materiality) -> AmountThreshold | None:
    met = [threshold for threshold in judged.thresholds if judged.compared >= threshold.min_amount]
    return max(met, key=lambda threshold: policy.tier(threshold.tier).rank, default=None)


def effective_tier(
    policy: Policy,
    task: WorkflowTask,
    amount: Decimal | None = None,
    *,
    entity: str | None = None,
    fx: FxRate | None = None,
) -> Tier:
    """max(task.risk_tier, the tier any amount threshold raises it to)."""
    tier = policy.tier(task.risk_tier)
    if amount is None:
        return tier
    threshold = raising_threshold(policy, amount, entity=entity, fx=fx)
    if threshold is None:
        return tier
    return max(tier, policy.tier(threshold.tier), key=lambda candidate: candidate.rank)


def always_human_reasons(
    policy: Policy,
    entity: str,
    accounts: Mapping[str, str],
    events: Sequence[tuple[AlwaysHumanEvent, str]] = (),
) -> tuple[AlwaysHumanReason, ...]:
    """Of the `accounts` a result touches (code -> name) and the `events` it reports (event, detail), the ones that
    always need a person for `entity`: accounts by code, then events in the order given. None without always_human."""
    _check_entity(entity)
    for event, detail in events:
        if not isinstance(event, AlwaysHumanEvent) or not isinstance(detail, str):
            known = ", ".join(member.value for member in AlwaysHumanEvent)
            raise GateInputError("events", f"expected (AlwaysHumanEvent ({known}), detail) pairs, got {event!r}")
    if policy.always_human is None:
        return ()
    always = policy.always_human_accounts(entity)
    found = [AlwaysHumanReason("account", code, accounts[code]) for code in sorted(accounts) if code in always]
    found += [AlwaysHumanReason("event", event.value, detail) for event, detail in events
              if event in policy.always_human.events]  # fmt: skip
    return tuple(found)


def derive_gate(
    policy: Policy,
    task: WorkflowTask,
    amount: Decimal | None = None,
    *,
    escalated: EscalationReason | None = None,
    findings: int = 0,
    entity: str | None = None,
    fx: FxRate | None = None,
    always_human: Sequence[AlwaysHumanReason] = (),
) -> GateRequirement | None:
    """The approval gate `task`'s result needs, or None.

    `amount` is in `entity`'s functional currency (the policy's currency without an entity); it is judged against the
    entity's own thresholds, or the global ones after conversion at `fx` when the currencies differ (`materiality`).
    A result touching an account or reporting an event that `always_human` lists (`always_human_reasons`) is decided
    at least at the policy's always-human tier. Work that was `escalated` earlier (the reason it halted) is never
    completed without a person: the gate is at least the escalation tier, whatever the task's own tier and amount say.
    A result with `findings` (violated invariants, duplicate holds) is decided at least at the policy's findings tier.
    """
    if isinstance(findings, bool) or not isinstance(findings, int) or findings < 0:
        raise GateInputError("findings", f"expected a count of at least 0, got {findings!r}")
    for reason in always_human:
        if not isinstance(reason, AlwaysHumanReason) or reason.kind not in ("account", "event"):
            raise GateInputError("always_human", f"expected AlwaysHumanReason values, got {reason!r}")
    base = policy.tier(task.risk_tier)
    tier = base
    reasons: list[str] = []
    if amount is not None:
        judged = materiality(policy, amount, entity=entity, fx=fx)
        threshold = _raising(policy, judged)
        if threshold is not None and policy.tier(threshold.tier).rank > base.rank:
            tier = policy.tier(threshold.tier)
            reasons.append(f"{_amount_clause(amount, judged, threshold)} raises tier {base.name} to {tier.name}")
    if always_human and policy.always_human is not None:
        always_tier = policy.tier(policy.always_human.tier)
        if always_tier.rank > tier.rank:
            tier = always_tier
        reasons += [reason.sentence for reason in always_human]
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


def _amount_clause(amount: Decimal, judged: Materiality, threshold: AmountThreshold) -> str:
    """`amount GBP 250,000.00 >= GBP 250,000.00`, naming the entity's own materiality or the conversion made."""
    limit = _money(threshold.min_amount, judged.currency)
    if judged.fx is not None and judged.original is not None:
        fx = judged.fx
        return (
            f"amount {_money(amount, fx.from_currency)} = {format_money(judged.compared, judged.currency)}"
            f" at {fx.shown} >= {limit}"
        )
    if judged.entity is not None:
        return f"amount {_money(amount, judged.currency)} >= {limit} (materiality of {judged.entity})"
    return f"amount {_money(amount, judged.currency)} >= {limit}"


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
    task: WorkflowTask, tier: Tier, rule: str, kind: GateKind, approver_role: str | None = None
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


def _check_entity(entity: object) -> None:
    if not isinstance(entity, str) or not ENTITY_PATTERN.fullmatch(entity):
        raise GateInputError("entity", f"expected an entity code (letters, digits, '.', '_' or '-'), got {entity!r}")


def _check_amount(amount: object) -> None:
    if isinstance(amount, bool) or not isinstance(amount, Decimal):
        raise GateInputError("amount", f"expected a Decimal, got {type(amount).__name__} {amount!r}")
    if not amount.is_finite():
        raise GateInputError("amount", f"must be a finite decimal, got {amount!r}")
