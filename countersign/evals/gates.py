"""Gate-correctness eval: hand-written cases against the gates policy derives, plus a negative control.

The cases (config/evals/gate_cases.yaml) are written from business rules, not from the workflow file's
`requires_gate` flags (ADR 0001). The negative control deletes one tier's gate and re-runs the eval: it must fail,
or the cases cannot detect a missing gate.
"""

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from countersign.evals.scoring import Summary, ratio
from countersign.policy.errors import GateInputError, UnknownTaskError, UnknownTierError
from countersign.policy.escalation import EscalationReason
from countersign.policy.fields import Fields, describe
from countersign.policy.gates import APPROVAL, ESCALATION, GateRequirement, derive_escalation_gate, derive_gate
from countersign.policy.model import Policy
from countersign.policy.workflow import Workflow
from countersign.policy.yaml_source import DOCUMENT, read_yaml_file

SUPPORTED_CASE_VERSIONS = (1,)
GATE_KINDS = (APPROVAL, ESCALATION)
_CASE_KEYS = ("task", "tier", "amount", "anomaly", "expect")
# reason: why an anomaly case halted (default anomaly_over_tolerance); escalated: the reason the work was escalated
# before this run, for an approval case (default: it was not).
_OPTIONAL_CASE_KEYS = ("reason", "escalated")
_GATE_KEYS = ("kind", "tier", "quorum", "approver_role")


HARNESS = "gate eval"
EVERY_CASE = Decimal(1)


@dataclass(frozen=True)
class GateSpec:
    """The parts of a gate a case pins: what kind, which tier, how many approvers holding which role."""

    kind: str
    tier: str
    quorum: int
    approver_role: str

    def __str__(self) -> str:
        return f"{self.kind} {self.tier} x{self.quorum} {self.approver_role}"


@dataclass(frozen=True)
class GateCase:
    index: int  # position in the case file's `cases` list
    task: str
    tier: str
    amount: Decimal | None
    anomaly: bool
    expect: tuple[GateSpec, ...]
    reason: EscalationReason = EscalationReason.ANOMALY_OVER_TOLERANCE
    escalated: EscalationReason | None = None


@dataclass(frozen=True)
class CaseFailure:
    index: int
    task: str
    amount: Decimal | None
    expected: tuple[GateSpec, ...]
    actual: tuple[GateSpec, ...]
    reasons: tuple[str, ...]

    def describe(self) -> str:
        amount = "null" if self.amount is None else str(self.amount)
        return (
            f"cases[{self.index}] {self.task} amount {amount}: {'; '.join(self.reasons)} "
            f"(expected {_gates_text(self.expected)}, got {_gates_text(self.actual)})"
        )


@dataclass(frozen=True)
class EvalReport:
    cases: int
    failures: tuple[CaseFailure, ...]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def passed_share(self) -> Decimal | None:
        return ratio(self.cases - len(self.failures), self.cases)


def summary(report: EvalReport, control: EvalReport) -> tuple[Summary, ...]:
    """Every case must pass; with one gate removed (the control), some must fail."""
    return (
        Summary(HARNESS, "share of cases passed", report.passed_share, EVERY_CASE),
        Summary(HARNESS, "share of cases passed", control.passed_share, EVERY_CASE, control=True),
    )


def load_cases(path: Path) -> tuple[GateCase, ...]:
    data, _ = read_yaml_file(path)
    return parse_cases(data, str(path))


def parse_cases(data: object, source: str) -> tuple[GateCase, ...]:
    """Validate plain data (as parsed from YAML); raises PolicyError naming the source, field and reason."""
    root = Fields(data, source, DOCUMENT, required=("version", "cases"))
    version = root.integer("version", minimum=1)
    if version not in SUPPORTED_CASE_VERSIONS:
        raise root.error("version", f"unsupported version {version} (supported: {SUPPORTED_CASE_VERSIONS})")
    entries = root.items("cases")
    if not entries:
        raise root.error("cases", "must list at least one case")
    return tuple(_parse_case(entry, index, source) for index, entry in enumerate(entries))


def run_gate_eval(policy: Policy, workflow: Workflow, cases: Sequence[GateCase]) -> EvalReport:
    if not cases:
        raise GateInputError("cases", "an eval needs at least one case")
    failures = (_judge(policy, workflow, case) for case in cases)
    return EvalReport(cases=len(cases), failures=tuple(failure for failure in failures if failure is not None))


def without_one_gate(policy: Policy, tier: str) -> Policy:
    """The same policy with `tier`'s gate deleted: the negative control's policy."""
    target = policy.tier(tier)
    if not target.gate:
        raise GateInputError("tier", f"tier {tier!r} has no gate to delete, so it cannot serve as a negative control")
    ungated = dataclasses.replace(target, gate=False, quorum=0, approver_role=None, due_hours=None)
    tiers = tuple(ungated if candidate.name == tier else candidate for candidate in policy.tiers)
    return dataclasses.replace(policy, tiers=tiers, digest=f"{policy.digest}+without-{tier}-gate")


def negative_control(policy: Policy, workflow: Workflow, cases: Sequence[GateCase], tier: str = "medium") -> EvalReport:
    """The eval against the policy with `tier`'s gate deleted. A sound case table makes this fail."""
    return run_gate_eval(without_one_gate(policy, tier), workflow, cases)


def _judge(policy: Policy, workflow: Workflow, case: GateCase) -> CaseFailure | None:
    def failure(actual: tuple[GateSpec, ...], *reasons: str) -> CaseFailure:
        return CaseFailure(case.index, case.task, case.amount, case.expect, actual, reasons)

    try:
        task = workflow.task(case.task)
    except UnknownTaskError:
        return failure((), f"task {case.task!r} is not in the checklist")
    reasons: list[str] = []
    if task.risk_tier != case.tier:
        reasons.append(f"case says tier {case.tier} but the checklist says {task.risk_tier}")
    try:
        if case.anomaly:
            derived: tuple[GateRequirement | None, ...] = (
                derive_escalation_gate(policy, task, case.reason, f"planted anomaly (gate eval cases[{case.index}])"),
            )
        else:
            derived = (derive_gate(policy, task, case.amount, escalated=case.escalated),)
    except (GateInputError, UnknownTierError) as error:
        return failure((), *reasons, f"gate derivation failed: {error}")
    actual = tuple(_spec(gate) for gate in derived if gate is not None)
    if actual != case.expect:
        reasons.append("gates differ")
    return failure(actual, *reasons) if reasons else None


def _spec(gate: GateRequirement) -> GateSpec:
    return GateSpec(kind=gate.kind, tier=gate.tier, quorum=gate.quorum, approver_role=gate.approver_role)


def _gates_text(gates: tuple[GateSpec, ...]) -> str:
    return "[" + ", ".join(str(gate) for gate in gates) + "]" if gates else "no gate"


def _parse_case(entry: object, index: int, source: str) -> GateCase:
    fields = Fields(entry, source, f"cases[{index}]", _CASE_KEYS, _OPTIONAL_CASE_KEYS)
    expect = tuple(
        _parse_gate(gate, f"{fields.field('expect')}[{position}]", source)
        for position, gate in enumerate(fields.items("expect"))
    )
    anomaly = fields.flag("anomaly")
    if anomaly and fields.has("escalated"):
        raise fields.error("escalated", "only for a case that did not halt (anomaly: false): its re-run's approval")
    if not anomaly and fields.has("reason"):
        raise fields.error("reason", "only for a case that halted (anomaly: true): why it halted")
    return GateCase(
        index=index,
        task=fields.text("task"),
        tier=fields.text("tier"),
        amount=_parse_amount(fields),
        anomaly=anomaly,
        expect=expect,
        reason=_parse_reason(fields, "reason") or EscalationReason.ANOMALY_OVER_TOLERANCE,
        escalated=_parse_reason(fields, "escalated"),
    )


def _parse_reason(fields: Fields, key: str) -> EscalationReason | None:
    name = fields.optional_text(key)
    if name is None:
        return None
    try:
        return EscalationReason(name)
    except ValueError:
        known = ", ".join(reason.value for reason in EscalationReason)
        raise fields.error(key, f"unknown escalation reason {name!r} (known: {known})") from None


def _parse_amount(fields: Fields) -> Decimal | None:
    value = fields.raw("amount")
    if value is None:
        return None
    if not isinstance(value, str):
        hint = ' (write money as a quoted string, e.g. "250000.00")' if isinstance(value, (int, float)) else ""
        raise fields.error("amount", f"expected a decimal string or null, got {describe(value)}{hint}")
    try:
        amount = Decimal(value.strip())
    except InvalidOperation:
        raise fields.error("amount", f"not a decimal number: {value!r}") from None
    if not amount.is_finite():
        raise fields.error("amount", f"must be a finite decimal, got {value!r}")
    return amount


def _parse_gate(entry: object, path: str, source: str) -> GateSpec:
    fields = Fields(entry, source, path, _GATE_KEYS)
    kind = fields.text("kind")
    if kind not in GATE_KINDS:
        raise fields.error("kind", f"unknown gate kind {kind!r} (known: {', '.join(GATE_KINDS)})")
    return GateSpec(
        kind=kind,
        tier=fields.text("tier"),
        quorum=fields.integer("quorum", minimum=1),
        approver_role=fields.text("approver_role"),
    )
