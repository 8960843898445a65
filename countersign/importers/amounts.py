"""Reading amounts and dates as banks and ERPs write them: separators, signs and formats named, never guessed."""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

MAX_AMOUNT = Decimal(10) ** 16  # book amounts are numeric(18,2): at most 16 digits before the point
CENT = Decimal("0.01")
_SPACES = re.compile(r"[\s\u00a0\u202f]")  # ordinary, no-break and narrow no-break spaces (French thousands)


def parse_amount(raw: str, *, decimal_separator: str = ".", thousands_separator: str = "") -> Decimal:
    """A money amount with at most two decimals: `1,234.56`, `1.234,56`, `-12.00`, `(12.00)`, `12.00-`, `+5`.

    Raises ValueError naming what was expected. Negative zero becomes 0.
    """
    text = raw.strip()
    if not text:
        raise ValueError("expected an amount, found an empty value")
    signs = 0
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative, text, signs = True, text[1:-1].strip(), signs + 1
    if text.endswith("-"):
        negative, text, signs = True, text[:-1].strip(), signs + 1
    if text[:1] in "+-":
        negative, text, signs = negative or text[0] == "-", text[1:].strip(), signs + 1
    if signs > 1:
        raise ValueError(f"expected one sign (a leading -, a trailing - or parentheses), found {raw!r}")
    whole, _, decimals = text.partition(decimal_separator)
    if thousands_separator:
        spaced = thousands_separator.isspace() or thousands_separator in "\u00a0\u202f"
        separator = r"[\s\u00a0\u202f]" if spaced else re.escape(thousands_separator)
        if re.search(separator, decimals):
            raise ValueError(f"expected no thousands separator after the decimal separator, found {raw!r}")
        if re.search(separator, whole):
            if not re.fullmatch(rf"[0-9]{{1,3}}(?:{separator}[0-9]{{3}})+", whole):
                raise ValueError(f"expected digits grouped in threes by {thousands_separator!r}, found {raw!r}")
            whole = re.sub(separator, "", whole)
    if decimal_separator != "." and ("." in whole or "." in decimals):
        raise ValueError(f"expected an amount with {decimal_separator!r} as the decimal separator, found {raw!r}")
    text = f"{whole}.{decimals}" if decimal_separator in text else whole
    if not re.fullmatch(r"[0-9]+(\.[0-9]*)?|\.[0-9]+", text):
        raise ValueError(f"expected an amount like 1234.56, found {raw!r}")
    try:
        amount = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern above admits only decimal digits
        raise ValueError(f"expected an amount like 1234.56, found {raw!r}") from None
    return checked_amount(-amount if negative else amount, raw)


def checked_amount(amount: Decimal, raw: object) -> Decimal:
    """`amount` to the cent, refusing more than two decimals or more than 16 digits; -0 becomes 0."""
    if not amount.is_finite():
        raise ValueError(f"expected a finite amount, found {raw!r}")
    if abs(amount) >= MAX_AMOUNT:
        raise ValueError(f"expected at most 16 digits before the decimal point, found {raw!r}")
    cents = amount.quantize(CENT)
    if cents != amount:
        raise ValueError(f"expected at most 2 decimal places, found {raw!r}")
    return cents + 0  # Decimal("-0.00") + 0 == Decimal("0.00"): negative zero is not kept


def parse_date(raw: str, date_format: str = "%Y-%m-%d") -> date:
    """A date in `date_format` (strptime codes); raises ValueError naming the format expected."""
    text = raw.strip()
    try:
        return datetime.strptime(text, date_format).date()
    except ValueError:
        raise ValueError(f"expected a date like {date(2026, 11, 30).strftime(date_format)}, found {raw!r}") from None


def checked_currency(raw: str) -> str:
    code = raw.strip().upper()
    if not re.fullmatch(r"[A-Z]{3}", code):
        raise ValueError(f"expected an ISO 4217 currency code like GBP, found {raw!r}")
    return code
