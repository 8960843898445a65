"""A spreadsheet's or a PDF's cell text as the figures the domain's JSON records carry (decimal strings, never float).

People write `12,345.60`, `-1,200.00`, `(1,200.00)` for a credit, `12345.6`; dates as `2025-06-28` or `28/06/2025`.
Each reader turns its cells into text first (an XLSX number cell through its shortest decimal repr, never float
arithmetic); these functions turn the text into the canonical form or raise ValueError with the reason.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal

_FIGURE = re.compile(r"^(?P<sign>-?)(?P<whole>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<fraction>\d{1,2}))?$")
_BRACKETED = re.compile(r"^\((?P<inner>[^()]+)\)$")
_UK_DATE = re.compile(r"^(?P<day>\d{1,2})/(?P<month>\d{1,2})/(?P<year>\d{4})$")
_PERIOD = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
_WHOLE = re.compile(r"^\d{1,9}$")


def cell_text(value: object) -> str:
    """A cell's value as text: numbers through their decimal repr, dates as ISO dates, None as ""."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).upper()
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == datetime.min.time() else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float):
        return format(Decimal(repr(value)), "f")  # the shortest repr, never float arithmetic
    if isinstance(value, int | Decimal):
        return format(value, "f") if isinstance(value, Decimal) else str(value)
    return str(value).strip()


def decimal_text(text: str) -> str:
    """`"12,345.6"` -> `"12345.60"`, `"(1,200.00)"` -> `"-1200.00"`; anything else raises ValueError."""
    raw = text.strip().replace("\u2212", "-")
    bracketed = _BRACKETED.match(raw)
    negative = bracketed is not None
    if bracketed is not None:
        raw = bracketed.group("inner").strip()
    match = _FIGURE.match(raw)
    if match is None or (negative and match.group("sign")):
        raise ValueError(f"expected a figure with at most 2 decimal places like 12,345.60, got {text!r}")
    whole = match.group("whole").replace(",", "")
    fraction = (match.group("fraction") or "").ljust(2, "0")
    sign = "-" if (negative or match.group("sign")) and (int(whole) or int(fraction)) else ""
    return f"{sign}{int(whole)}.{fraction}"


def iso_date(text: str) -> str:
    """`"2025-06-28"` or `"28/06/2025"` (day first, as in the UK) -> `"2025-06-28"`; else ValueError."""
    raw = text.strip()
    uk = _UK_DATE.match(raw)
    try:
        if uk is not None:
            return date(int(uk.group("year")), int(uk.group("month")), int(uk.group("day"))).isoformat()
        return date.fromisoformat(raw).isoformat()
    except ValueError:
        raise ValueError(f"expected a date like 2025-06-28 or 28/06/2025, got {text!r}") from None


def period_text(text: str) -> str:
    """`"2025-06"` -> itself; `"2025-06-01"` (a spreadsheet turns a typed "2025-06" into the 1st of the month) ->
    `"2025-06"`; else ValueError."""
    raw = text.strip()
    if len(raw) == 10 and raw.endswith("-01") and _PERIOD.match(raw[:7]):
        return raw[:7]
    if not _PERIOD.match(raw):
        raise ValueError(f"expected a month like 2025-06, got {text!r}")
    return raw


def whole_number(text: str) -> int:
    """`"7"` -> 7 (an XLSX number cell `7.0` reads as "7.0" and is accepted); else ValueError."""
    raw = text.strip()
    if raw.endswith(".0"):
        raw = raw[:-2]
    if not _WHOLE.match(raw):
        raise ValueError(f"expected a whole number, got {text!r}")
    return int(raw)
