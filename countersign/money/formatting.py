"""Money as a person reads it: the ISO currency code, then the amount grouped and given to the currency's ISO 4217
minor units (JPY none, KWD and BHD three, most currencies two), written in a CLDR locale's digits and separators
through Babel. Amounts are `Decimal`, never `float`; rounding is half to even, as everywhere a figure is shown.

The code, never a symbol: a finance group holds several currencies, and "$" or "kr" alone does not say which. The
code stands first in every locale (`"GBP 1,640,038.33"` in en_GB, `"CHF 1'640'038.33"` in de_CH,
`"EUR 1.640.038,33"` in de_DE), so a column of amounts in several currencies reads the same way down the page; the
sign stands after the code (`"GBP -82,213.52"`). The locale gives the group and decimal symbols and the grouping
(en_IN groups lakhs: `"INR 16,40,038.33"`).
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

from babel import Locale, UnknownLocaleError
from babel.numbers import format_currency

from countersign.money.units import DEFAULT_MINOR_UNITS, minor_units

DEFAULT_LOCALE = "en_GB"


class UnknownMoneyLocale(ValueError):
    """A locale name that is not a CLDR locale Babel knows; `locale` is the name as given."""

    def __init__(self, locale: str) -> None:
        self.locale = locale
        super().__init__(f"unknown locale {locale!r}: amounts are written in a CLDR locale such as en_GB or de_CH")


def format_amount(amount: Decimal, places: int = DEFAULT_MINOR_UNITS) -> str:
    """The figure alone, grouped, in the en_GB manner: `Decimal("-82213.5")` -> `"-82,213.50"`. For a figure whose
    currency is not known (a share, a count); an amount of money goes through `format_money`."""
    return f"{amount:,.{places}f}"


def format_money(amount: Decimal, currency: str, *, locale: str | None = None) -> str:
    """`(Decimal("82213.52"), "GBP")` -> `"GBP 82,213.52"`; `(Decimal("1500"), "JPY")` -> `"JPY 1,500"`;
    `(Decimal("1640038.33"), "CHF", locale="de_CH")` -> `"CHF 1'640'038.33"`. `locale` is a CLDR name (`en_GB`,
    `de_CH`, `de-CH`); None means en_GB. Raises `UnknownMoneyLocale` (a ValueError) naming a locale Babel does not
    know."""
    code = currency.upper()
    babel_locale = parse_locale(DEFAULT_LOCALE if locale is None else locale)
    return format_currency(
        amount,
        code,
        format=_pattern(_grouping(babel_locale), minor_units(code)),
        locale=babel_locale,
        currency_digits=False,
    )


def parse_locale(name: str) -> Locale:
    """The Babel locale for a CLDR name, `en_GB` or `en-GB`; `UnknownMoneyLocale` for anything else."""
    return _parse_locale(name)


@lru_cache(maxsize=64)
def _parse_locale(name: str) -> Locale:
    try:
        parsed = Locale.parse(name.strip(), sep="-" if "-" in name else "_")
    except (UnknownLocaleError, ValueError, TypeError) as exc:
        raise UnknownMoneyLocale(name) from exc
    if "'" in str(parsed.number_symbols["latn"].get("group", ",")):
        return _ApostropheGroupLocale(parsed.language, parsed.territory, parsed.script, parsed.variant)
    return parsed


class _ApostropheGroupLocale(Locale):
    """A locale whose group symbol is the ASCII apostrophe (the Swiss locales since CLDR 47). Babel 2.19 strips
    quoted text from a formatted number after grouping it, so `1'640'038.33` would come out as `1640038.33`; the
    doubled apostrophe Babel reads as one literal quote survives that pass."""

    @property
    def number_symbols(self) -> dict[str, dict[str, str]]:  # type: ignore[override]
        return {
            system: {name: ("''" if name == "group" and value == "'" else value) for name, value in symbols.items()}
            for system, symbols in super().number_symbols.items()
        }


def _grouping(babel_locale: Locale) -> tuple[int, int]:
    grouping: tuple[int, int] = babel_locale.currency_formats["standard"].grouping
    return grouping


def _pattern(grouping: tuple[int, int], places: int) -> str:
    """A Babel pattern: the code, a space, the sign, the figure grouped as the locale groups it, `places` decimals."""
    primary, secondary = grouping
    if primary >= 100:  # no grouping in this locale's currency format
        integer = "0"
    elif secondary == primary:
        integer = "#," + "#" * (primary - 1) + "0"
    else:
        integer = "#," + "#" * secondary + "," + "#" * (primary - 1) + "0"
    figure = integer + ("." + "0" * places if places else "")
    return f"¤¤ {figure};¤¤ -{figure}"
