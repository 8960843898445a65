"""countersign/money/formatting.py: the currency code always shown, amounts to ISO 4217 minor units, in a CLDR
locale."""

import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.cards.formatting import money
from countersign.cards.payments import payments_card, slack_payments_message, teams_payments_card
from countersign.money.formatting import UnknownMoneyLocale, format_money, minor_units
from tests.cards.test_payments_card import run_row, slack_text, teams_text


def test_yen_shows_no_decimals() -> None:
    assert format_money(Decimal("1234567"), "JPY") == "JPY 1,234,567"
    assert format_money(Decimal("1500.4"), "JPY") == "JPY 1,500"


def test_kuwaiti_and_bahraini_dinars_show_three_decimals() -> None:
    assert format_money(Decimal("1234.5"), "KWD") == "KWD 1,234.500"
    assert format_money(Decimal("0.125"), "BHD") == "BHD 0.125"


def test_negative_amounts_keep_their_sign_before_the_figure() -> None:
    assert format_money(Decimal("-82213.52"), "GBP") == "GBP -82,213.52"
    assert format_money(Decimal("-1500"), "JPY") == "JPY -1,500"
    assert format_money(Decimal("-0.001"), "KWD") == "KWD -0.001"


def test_two_decimal_currencies_read_as_before() -> None:
    """Negative control: a pound, euro or dollar amount reads exactly as the cards printed it before, and a
    currency without its own entry gets two places, not none or three."""
    for currency in ("GBP", "EUR", "USD", "XYZ"):
        assert minor_units(currency) == 2
        assert format_money(Decimal("82213.5"), currency) == f"{currency} 82,213.50"
    assert format_money(Decimal("82213.52"), "GBP") != "GBP 82,213.520"
    assert format_money(Decimal("1500"), "GBP") != "GBP 1,500"


@given(st.decimals(min_value=-(10**12), max_value=10**12, places=2, allow_nan=False, allow_infinity=False))
def test_a_two_decimal_amount_is_the_old_money_figure_after_the_code(amount: Decimal) -> None:
    assert format_money(amount, "GBP") == f"GBP {money(amount)}"


def test_a_payment_run_in_yen_shows_whole_yen_on_both_platforms() -> None:
    rows = [run_row(1, currency="JPY", amount_to_certify="1500"), run_row(2, currency="KWD", amount_to_certify="7.25")]
    card = payments_card(rows, "2025-06")
    for text in (slack_text(slack_payments_message(card)), teams_text(teams_payments_card(card))):
        assert "JPY 1,500" in text and "JPY 1,500.00" not in text
        assert "KWD 7.250" in text


# Locales (issue 21): Babel writes the digits and separators of a CLDR locale; the ISO code and ISO minor units stay.

LOCALES = ("en_GB", "de_CH", "de_DE", "fr_FR", "en_IN", "ja_JP", "sv_SE", "en_US")
SYMBOLS = ("£", "$", "€", "¥", "円", "kr", "Fr.")


def test_swiss_german_keeps_the_code_and_groups_with_apostrophes() -> None:
    assert format_money(Decimal("1640038.33"), "CHF", locale="de_CH") == "CHF 1'640'038.33"
    assert format_money(Decimal("-1640038.33"), "GBP", locale="de-CH") == "GBP -1'640'038.33"


def test_german_uses_points_for_groups_and_a_comma_for_decimals() -> None:
    assert format_money(Decimal("1640038.33"), "EUR", locale="de_DE") == "EUR 1.640.038,33"
    assert format_money(Decimal("1234.5"), "KWD", locale="de_DE") == "KWD 1.234,500"


def test_indian_english_groups_lakhs() -> None:
    assert format_money(Decimal("1640038.33"), "INR", locale="en_IN") == "INR 16,40,038.33"


def test_no_locale_is_british_english() -> None:
    amount = Decimal("1640038.33")
    assert format_money(amount, "GBP") == format_money(amount, "GBP", locale="en_GB") == "GBP 1,640,038.33"


def test_minor_units_are_iso_4217_in_every_locale_not_cldr() -> None:
    """CLDR gives the Iraqi dinar no decimals; ISO 4217 gives it three, and so do we."""
    for locale in LOCALES:
        assert format_money(Decimal("1500.4"), "JPY", locale=locale).endswith("500")
        assert format_money(Decimal("7.25"), "KWD", locale=locale)[-5:] in ("7.250", "7,250")
        assert format_money(Decimal("7.25"), "IQD", locale=locale)[-5:] in ("7.250", "7,250")


def test_the_code_is_shown_never_a_symbol() -> None:
    for locale in LOCALES:
        for currency in ("GBP", "USD", "EUR", "JPY", "SEK", "CHF"):
            text = format_money(Decimal("-1640038.33"), currency, locale=locale)
            assert text.startswith(f"{currency} "), text
            assert not any(symbol in text for symbol in SYMBOLS), text


def test_a_lower_case_code_is_shown_upper_case() -> None:
    assert format_money(Decimal("1234.5"), "kwd") == "KWD 1,234.500"


@pytest.mark.parametrize("name", ["xx_YY", "not a locale", "", "en_GBX", "de_CH.UTF-8"])
def test_a_bad_locale_is_one_value_error_naming_it(name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(name))) as raised:
        format_money(Decimal("1"), "GBP", locale=name)
    assert isinstance(raised.value, UnknownMoneyLocale) and raised.value.locale == name


def test_good_locale_names_are_not_refused() -> None:
    """Negative control for the refusal above: real CLDR names, with either separator, format."""
    for name in (*LOCALES, "de-CH", "en-GB", "fr_CH", "pt_BR"):
        assert format_money(Decimal("1"), "GBP", locale=name).startswith("GBP ")


@given(
    st.decimals(min_value=-(10**12), max_value=10**12, places=3, allow_nan=False, allow_infinity=False),
    st.sampled_from(LOCALES),
    st.sampled_from(("GBP", "JPY", "KWD")),
)
def test_every_locale_shows_the_same_digits_and_sign(amount: Decimal, locale: str, currency: str) -> None:
    """Only the separators change with the locale: the digits and the sign are those of the amount rounded (half to
    even) to the currency's minor units."""
    text = format_money(amount, currency, locale=locale)
    rounded = amount.quantize(Decimal(1).scaleb(-minor_units(currency)))
    assert re.sub(r"\D", "", text) == re.sub(r"\D", "", f"{rounded:f}")
    assert ("-" in text) == (rounded < 0 or (rounded == 0 and rounded.is_signed()))
