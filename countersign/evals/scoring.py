"""How every eval scores and reports: one confusion count with exact precision and recall, and one summary line.

Scores are exact `Decimal` ratios, or None when the ratio is undefined (nothing flagged, nothing seeded): an
undefined score never reaches a target. Each harness sums itself up as `Summary` lines (harness, metric, value,
target, pass or fail), its negative control beside it; the control must fail for the harness to be green.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

Score = Decimal | float


def ratio(part: int, whole: int) -> Decimal | None:
    """`part / whole` exactly; None when `whole` is 0."""
    return None if whole == 0 else Decimal(part) / Decimal(whole)


def reaches(value: Score | None, target: Score) -> bool:
    """Does a score reach its target? An undefined score (None) never does."""
    return value is not None and value >= target


def score_text(value: Score | None) -> str:
    """Three places, or "n/a" for an undefined score."""
    return "n/a" if value is None else f"{value:.3f}"


@dataclass(frozen=True)
class Confusion:
    """What a detector flagged against what was planted: true and false positives and negatives."""

    true_positives: int
    false_positives: int
    false_negatives: int
    true_negatives: int = 0

    @property
    def flagged(self) -> int:
        return self.true_positives + self.false_positives

    @property
    def planted(self) -> int:
        return self.true_positives + self.false_negatives

    @property
    def precision(self) -> Decimal | None:
        return ratio(self.true_positives, self.flagged)

    @property
    def recall(self) -> Decimal | None:
        return ratio(self.true_positives, self.planted)

    @property
    def f1(self) -> Decimal:
        """The harmonic mean of precision and recall; 0 when either is undefined or both are 0."""
        p, r = self.precision, self.recall
        return Decimal(0) if p is None or r is None or p + r == 0 else 2 * p * r / (p + r)


@dataclass(frozen=True)
class Summary:
    """One line of an eval's summary: `injection eval: held-out precision 0.912 (target >= 0.85): PASS`."""

    harness: str
    metric: str
    value: Score | None
    target: Score
    control: bool = False  # a negative control's line: it passes by failing its target

    @property
    def reached(self) -> bool:
        return reaches(self.value, self.target)

    @property
    def passed(self) -> bool:
        return self.reached != self.control

    def render(self) -> str:
        who = f"{self.harness} (negative control)" if self.control else self.harness
        verdict = "PASS" if self.passed else "FAIL"
        expected = f"must stay below {self.target}" if self.control else f"target >= {self.target}"
        return f"{who}: {self.metric} {score_text(self.value)} ({expected}): {verdict}"


def all_passed(lines: tuple[Summary, ...]) -> bool:
    """Green when every measured line reaches its target and every control line misses its own."""
    return bool(lines) and all(line.passed for line in lines)


def render(lines: tuple[Summary, ...]) -> str:
    return "\n".join(line.render() for line in lines)
