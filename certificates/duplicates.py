"""The duplicate detector: a re-submitted certificate found by exact features and explicit thresholds, no model.

Features, each computed exactly: normalised vendor identity, normalised invoice number, amount due, date proximity,
description similarity (token Jaccard) and scope overlap (the same bill-line scope hash claimed over the same
quantity interval, valued at the claim's own rate). A hold names the earlier certificate, its line with the largest
overlap and the overlap amount, so it can be defended line by line.

A duplicate is a fact, not a judgement: this module imports nothing that could reach a model (a test asserts it).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from certificates.model import Certificate, amount_text

AMOUNT_TOLERANCE = Decimal("0.05")
"""Largest relative difference between the two amounts due: re-submissions are often nudged by a line or two."""
DATE_WINDOW_DAYS = 45
"""Largest gap between the two certificate dates."""
SIMILARITY_THRESHOLD = Decimal("0.70")
"""Smallest mean of description similarity and scope-overlap ratio (description alone when no line work is claimed)."""

_TOKEN = re.compile(r"[a-z0-9]+")
_LEGAL_FORMS = {"limited": "ltd", "ltd": "ltd", "plc": "plc", "llp": "llp", "inc": "inc", "co": "co"}


@dataclass(frozen=True)
class Thresholds:
    amount_tolerance: Decimal = AMOUNT_TOLERANCE
    date_window_days: int = DATE_WINDOW_DAYS
    similarity: Decimal = SIMILARITY_THRESHOLD


@dataclass(frozen=True)
class ClaimedInterval:
    label: str
    """`package/boq_line` on the certificate."""
    scope_hash: str
    from_centi: int
    to_centi: int
    value_minor: int


@dataclass(frozen=True)
class Submission:
    certificate: str
    vendor_key: str
    invoice_key: str
    amount_due_minor: int
    date: date
    description_tokens: frozenset[str]
    claims: tuple[ClaimedInterval, ...]


@dataclass(frozen=True)
class Features:
    same_invoice: bool
    amount_difference: Decimal
    days_apart: int
    description_similarity: Decimal
    overlap_minor: int
    overlap_ratio: Decimal
    other_line: str
    claims_line_work: bool
    """False when the candidate claims no bill-line progress (only variations, materials or releases)."""
    same_reference_numbers: bool
    """Both descriptions name the same numbers (valuation number, date of the works): the same statement."""

    @property
    def similarity(self) -> Decimal:
        if not self.claims_line_work:
            return self.description_similarity
        return (self.description_similarity + self.overlap_ratio) / 2


@dataclass(frozen=True)
class DuplicateHold:
    certificate: str
    other_certificate: str
    other_line: str
    overlap_minor: int
    features: Features

    @property
    def overlap(self) -> Decimal:
        return Decimal(self.overlap_minor).scaleb(-2)

    def explanation(self, currency: str) -> str:
        """Why the certificate is held, the overlap written with `currency` (its contract's)."""
        f = self.features
        basis = (
            "the same invoice number"
            if f.same_invoice
            else (
                f"amount within {f.amount_difference:.2%}, {f.days_apart} days apart, description similarity "
                f"{f.description_similarity:.2f}, scope overlap {f.overlap_ratio:.0%}"
            )
        )
        return (
            f"certificate {self.certificate} claims work already claimed by certificate {self.other_certificate} "
            f"line {self.other_line} (overlap {amount_text(self.overlap, currency)}): {basis}"
        )


def normalise_vendor(name: str) -> str:
    """Lower case, punctuation dropped, spelled-out initials joined ("L.L.P." -> "llp"), legal forms canonical."""
    tokens = _TOKEN.findall(name.lower().replace("&", " and "))
    joined: list[str] = []
    initials = ""
    for token in tokens:
        if len(token) == 1 and token.isalpha():
            initials += token
            continue
        if initials:
            joined.append(initials)
            initials = ""
        joined.append(token)
    if initials:
        joined.append(initials)
    words = [_LEGAL_FORMS.get(word, word[:-1] if len(word) > 4 and word.endswith("s") else word) for word in joined]
    return " ".join(words)


def normalise_invoice(number: str) -> str:
    return "".join(_TOKEN.findall(number.lower()))


def description_tokens(text: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(text.lower()))


def submission_of(certificate: Certificate) -> Submission:
    claims = tuple(
        ClaimedInterval(
            label=f"{line.package}/{line.boq_line}",
            scope_hash=line.scope_hash,
            from_centi=line.previous_quantity_centi,
            to_centi=line.quantity_to_date_centi,
            value_minor=line.period_value_minor,
        )
        for line in certificate.lines
        if line.quantity_to_date_centi > line.previous_quantity_centi and line.period_value_minor > 0
    )
    return Submission(
        certificate=certificate.id,
        vendor_key=normalise_vendor(certificate.vendor),
        invoice_key=normalise_invoice(certificate.invoice_number),
        amount_due_minor=certificate.totals.amount_due_minor,
        date=certificate.date,
        description_tokens=description_tokens(certificate.description),
        claims=claims,
    )


def jaccard(a: frozenset[str], b: frozenset[str]) -> Decimal:
    if not a and not b:
        return Decimal(0)
    return Decimal(len(a & b)) / Decimal(len(a | b))


def features(candidate: Submission, earlier: Submission) -> Features:
    larger = max(abs(candidate.amount_due_minor), abs(earlier.amount_due_minor))
    difference = (
        Decimal(0)
        if larger == 0
        else Decimal(abs(candidate.amount_due_minor - earlier.amount_due_minor)) / Decimal(larger)
    )
    by_scope: dict[str, list[ClaimedInterval]] = {}
    for claim in earlier.claims:
        by_scope.setdefault(claim.scope_hash, []).append(claim)
    overlap = 0
    best_line, best_overlap = "", 0
    for claim in candidate.claims:
        span = claim.to_centi - claim.from_centi
        for other in by_scope.get(claim.scope_hash, ()):
            shared = min(claim.to_centi, other.to_centi) - max(claim.from_centi, other.from_centi)
            if shared <= 0:
                continue
            amount = claim.value_minor * shared // span
            overlap += amount
            if amount > best_overlap:
                best_line, best_overlap = other.label, amount
    claimed = sum(claim.value_minor for claim in candidate.claims)
    ratio = Decimal(0) if claimed == 0 else min(Decimal(1), Decimal(overlap) / Decimal(claimed))
    return Features(
        same_invoice=candidate.invoice_key == earlier.invoice_key,
        amount_difference=difference,
        days_apart=abs((candidate.date - earlier.date).days),
        description_similarity=jaccard(candidate.description_tokens, earlier.description_tokens),
        overlap_minor=overlap,
        overlap_ratio=ratio,
        other_line=best_line or "(no line)",
        claims_line_work=claimed > 0,
        same_reference_numbers=_numbers(candidate.description_tokens) == _numbers(earlier.description_tokens),
    )


def _numbers(tokens: frozenset[str]) -> frozenset[str]:
    return frozenset(token for token in tokens if token.isdigit())


def is_duplicate(found: Features, thresholds: Thresholds) -> bool:
    if found.same_invoice:
        return True
    if found.days_apart > thresholds.date_window_days or found.amount_difference > thresholds.amount_tolerance:
        return False
    if not found.claims_line_work and not found.same_reference_numbers:
        return False  # no scope to compare: only a restatement of the same valuation counts
    return found.similarity >= thresholds.similarity


class DuplicateIndex:
    """The submissions a new certificate is compared against, blocked by normalised vendor and ordered by date."""

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self._dates: dict[str, list[tuple[int, str]]] = {}
        self._submissions: dict[str, list[Submission]] = {}

    def add(self, submission: Submission) -> None:
        key = (submission.date.toordinal(), submission.certificate)
        dates = self._dates.setdefault(submission.vendor_key, [])
        at = bisect_left(dates, key)
        dates.insert(at, key)
        self._submissions.setdefault(submission.vendor_key, []).insert(at, submission)

    def check(self, candidate: Submission) -> DuplicateHold | None:
        """The hold for `candidate` against the best-matching earlier submission, or None."""
        if candidate.amount_due_minor <= 0:
            return None  # nothing would be paid twice
        dates = self._dates.get(candidate.vendor_key, [])
        day = candidate.date.toordinal()
        first = bisect_left(dates, (day - self.thresholds.date_window_days, ""))
        last = bisect_left(dates, (day, candidate.certificate))
        best: tuple[Decimal, DuplicateHold] | None = None
        for earlier in self._submissions.get(candidate.vendor_key, [])[first:last]:
            found = features(candidate, earlier)
            if not is_duplicate(found, self.thresholds):
                continue
            rank = Decimal(1) + found.similarity if found.same_invoice else found.similarity
            if best is None or rank > best[0]:
                hold = DuplicateHold(
                    certificate=candidate.certificate,
                    other_certificate=earlier.certificate,
                    other_line=found.other_line,
                    overlap_minor=found.overlap_minor,
                    features=found,
                )
                best = (rank, hold)
        return None if best is None else best[1]


def detect(certificates: Iterable[Certificate], thresholds: Thresholds | None = None) -> tuple[DuplicateHold, ...]:
    """Hold every certificate that duplicates an earlier one (in date order) from the same normalised vendor."""
    return detect_submissions([submission_of(c) for c in certificates], thresholds or Thresholds())


def detect_submissions(
    submissions: Sequence[Submission], thresholds: Thresholds, *, comparable: Container[str] | None = None
) -> tuple[DuplicateHold, ...]:
    """Check each submission in date order against the earlier ones in `comparable` (default: all of them)."""
    index = DuplicateIndex(thresholds)
    holds: list[DuplicateHold] = []
    for submission in sorted(submissions, key=lambda s: (s.date, s.certificate)):
        hold = index.check(submission)
        if hold is not None:
            holds.append(hold)
        if comparable is None or submission.certificate in comparable:
            index.add(submission)
    return tuple(sorted(holds, key=lambda hold: hold.certificate))


@dataclass(frozen=True)
class SweepRow:
    similarity: Decimal
    amount_tolerance: Decimal
    held: int
    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def precision(self) -> Decimal:
        return _ratio(self.true_positives, self.true_positives + self.false_positives)

    @property
    def recall(self) -> Decimal:
        return _ratio(self.true_positives, self.true_positives + self.false_negatives)


SWEEP_SIMILARITIES = tuple(Decimal(n) / 10 for n in range(3, 10))
SWEEP_AMOUNT_TOLERANCES = (Decimal("0"), Decimal("0.005"), Decimal("0.02"), Decimal("0.05"))


def score_holds(holds: Iterable[DuplicateHold], duplicates: Mapping[str, str]) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) against `duplicates` (re-submission id -> original id)."""
    held = {hold.certificate for hold in holds}
    true_positives = len(held & set(duplicates))
    return true_positives, len(held) - true_positives, len(set(duplicates) - held)


def sweep(
    certificates: Iterable[Certificate],
    duplicates: Mapping[str, str],
    *,
    similarities: Sequence[Decimal] = SWEEP_SIMILARITIES,
    amount_tolerances: Sequence[Decimal] = SWEEP_AMOUNT_TOLERANCES,
    date_window_days: int = DATE_WINDOW_DAYS,
    comparable: Container[str] | None = None,
) -> tuple[SweepRow, ...]:
    """The precision/recall table over the threshold grid, against the seeded re-submissions.

    `comparable` limits what a submission is compared against (the evaluation passes the certificates its pipeline
    certified, as the workflow would); by default every earlier submission.
    """
    submissions = [submission_of(c) for c in certificates]
    rows = []
    for tolerance in amount_tolerances:
        for similarity in similarities:
            thresholds = Thresholds(
                amount_tolerance=tolerance, date_window_days=date_window_days, similarity=similarity
            )
            holds = detect_submissions(submissions, thresholds, comparable=comparable)
            tp, fp, fn = score_holds(holds, duplicates)
            rows.append(SweepRow(similarity, tolerance, len(holds), tp, fp, fn))
    return tuple(rows)


def _ratio(numerator: int, denominator: int) -> Decimal:
    return Decimal(1) if denominator == 0 else Decimal(numerator) / Decimal(denominator)
