"""The certificate eval: invariant verdicts and duplicate holds against the generator's ground truth.

It measures the deterministic engine only: whether each invariant flags the certificates seeded with its fault class
and no others, whether each of the fourteen catches a crafted violation of its own, and the duplicate detector's
precision and recall. It does not measure extraction from real scans or calibration. Targets: recall >= 0.95 and
precision >= 0.95 on every seeded class and on duplicates; every invariant catches >= 0.95 of its crafted cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from certificates import invariants as inv
from certificates.assessment import CertificateAssessment, assess_contract
from certificates.duplicates import Thresholds, score_holds
from certificates.model import Certificate, Contract
from certificates.mutations import MUTATIONS
from certificates.pipeline import run_pipeline
from evals.scoring import Confusion, Summary, ratio, reaches, score_text

HARNESS = "certificate eval"
TARGET_RECALL = Decimal("0.95")
TARGET_PRECISION = Decimal("0.95")
CRAFTED_PER_INVARIANT = 25

DUPLICATE_SUBMISSION = "duplicate_submission"
# Seeded fault class (as named in ground_truth.json) -> the invariants that must flag it, the deciding one first.
CLASS_INVARIANTS: Mapping[str, tuple[str, ...]] = {
    "quantity_beyond_bill": (inv.QUANTITY_WITHIN_BILL,),
    "superseded_rate": (inv.PERIOD_WORK_AT_RATE_IN_FORCE,),
    "retention_released_twice": (inv.RETENTION_RELEASED_ONCE,),
    "scope_in_two_packages": (inv.SCOPE_BILLED_THROUGH_ONE_PACKAGE,),
    "mixed_basis_statement": (inv.LINES_STATED_CUMULATIVELY, inv.QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION),
    "advance_not_amortised": (inv.ADVANCE_AMORTISED_PER_SCHEDULE,),
    "materials_not_reversed": (inv.MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION,),
    "arithmetic_not_footing": (inv.STATEMENT_FOOTS,),
}
SEEDED_CLASSES = tuple(CLASS_INVARIANTS)


class GroundTruthError(ValueError):
    pass


@dataclass(frozen=True)
class GroundTruth:
    faults: Mapping[str, frozenset[str]]
    """Certificate id -> seeded fault classes."""
    duplicates: Mapping[str, str]
    """Re-submission certificate id -> the original it duplicates."""


def parse_ground_truth(data: object) -> GroundTruth:
    if not isinstance(data, Mapping):
        raise GroundTruthError("ground truth: <root>: expected a mapping")
    faults: dict[str, set[str]] = {}
    for index, fault in enumerate(_items(data, "faults")):
        certificate, name = fault.get("certificate"), fault.get("class")
        if not isinstance(certificate, str) or name not in CLASS_INVARIANTS:
            raise GroundTruthError(f"ground truth: faults[{index}]: needs a certificate id and a known class")
        faults.setdefault(certificate, set()).add(str(name))
    duplicates: dict[str, str] = {}
    for index, duplicate in enumerate(_items(data, "duplicates")):
        certificate, original = duplicate.get("certificate"), duplicate.get("original")
        if not isinstance(certificate, str) or not isinstance(original, str):
            raise GroundTruthError(f"ground truth: duplicates[{index}]: needs certificate and original ids")
        duplicates[certificate] = original
    return GroundTruth(faults={k: frozenset(v) for k, v in faults.items()}, duplicates=duplicates)


def _items(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = data.get(key)
    if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
        raise GroundTruthError(f"ground truth: {key}: expected a list of mappings")
    return items


@dataclass(frozen=True, kw_only=True)
class InvariantConfusion(Confusion):
    """One invariant's verdicts over the assessed certificates against the seeded faults."""

    invariant: str
    disabled: bool = False


@dataclass(frozen=True)
class ClassScore:
    fault_class: str
    invariant: str
    seeded: int
    caught: int
    precision: Decimal | None

    @property
    def recall(self) -> Decimal | None:
        return ratio(self.caught, self.seeded)


@dataclass(frozen=True)
class CraftedScore:
    invariant: str
    planted: int
    caught: int

    @property
    def recall(self) -> Decimal | None:
        return ratio(self.caught, self.planted)


@dataclass(frozen=True, kw_only=True)
class DuplicateScore(Confusion):
    """Duplicate holds against the seeded duplicate submissions (no true negatives are counted)."""

    thresholds: Thresholds


@dataclass(frozen=True)
class CertificateEvalReport:
    certificates: int
    assessed: int
    disabled: tuple[str, ...]
    confusion: tuple[InvariantConfusion, ...]
    classes: tuple[ClassScore, ...]
    crafted: tuple[CraftedScore, ...]
    duplicates: DuplicateScore

    def failures(self) -> tuple[str, ...]:
        problems = []
        for score in self.classes:
            if score.seeded == 0:
                problems.append(f"class {score.fault_class}: nothing seeded, so nothing measured")
                continue
            problems += _misses(f"class {score.fault_class}", score.recall, score.precision)
        for crafted in self.crafted:
            if not reaches(crafted.recall, TARGET_RECALL):
                problems.append(
                    f"invariant {crafted.invariant}: caught {crafted.caught} of {crafted.planted} crafted violations"
                )
        problems += _misses("duplicates", self.duplicates.recall, self.duplicates.precision)
        return tuple(problems)

    @property
    def passed(self) -> bool:
        return not self.failures()

    def summary(self) -> tuple[Summary, ...]:
        """The lowest recall and precision over the seeded classes, then the duplicate detector's."""
        recalls = [score.recall for score in self.classes]
        precisions = [score.precision for score in self.classes]
        return (
            Summary(HARNESS, "lowest class recall", _lowest(recalls), TARGET_RECALL),
            Summary(HARNESS, "lowest class precision", _lowest(precisions), TARGET_PRECISION),
            Summary(HARNESS, "duplicate recall", self.duplicates.recall, TARGET_RECALL),
            Summary(HARNESS, "duplicate precision", self.duplicates.precision, TARGET_PRECISION),
        )


def _misses(what: str, recall: Decimal | None, precision: Decimal | None) -> list[str]:
    problems = []
    if not reaches(recall, TARGET_RECALL):
        problems.append(f"{what}: recall {score_text(recall)} < {TARGET_RECALL}")
    if not reaches(precision, TARGET_PRECISION):
        problems.append(f"{what}: precision {score_text(precision)} < {TARGET_PRECISION}")
    return problems


def _lowest(scores: Sequence[Decimal | None]) -> Decimal | None:
    return None if not scores or any(score is None for score in scores) else min(s for s in scores if s is not None)


def assess_all(
    contracts: Mapping[str, Contract], certificates: Iterable[Certificate], *, disabled: Iterable[str] = ()
) -> tuple[CertificateAssessment, ...]:
    """Assess every contract's certificates (those in `certificates`), contracts in id order."""
    by_contract: dict[str, list[Certificate]] = {}
    for certificate in certificates:
        if certificate.contract not in contracts:
            raise ValueError(f"certificate {certificate.id} names an unknown contract {certificate.contract}")
        by_contract.setdefault(certificate.contract, []).append(certificate)
    skip = tuple(disabled)
    assessments: list[CertificateAssessment] = []
    for contract_id in sorted(by_contract):
        assessments.extend(assess_contract(contracts[contract_id], by_contract[contract_id], disabled=skip))
    return tuple(assessments)


def evaluate(
    contracts: Mapping[str, Contract],
    certificates: Sequence[Certificate],
    truth: GroundTruth,
    *,
    disabled: str | None = None,
    thresholds: Thresholds | None = None,
    crafted_per_invariant: int = CRAFTED_PER_INVARIANT,
) -> CertificateEvalReport:
    """Run the pipeline (duplicate check, then reconstruction and invariants) and score it against `truth`."""
    if disabled is not None and disabled not in inv.INVARIANTS:
        raise ValueError(f"unknown invariant {disabled!r} (known: {', '.join(inv.INVARIANTS)})")
    chosen = thresholds or Thresholds()
    skip = () if disabled is None else (disabled,)
    run = run_pipeline(contracts, certificates, thresholds=chosen, disabled=skip)
    tp, fp, fn = score_holds(run.holds, truth.duplicates)
    assessments = run.assessments

    expected_by_invariant: dict[str, set[str]] = {name: set() for name in inv.INVARIANTS}
    for certificate_id, fault_classes in truth.faults.items():
        for fault_class in fault_classes:
            for name in CLASS_INVARIANTS[fault_class]:
                expected_by_invariant[name].add(certificate_id)
    flagged: dict[str, set[str]] = {name: set() for name in inv.INVARIANTS}
    for assessment in assessments:
        for result in assessment.violations:
            flagged[result.name].add(assessment.certificate.id)
    assessed_ids = {a.certificate.id for a in assessments}
    confusion = []
    for name in inv.INVARIANTS:
        expected = expected_by_invariant[name]
        found = flagged[name]
        true_positives = len(found & expected)
        confusion.append(
            InvariantConfusion(
                invariant=name,
                true_positives=true_positives,
                false_positives=len(found - expected),
                false_negatives=len(expected - found),
                true_negatives=len(assessed_ids - found - expected),
                disabled=name == disabled,
            )
        )
    by_name = {row.invariant: row for row in confusion}
    classes: list[ClassScore] = []
    for fault_class, names in CLASS_INVARIANTS.items():
        seeded = {c for c, seeded_classes in truth.faults.items() if fault_class in seeded_classes}
        deciding = names[0]
        classes.append(
            ClassScore(
                fault_class=fault_class,
                invariant=deciding,
                seeded=len(seeded),
                caught=len(seeded & flagged[deciding]),
                precision=by_name[deciding].precision,
            )
        )
    crafted = _crafted(contracts, assessments, skip, crafted_per_invariant)
    return CertificateEvalReport(
        certificates=len(certificates),
        assessed=len(assessments),
        disabled=skip,
        confusion=tuple(confusion),
        classes=tuple(classes),
        crafted=crafted,
        duplicates=DuplicateScore(thresholds=chosen, true_positives=tp, false_positives=fp, false_negatives=fn),
    )


def _crafted(
    contracts: Mapping[str, Contract],
    assessments: Sequence[CertificateAssessment],
    disabled: tuple[str, ...],
    per_invariant: int,
) -> tuple[CraftedScore, ...]:
    planted = dict.fromkeys(inv.INVARIANTS, 0)
    caught = dict.fromkeys(inv.INVARIANTS, 0)
    for assessment in assessments:
        if not assessment.certified:
            continue
        contract = contracts[assessment.certificate.contract]
        for name, mutate in MUTATIONS.items():
            if planted[name] >= per_invariant:
                continue
            mutated = mutate(contract, assessment.position, assessment.certificate)
            if mutated is None:
                continue
            planted[name] += 1
            if name in disabled:
                continue
            result = inv.CHECKS[name](contract, assessment.position, mutated)
            caught[name] += result.violated
        if all(count >= per_invariant for count in planted.values()):
            break
    return tuple(CraftedScore(name, planted[name], caught[name]) for name in inv.INVARIANTS)
