"""A recorded exchange rate and the one conversion gate derivation makes with it. Pure.

An entity's amounts are in its functional currency; the policy's global thresholds are in the policy's currency.
A gate for an entity whose currency differs is judged on the amount converted at the rate the close records (the
database's `book_rate`, one per book set and currency pair). The database converts the same way (the same rounding,
the rate at the same precision), so both sides raise a tier at the same cent.
"""

import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation, localcontext

from countersign.policy.errors import GateInputError

CENT = Decimal("0.01")
RATE_PLACES = 10  # book_rate.rate is numeric(20, 10): ten places, below 10^10
_MAX_RATE = Decimal(10) ** 10
_CURRENCY = re.compile(r"[A-Z]{3}")


@dataclass(frozen=True)
class FxRate:
    """1 `from_currency` = `rate` `to_currency`, as `source` published it for `rate_date`."""

    from_currency: str
    to_currency: str
    rate: Decimal
    rate_date: date
    source: str

    def __post_init__(self) -> None:
        for field, code in (("fx.from_currency", self.from_currency), ("fx.to_currency", self.to_currency)):
            if not isinstance(code, str) or not _CURRENCY.fullmatch(code):
                raise GateInputError(field, f"expected an ISO 4217 code like GBP, got {code!r}")
        if self.from_currency == self.to_currency:
            raise GateInputError("fx.to_currency", f"a rate converts between two currencies, not {self.to_currency}")
        rate = self.rate
        if isinstance(rate, bool) or not isinstance(rate, Decimal) or not rate.is_finite():
            raise GateInputError("fx.rate", f"expected a finite Decimal, got {type(rate).__name__} {rate!r}")
        if not Decimal(0) < rate < _MAX_RATE:
            raise GateInputError("fx.rate", f"must be above 0 and below {_MAX_RATE:,}, got {rate}")
        if rate != rate.quantize(Decimal(1).scaleb(-RATE_PLACES)):
            raise GateInputError("fx.rate", f"at most {RATE_PLACES} decimal places (as the close records it): {rate}")
        if isinstance(self.rate_date, datetime) or not isinstance(self.rate_date, date):
            raise GateInputError("fx.rate_date", f"expected a date, got {type(self.rate_date).__name__}")
        if not isinstance(self.source, str) or not self.source.strip():
            raise GateInputError("fx.source", "a rate says who published it")

    @property
    def shown(self) -> str:
        """`0.79 USD/GBP (ECB euro reference rates, 2026-11-30)`: the rate as a person checks it."""
        return (
            f"{format(self.rate.normalize(), 'f')} {self.from_currency}/{self.to_currency} "
            f"({self.source.strip()}, {self.rate_date.isoformat()})"
        )


def convert(amount: Decimal, rate: FxRate) -> Decimal:
    """`amount` in `rate.from_currency`, in `rate.to_currency`: the exact product, rounded to the cent half to even."""
    if isinstance(amount, bool) or not isinstance(amount, Decimal) or not amount.is_finite():
        raise GateInputError("amount", f"expected a finite Decimal, got {type(amount).__name__} {amount!r}")
    with localcontext() as exact:
        exact.prec = 80  # an 18-digit amount times a 20-digit rate, never rounded before the cent
        try:
            return (amount * rate.rate).quantize(CENT, rounding=ROUND_HALF_EVEN)
        except InvalidOperation:
            raise GateInputError("amount", f"{amount} is too large to convert") from None
