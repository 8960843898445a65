from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.specialists.grounding import Figure, UngroundedFigureError, extract_figures, ground_figures

money = st.decimals(
    min_value=Decimal("-999999999.99"),
    max_value=Decimal("999999999.99"),
    places=2,
    allow_nan=False,
    allow_infinity=False,
)
percent = st.decimals(
    min_value=Decimal("-9999.9"), max_value=Decimal("9999.9"), places=1, allow_nan=False, allow_infinity=False
)

# Each style renders an amount as text and says which value that text stands for.
MoneyStyle = Callable[[Decimal], tuple[str, Decimal]]
MONEY_STYLES: dict[str, MoneyStyle] = {
    "symbol and thousands": lambda d: (f"£{abs(d):,.2f}", abs(d)),
    "plain signed": lambda d: (f"{d:.2f}", d),
    "accounting parentheses": lambda d: (f"(£{abs(d):,.2f})", -abs(d)),
    "leading minus": lambda d: (f"-£{abs(d):,.2f}", -abs(d)),
    "unicode minus": lambda d: (f"\u2212£{abs(d):,.2f}", -abs(d)),
    "minus after symbol": lambda d: (f"£-{abs(d):,.2f}", -abs(d)),
    "thousands suffix": lambda d: (f"£{abs(d) / 1000:f}k", abs(d)),
    "millions suffix": lambda d: (f"${abs(d) / 1_000_000:f}M", abs(d)),
    "iso code": lambda d: (f"EUR {d:,.2f}", d),
}


def _only_figure(text: str) -> Figure:
    figures = extract_figures(text)
    assert len(figures) == 1, figures
    return figures[0]


@pytest.mark.parametrize("style", sorted(MONEY_STYLES))
@given(amount=money)
def test_every_money_style_extracts_the_value_it_shows(style: str, amount: Decimal) -> None:
    rendered, shown_value = MONEY_STYLES[style](amount)
    text = f"Rent came to {rendered} this period."

    figure = _only_figure(text)

    assert figure.value == shown_value
    assert figure.raw == rendered
    assert text[figure.start : figure.end] == rendered
    assert not figure.is_percent


@given(value=percent)
def test_percentages_extract_their_number_and_are_marked_percent(value: Decimal) -> None:
    figure = _only_figure(f"a variance of {value:.1f}% against budget")

    assert figure.value == value
    assert figure.is_percent


@given(amounts=st.lists(money, min_size=1, max_size=8), data=st.data())
def test_text_citing_only_allowed_values_is_grounded(amounts: list[Decimal], data: st.DataObject) -> None:
    parts = []
    for amount in amounts:
        style = data.draw(st.sampled_from(sorted(MONEY_STYLES)))
        parts.append(MONEY_STYLES[style](amount)[0])
    text = "Figures: " + ", then ".join(parts) + "."

    figures = ground_figures(text, amounts, Decimal("0.01"))

    assert len(figures) == len(amounts)


@given(allowed=money, offset_cents=st.integers(min_value=2, max_value=10**6))
def test_a_figure_beyond_the_absolute_tolerance_is_ungrounded(allowed: Decimal, offset_cents: int) -> None:
    cited = abs(allowed) + Decimal(offset_cents) / 100
    text = f"spend was £{cited:,.2f}"

    with pytest.raises(UngroundedFigureError):
        ground_figures(text, [allowed], Decimal("0.01"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("£53.2k", Decimal("53200")),
        ("53.2K", Decimal("53200")),
        ("1.5m", Decimal("1500000")),
        ("£1.5M", Decimal("1500000")),
        ("2bn", Decimal("2000000000")),
        ("$2BN", Decimal("2000000000")),
        ("(1,234.00)", Decimal("-1234.00")),
        ("(£1,234.00)", Decimal("-1234.00")),
        ("\u2212£1,234.00", Decimal("-1234.00")),
        ("\u221212.5", Decimal("-12.5")),
        ("GBP 1,000.00", Decimal("1000.00")),
        ("USD -12.50", Decimal("-12.50")),
        ("EUR1,000", Decimal("1000")),
        ("1,234,567.89", Decimal("1234567.89")),
        ("€-3.10", Decimal("-3.10")),
    ],
)
def test_single_figure_forms(text: str, expected: Decimal) -> None:
    figure = _only_figure(f"value: {text}.")

    assert figure.value == expected
    assert figure.raw == text


def test_plain_integers_are_figures() -> None:
    figures = extract_figures("17 of 17 bank lines unmatched")

    assert [figure.value for figure in figures] == [Decimal(17), Decimal(17)]
    assert [(figure.start, figure.end) for figure in figures] == [(0, 2), (6, 8)]


@pytest.mark.parametrize("text", ["account GL-0001", "revenue in Q3", "ref INV2026", "12months", "x-5"])
def test_numbers_inside_identifiers_are_not_figures(text: str) -> None:
    assert extract_figures(text) == []


@pytest.mark.parametrize("text", ["(£1,234.00 is in the notes", "the notes say £1,234.00)"])
def test_an_unbalanced_parenthesis_is_not_a_negative(text: str) -> None:
    figure = _only_figure(text)

    assert figure.value == Decimal("1234.00")
    assert figure.raw == "£1,234.00"


def test_a_hyphenated_range_yields_both_ends() -> None:
    values = [figure.value for figure in extract_figures("between £5,000-£6,000 a month")]

    assert values == [Decimal(5000), Decimal(6000)]


def test_ground_figures_accepts_a_grounded_text_and_returns_its_figures() -> None:
    text = "Rent was £66,000.00 against (£13,000.00), 24.5% over, and 53.2k in total."
    allowed = [Decimal("66000.00"), Decimal("-13000.00"), Decimal("24.5"), Decimal("53200.00")]

    figures = ground_figures(text, allowed, Decimal("0.01"))

    assert [figure.raw for figure in figures] == ["£66,000.00", "(£13,000.00)", "24.5%", "53.2k"]


def test_magnitudes_ground_either_sign() -> None:
    ground_figures("(£1,234.00)", [Decimal("1234.00")], Decimal("0"))
    ground_figures("£1,234.00", [Decimal("-1234.00")], Decimal("0"))


def test_one_unmatched_figure_raises_naming_it() -> None:
    text = "Rent was £66,000.00 and power was £1,234.56."

    with pytest.raises(UngroundedFigureError) as caught:
        ground_figures(text, [Decimal("66000.00")], Decimal("0.01"))

    assert caught.value.figure.raw == "£1,234.56"
    assert caught.value.figure.value == Decimal("1234.56")
    assert caught.value.text == text
    message = str(caught.value)
    assert "£1,234.56" in message
    assert "1234.56" in message
    assert str(text.index("£1,234.56")) in message


def test_tolerance_is_absolute_not_relative() -> None:
    half_a_percent_off = "costs of £53,265.00"

    with pytest.raises(UngroundedFigureError):
        ground_figures(half_a_percent_off, [Decimal("53000.00")], Decimal("0.01"))


def test_tolerance_boundary_is_inclusive() -> None:
    ground_figures("£53,000.01", [Decimal("53000.00")], Decimal("0.01"))
    with pytest.raises(UngroundedFigureError):
        ground_figures("£53,000.02", [Decimal("53000.00")], Decimal("0.01"))


def test_text_without_figures_is_grounded_against_nothing() -> None:
    assert ground_figures("No account exceeded the thresholds.", [], Decimal("0.01")) == []


def test_negative_tolerance_is_rejected() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        ground_figures("£1.00", [Decimal("1.00")], Decimal("-0.01"))
