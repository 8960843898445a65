"""Budget and prior-period figures planted around the actuals so variance analysis has work to do."""

import random
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

VARIANCE_THRESHOLD_MINOR = 500_000
VARIANCE_THRESHOLD_PCT = Decimal("10.0")
FLAG_CANDIDATE_MIN_MINOR = 10_000_000
_BASIS = 10_000


@dataclass(frozen=True)
class PnlLine:
    account: str
    actual_minor: int
    budget_minor: int
    prior_minor: int

    @property
    def variance_budget_minor(self) -> int:
        return self.actual_minor - self.budget_minor

    @property
    def variance_budget_pct(self) -> Decimal | None:
        """round(100 * (actual - budget) / abs(budget), 1), half away from zero; None when budget is 0."""
        if self.budget_minor == 0:
            return None
        ratio = Decimal(100 * self.variance_budget_minor) / Decimal(abs(self.budget_minor))
        return ratio.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)

    @property
    def flagged(self) -> bool:
        pct = self.variance_budget_pct
        return abs(self.variance_budget_minor) > VARIANCE_THRESHOLD_MINOR and (
            pct is None or abs(pct) > VARIANCE_THRESHOLD_PCT
        )


def plan_pnl(rng: random.Random, actuals: dict[str, int], variance_flags: int) -> list[PnlLine]:
    """Budgets within ~4% of actuals except `variance_flags` large accounts planted 15-30% away."""
    accounts = sorted(actuals)
    candidates = [a for a in accounts if abs(actuals[a]) >= FLAG_CANDIDATE_MIN_MINOR]
    planted = set(rng.sample(candidates, min(variance_flags, len(candidates))))
    lines: list[PnlLine] = []
    for account in accounts:
        actual = actuals[account]
        if account in planted:
            spread = 1_500 + int(rng.random() * 1_501)
            sign = 1 if rng.random() < 0.5 else -1
            budget = actual * _BASIS // (_BASIS + sign * spread)
        else:
            budget = actual * (_BASIS + int(rng.random() * 801) - 400) // _BASIS
        prior = actual * (_BASIS + int(rng.random() * 2_401) - 1_200) // _BASIS
        lines.append(PnlLine(account=account, actual_minor=actual, budget_minor=budget, prior_minor=prior))
    return lines
