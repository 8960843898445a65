"""Find the numbers in a piece of prose and check each one against the values it may cite.

A figure is a number token bounded by non-alphanumeric characters, so identifiers such as "Q3" or
"GL-0001" are not figures, while "17 of 17" holds two. Tolerance is always absolute.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

_SUFFIX_MULTIPLIERS = {"k": Decimal(1000), "m": Decimal(1_000_000), "bn": Decimal(1_000_000_000)}

_FIGURE_PATTERN = re.compile(
    r"""
    (?<![^\W_])                     # not glued to a letter or digit before
    (?<![^\W\d_][-\u2212])          # nor a letter-hyphen identifier such as GL-0001
    (?P<open>\()?                   # accounting negative, only with a matching close
    (?:(?P<iso>GBP|USD|EUR)[ \u00a0]?)?
    (?P<sign_a>[-\u2212])?
    (?P<symbol>[£$€])?
    (?(sign_a)|(?P<sign_b>[-\u2212])?)
    (?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)
    (?:(?P<suffix>(?i:bn|k|m))|(?P<percent>%))?
    (?![^\W_]|\.\d)                 # not glued to a letter or digit after
    (?(open)\))
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Figure:
    raw: str
    value: Decimal
    is_percent: bool
    start: int
    end: int


class UngroundedFigureError(ValueError):
    """A figure in the text is not within tolerance of any allowed value."""

    def __init__(self, figure: Figure, text: str) -> None:
        self.figure = figure
        self.text = text
        super().__init__(
            f"ungrounded figure {figure.raw!r} (value {figure.value}) at offset {figure.start}: "
            "no allowed value within tolerance"
        )


def extract_figures(text: str) -> list[Figure]:
    figures: list[Figure] = []
    for match in _FIGURE_PATTERN.finditer(text):
        magnitude = Decimal(match["number"].replace(",", ""))
        suffix = match["suffix"]
        if suffix is not None:
            magnitude *= _SUFFIX_MULTIPLIERS[suffix.lower()]
        negative = match["open"] is not None or match["sign_a"] is not None or match["sign_b"] is not None
        figures.append(
            Figure(
                raw=match.group(0),
                value=-magnitude if negative else magnitude,
                is_percent=match["percent"] is not None,
                start=match.start(),
                end=match.end(),
            )
        )
    return figures


def ground_figures(text: str, allowed: Iterable[Decimal], tolerance: Decimal) -> list[Figure]:
    """Return the figures in `text`; raise UngroundedFigureError on the first that no allowed value supports.

    Values are compared by magnitude, so "(£1,234.00)" grounds against -1234.00 and a negative value may
    be quoted as a positive amount. Percent figures are compared with the allowed values as plain numbers.
    """
    if not tolerance.is_finite() or tolerance < 0:
        raise ValueError(f"tolerance must be a finite, non-negative Decimal, got {tolerance}")
    magnitudes = sorted({abs(value) for value in allowed if value.is_finite()})
    figures = extract_figures(text)
    for figure in figures:
        if not _has_value_near(magnitudes, abs(figure.value), tolerance):
            raise UngroundedFigureError(figure, text)
    return figures


def _has_value_near(sorted_magnitudes: list[Decimal], target: Decimal, tolerance: Decimal) -> bool:
    index = bisect.bisect_left(sorted_magnitudes, target - tolerance)
    return index < len(sorted_magnitudes) and sorted_magnitudes[index] <= target + tolerance
