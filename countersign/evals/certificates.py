"""The certificate eval: invariant verdicts and duplicate holds against a generator's ground truth.

It measures the deterministic engine only, on data from either generator style (`countersign.synthetic.construction`,
the one
the checks were written beside, and `countersign.synthetic.construction_second_style`, written apart from them):
whether the
invariants flag the certificates seeded with each fault class and no clean ones, whether each invariant catches a
crafted violation of its own, whether the duplicate detector holds each kind of re-submission, and whether the tricky
legitimate certificates the ground truth lists pass untouched. It does not measure extraction from real scans or
calibration.

Targets: recall >= 0.95 and precision >= 0.95 on every seeded class and on duplicates (and recall on each duplicate
kind); every invariant that flags anything does so with precision >= 0.95; every invariant catches >= 0.95 of its
crafted cases; at most 5 % of each kind of tricky legitimate certificate is flagged or held.

Precision counts a flag on a clean certificate (no seeded fault, not a seeded duplicate) as a false positive. A flag
on a certificate seeded with another class is neither a true nor a false positive for this one: that certificate is
wrong and held either way. An undefined score (nothing flagged, nothing seeded) is None and prints as "n/a".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from countersign.certificates import invariants as inv
from countersign.certificates.assessment import CertificateAssessment, assess_contract
from countersign.certificates.duplicates import Thresholds
from countersign.certificates.model import Certificate, Contract
from countersign.certificates.mutations import MUTATIONS
from countersign.certificates.pipeline import run_pipeline
from countersign.evals.scoring import Confusion, Summary, ratio, reaches, score_text

HARNESS = "certificate eval"
TARGET_RECALL = Decimal("0.95")
TARGET_PRECISION = Decimal("0.95")
TARGET_TRICKY_FALSE_POSITIVES = Decimal("0.05")
"""At most this share of each kind of tricky legitimate certificate may be flagged or held."""
CRAFTED_PER_INVARIANT = 25
FIRST_STYLE = "first"
SECOND_STYLE = "second"
THIRD_STYLE = "third"
STYLES = (FIRST_STYLE, SECOND_STYLE, THIRD_STYLE)

DUPLICATE_SUBMISSION = "duplicate_submission"
RESUBMISSION = "re-submission"
"""The duplicate kind of a ground-truth entry that names none (the first style's)."""

# Seeded fault class (as named in ground_truth.json) -> the invariants that catch it. A certificate of the class is
# caught when any of them flags it; the first is the one the class is named after (materials kept on site breach
# the consumption check under `materials_first` and the line's allowance under `other_stock_first`).
CLASS_INVARIANTS: Mapping[str, tuple[str, ...]] = {
    "quantity_beyond_bill": (inv.QUANTITY_WITHIN_BILL,),
    "superseded_rate": (inv.PERIOD_WORK_AT_RATE_IN_FORCE,),
    "retention_released_twice": (inv.RETENTION_RELEASED_ONCE,),
    "scope_in_two_packages": (inv.SCOPE_BILLED_THROUGH_ONE_PACKAGE,),
    "mixed_basis_statement": (inv.LINES_STATED_CUMULATIVELY, inv.QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION),
    "advance_not_amortised": (inv.ADVANCE_AMORTISED_PER_SCHEDULE,),
    "materials_not_reversed": (inv.MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION, inv.MATERIALS_WITHIN_LINE_ALLOWANCE),
    "arithmetic_not_footing": (inv.STATEMENT_FOOTS,),
    "variation_dropped": (inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD,),
    "materials_partly_incorporated_kept": (
        inv.MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION,
        inv.MATERIALS_WITHIN_LINE_ALLOWANCE,
    ),
    "materials_relisted": (inv.MATERIALS_WITHIN_LINE_ALLOWANCE,),
    "variation_revalued_beyond_limit": (inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD,),
    "variation_sign_reversed": (inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD,),
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
    classes: tuple[str, ...] = ()
    """The classes the generator seeds (scored even when none landed); empty: those found in `faults`."""
    duplicate_kinds: Mapping[str, str] | None = None
    """Re-submission certificate id -> how it differs from its original; None: all plain re-submissions."""
    tricky: Mapping[str, frozenset[str]] | None = None
    """Certificate id -> the kinds of tricky legitimate case it is (it must be neither flagged nor held)."""
    style: str = FIRST_STYLE

    @property
    def scored_classes(self) -> tuple[str, ...]:
        if self.classes:
            return self.classes
        seen = {name for names in self.faults.values() for name in names}
        return tuple(name for name in SEEDED_CLASSES if name in seen)


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
    kinds: dict[str, str] = {}
    for index, duplicate in enumerate(_items(data, "duplicates")):
        certificate, original = duplicate.get("certificate"), duplicate.get("original")
        if not isinstance(certificate, str) or not isinstance(original, str):
            raise GroundTruthError(f"ground truth: duplicates[{index}]: needs certificate and original ids")
        kind = duplicate.get("kind", RESUBMISSION)
        if not isinstance(kind, str) or not kind:
            raise GroundTruthError(f"ground truth: duplicates[{index}].kind: expected a non-empty string")
        duplicates[certificate] = original
        kinds[certificate] = kind
    classes = data.get("classes", [])
    if not isinstance(classes, list) or any(name not in CLASS_INVARIANTS for name in classes):
        raise GroundTruthError(f"ground truth: classes: expected a list of known classes ({', '.join(SEEDED_CLASSES)})")
    tricky: dict[str, set[str]] = {}
    for index, case in enumerate(_items(data, "tricky") if "tricky" in data else []):
        certificate, kind = case.get("certificate"), case.get("kind")
        if not isinstance(certificate, str) or not isinstance(kind, str) or not kind:
            raise GroundTruthError(f"ground truth: tricky[{index}]: needs a certificate id and a kind")
        if certificate in faults or certificate in duplicates:
            raise GroundTruthError(f"ground truth: tricky[{index}]: {certificate} is also seeded as a fault")
        tricky.setdefault(certificate, set()).add(kind)
    style = data.get("style", FIRST_STYLE)
    if style not in STYLES:
        raise GroundTruthError(f"ground truth: style: expected one of {', '.join(STYLES)}, got {style!r}")
    return GroundTruth(
        faults={k: frozenset(v) for k, v in faults.items()},
        duplicates=duplicates,
        classes=tuple(str(name) for name in classes),
        duplicate_kinds=kinds,
        tricky={k: frozenset(v) for k, v in tricky.items()},
        style=str(style),
    )


def _items(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = data.get(key)
    if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
        raise GroundTruthError(f"ground truth: {key}: expected a list of mappings")
    return items


@dataclass(frozen=True, kw_only=True)
class InvariantConfusion(Confusion):
    """One invariant's verdicts: TP on certificates seeded with a class it catches, FP on clean certificates, FN on
    certificates of a class named after it that it let through; `other` counts its flags on certificates seeded with
    a class it is not listed for (neither right nor wrong: those certificates are held anyway)."""

    invariant: str
    other: int = 0
    disabled: bool = False


@dataclass(frozen=True)
class ClassScore:
    fault_class: str
    invariants: tuple[str, ...]
    seeded: int
    caught: int
    false_positives: int
    """Clean certificates flagged by any of the class's invariants."""

    @property
    def invariant(self) -> str:
        return self.invariants[0]

    @property
    def recall(self) -> Decimal | None:
        return ratio(self.caught, self.seeded)

    @property
    def precision(self) -> Decimal | None:
        return ratio(self.caught, self.caught + self.false_positives)


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
class DuplicateKindScore:
    kind: str
    seeded: int
    held: int

    @property
    def recall(self) -> Decimal | None:
        return ratio(self.held, self.seeded)


@dataclass(frozen=True)
class TrickyScore:
    """One kind of tricky legitimate certificate: how many there were, how many an invariant flagged, how many the
    duplicate detector held."""

    kind: str
    cases: int
    flagged: int
    held: int
    examples: tuple[str, ...] = ()
    """A few of the wrongly flagged or held certificates' ids, to look at."""

    @property
    def false_positive_share(self) -> Decimal | None:
        return ratio(self.flagged + self.held, self.cases)


@dataclass(frozen=True)
class CertificateEvalReport:
    certificates: int
    assessed: int
    disabled: tuple[str, ...]
    confusion: tuple[InvariantConfusion, ...]
    classes: tuple[ClassScore, ...]
    crafted: tuple[CraftedScore, ...]
    duplicates: DuplicateScore
    duplicate_kinds: tuple[DuplicateKindScore, ...] = ()
    tricky: tuple[TrickyScore, ...] = ()
    style: str = FIRST_STYLE

    def failures(self) -> tuple[str, ...]:
        problems = []
        for score in self.classes:
            if score.seeded == 0:
                problems.append(f"class {score.fault_class}: nothing seeded, so nothing measured")
                continue
            problems += _misses(f"class {score.fault_class}", score.recall, score.precision)
        for row in self.confusion:
            if row.flagged and not reaches(row.precision, TARGET_PRECISION):
                problems.append(
                    f"invariant {row.invariant}: precision {score_text(row.precision)} < {TARGET_PRECISION} "
                    f"({row.false_positives} clean certificates flagged)"
                )
        for crafted in self.crafted:
            if not reaches(crafted.recall, TARGET_RECALL):
                problems.append(
                    f"invariant {crafted.invariant}: caught {crafted.caught} of {crafted.planted} crafted violations"
                )
        problems += _misses("duplicates", self.duplicates.recall, self.duplicates.precision)
        if len(self.duplicate_kinds) > 1:
            for kind in self.duplicate_kinds:
                if not reaches(kind.recall, TARGET_RECALL):
                    problems.append(
                        f"duplicates {kind.kind}: held {kind.held} of {kind.seeded} "
                        f"(recall {score_text(kind.recall)} < {TARGET_RECALL})"
                    )
        for case in self.tricky:
            share = case.false_positive_share
            if share is not None and share > TARGET_TRICKY_FALSE_POSITIVES:
                problems.append(
                    f"tricky {case.kind}: {case.flagged} flagged and {case.held} held of {case.cases} legitimate "
                    f"certificates ({score_text(share)} > {TARGET_TRICKY_FALSE_POSITIVES})"
                )
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
    read_documents: bool = True,
) -> CertificateEvalReport:
    """Run the pipeline (duplicate check, then reconstruction and invariants) and score it against `truth`;
    `read_documents=False` checks every contract under the documented default conventions (a control: the third
    style declares none)."""
    if disabled is not None and disabled not in inv.INVARIANTS:
        raise ValueError(f"unknown invariant {disabled!r} (known: {', '.join(inv.INVARIANTS)})")
    chosen = thresholds or Thresholds()
    skip = () if disabled is None else (disabled,)
    run = run_pipeline(contracts, certificates, thresholds=chosen, disabled=skip, read_documents=read_documents)
    held = {hold.certificate for hold in run.holds}
    assessments = run.assessments

    flagged: dict[str, set[str]] = {name: set() for name in inv.INVARIANTS}
    for assessment in assessments:
        for result in assessment.violations:
            flagged[result.name].add(assessment.certificate.id)
    assessed_ids = {a.certificate.id for a in assessments}
    clean = assessed_ids - set(truth.faults) - set(truth.duplicates)
    seeded_by_class = {
        name: {c for c, classes in truth.faults.items() if name in classes} for name in truth.scored_classes
    }

    confusion = []
    for name in inv.INVARIANTS:
        catches = {c for c, classes in truth.faults.items() if any(name in CLASS_INVARIANTS[k] for k in classes)}
        named_after = {c for c, classes in truth.faults.items() if any(CLASS_INVARIANTS[k][0] == name for k in classes)}
        found = flagged[name]
        confusion.append(
            InvariantConfusion(
                invariant=name,
                true_positives=len(found & catches),
                false_positives=len(found & clean),
                false_negatives=len((named_after & assessed_ids) - found),
                true_negatives=len(clean - found),
                other=len((found & set(truth.faults)) - catches),
                disabled=name == disabled,
            )
        )
    classes: list[ClassScore] = []
    for fault_class in truth.scored_classes:
        names = CLASS_INVARIANTS[fault_class]
        caught_by_any = set().union(*(flagged[name] for name in names))
        seeded = seeded_by_class[fault_class]
        classes.append(
            ClassScore(
                fault_class=fault_class,
                invariants=names,
                seeded=len(seeded),
                caught=len(seeded & caught_by_any),
                false_positives=len(clean & caught_by_any),
            )
        )
    crafted = _crafted(contracts, assessments, skip, crafted_per_invariant)
    true_positives = len(held & set(truth.duplicates))
    return CertificateEvalReport(
        certificates=len(certificates),
        assessed=len(assessments),
        disabled=skip,
        confusion=tuple(confusion),
        classes=tuple(classes),
        crafted=crafted,
        duplicates=DuplicateScore(
            thresholds=chosen,
            true_positives=true_positives,
            false_positives=len(held - set(truth.duplicates)),
            false_negatives=len(truth.duplicates) - true_positives,
        ),
        duplicate_kinds=_duplicate_kinds(truth, held),
        tricky=_tricky(truth, assessed_ids, flagged, held),
        style=truth.style,
    )


def _duplicate_kinds(truth: GroundTruth, held: set[str]) -> tuple[DuplicateKindScore, ...]:
    kinds = truth.duplicate_kinds or dict.fromkeys(truth.duplicates, RESUBMISSION)
    names = sorted(set(kinds.values()))
    return tuple(
        DuplicateKindScore(
            kind=kind,
            seeded=sum(1 for k in kinds.values() if k == kind),
            held=sum(1 for c, k in kinds.items() if k == kind and c in held),
        )
        for kind in names
    )


def _tricky(
    truth: GroundTruth, assessed: set[str], flagged: Mapping[str, set[str]], held: set[str]
) -> tuple[TrickyScore, ...]:
    if not truth.tricky:
        return ()
    any_flag = set().union(*flagged.values())
    by_kind: dict[str, list[str]] = {}
    for certificate, kinds in truth.tricky.items():
        for kind in kinds:
            by_kind.setdefault(kind, []).append(certificate)
    scores = []
    for kind in sorted(by_kind):
        cases = sorted(by_kind[kind])
        wrong_flags = [c for c in cases if c in assessed and c in any_flag]
        wrong_holds = [c for c in cases if c in held]
        scores.append(
            TrickyScore(
                kind=kind,
                cases=len(cases),
                flagged=len(wrong_flags),
                held=len(wrong_holds),
                examples=tuple((wrong_flags + wrong_holds)[:3]),
            )
        )
    return tuple(scores)


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


def negative_control_invariant(report: CertificateEvalReport) -> str:
    """The invariant the built-in negative control switches off: the only one listed for the most-seeded class that
    lists one alone (switching it off must make that class's recall 0)."""
    seeded = [score for score in report.classes if score.seeded and len(score.invariants) == 1]
    if not seeded:
        return inv.INVARIANTS[0]
    return max(seeded, key=lambda score: (score.seeded, score.fault_class)).invariant
