"""money/formatting.py: the currency code always shown, the amount to the currency's ISO 4217 minor units."""

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from cards.formatting import money
from cards.payments import payments_card, slack_payments_message, teams_payments_card
from money.formatting import format_money, minor_units
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
