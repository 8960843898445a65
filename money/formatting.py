"""Money as a person reads it on a card: the currency code, then the amount grouped in thousands and given to the
currency's ISO 4217 minor units (JPY none, KWD and BHD three, most currencies two). Amounts are `Decimal`, never
`float`; rounding is the `Decimal` default (half to even), as everywhere cards format a figure.
"""

from __future__ import annotations

from decimal import Decimal

DEFAULT_MINOR_UNITS = 2

# ISO 4217 currencies whose minor unit is not the hundredth (list one: "Minor unit" column).
MINOR_UNITS: dict[str, int] = {
    "BIF": 0,
    "CLP": 0,
    "DJF": 0,
    "GNF": 0,
    "ISK": 0,
    "JPY": 0,
    "KMF": 0,
    "KRW": 0,
    "PYG": 0,
    "RWF": 0,
    "UGX": 0,
    "UYI": 0,
    "VND": 0,
    "VUV": 0,
    "XAF": 0,
    "XOF": 0,
    "XPF": 0,
    "BHD": 3,
    "IQD": 3,
    "JOD": 3,
    "KWD": 3,
    "LYD": 3,
    "OMR": 3,
    "TND": 3,
    "CLF": 4,
    "UYW": 4,
}


def minor_units(currency: str) -> int:
    """How many decimal places an amount in `currency` is shown to: `"JPY"` -> 0, `"KWD"` -> 3, `"GBP"` -> 2."""
    return MINOR_UNITS.get(currency.upper(), DEFAULT_MINOR_UNITS)


def format_amount(amount: Decimal, places: int = DEFAULT_MINOR_UNITS) -> str:
    """The figure alone, grouped: `Decimal("-82213.5")` -> `"-82,213.50"`."""
    return f"{amount:,.{places}f}"


def format_money(amount: Decimal, currency: str) -> str:
    """`(Decimal("82213.52"), "GBP")` -> `"GBP 82,213.52"`; `(Decimal("1500"), "JPY")` -> `"JPY 1,500"`."""
    return f"{currency} {format_amount(amount, minor_units(currency))}"
