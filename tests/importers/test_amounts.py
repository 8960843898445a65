"""Amounts as banks and ERPs write them: separators and signs read as declared, never guessed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from countersign.importers.amounts import parse_amount


@pytest.mark.parametrize(
    ("raw", "decimal_separator", "thousands_separator", "expected"),
    [
        ("1,234.56", ".", ",", "1234.56"),
        ("1.234,56", ",", ".", "1234.56"),
        ("1.234.567,5", ",", ".", "1234567.50"),
        ("1 234,50", ",", " ", "1234.50"),
        ("1\u202f234,50", ",", " ", "1234.50"),  # a narrow no-break space, as French exports write it
        ("(1,250.00)", ".", ",", "-1250.00"),
        ("45,00-", ",", ".", "-45.00"),
        ("+5", ".", "", "5.00"),
        ("-0.00", ".", "", "0.00"),
        ("980.00", ".", ",", "980.00"),
    ],
)
def test_declared_separators_and_one_sign_read_exactly(
    raw: str, decimal_separator: str, thousands_separator: str, expected: str
) -> None:
    amount = parse_amount(raw, decimal_separator=decimal_separator, thousands_separator=thousands_separator)
    assert amount == Decimal(expected) and str(amount) == expected  # -0.00 comes out as 0.00, no sign


@pytest.mark.parametrize(
    ("raw", "decimal_separator", "thousands_separator", "reason"),
    [
        ("-12.00-", ".", "", "expected one sign"),
        ("(-12.00)", ".", "", "expected one sign"),
        ("1,2,3.00", ".", ",", "grouped in threes"),
        ("980.00", ",", ".", "grouped in threes"),  # a point-decimal amount in a comma-decimal file
        ("12.5", ",", "", "as the decimal separator"),
        ("1,234.5,6", ".", ",", "no thousands separator after the decimal separator"),
        ("12.345", ".", "", "at most 2 decimal places"),
        ("", ".", "", "empty"),
        ("1e5", ".", "", "like 1234.56"),
    ],
)
def test_ambiguous_or_doubled_forms_are_refused_naming_what_was_expected(
    raw: str, decimal_separator: str, thousands_separator: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_amount(raw, decimal_separator=decimal_separator, thousands_separator=thousands_separator)
