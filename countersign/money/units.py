"""How many decimal places each currency is written to (ISO 4217's minor unit). Pure: the standard library only, so
the pure rooms (the certificates domain) can ask without loading Babel."""

from __future__ import annotations

DEFAULT_MINOR_UNITS = 2

# ISO 4217 currencies whose minor unit is not the hundredth (list one: "Minor unit" column). CLDR's own digits differ
# for some (IQD, IRR), so the table is ours and Babel is told not to apply its own.
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


def minor_per_unit(currency: str) -> int:
    """How many minor units make one whole unit of `currency`: `"JPY"` -> 1, `"GBP"` -> 100, `"KWD"` -> 1000."""
    return int(10 ** minor_units(currency))
