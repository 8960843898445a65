from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.specialists import variance
from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.grounding import UngroundedFigureError, extract_figures
from countersign.specialists.variance import VarianceLine, handle


def _line(account: str, name: str, actual: str, budget: str, prior: str = "50000.00") -> dict[str, Any]:
    actual_d, budget_d, prior_d = Decimal(actual), Decimal(budget), Decimal(prior)
    pct = (
        None
        if budget_d == 0
        else str((100 * (actual_d - budget_d) / abs(budget_d)).quantize(Decimal("0.1"), ROUND_HALF_UP))
    )
    return {
        "account": account,
        "name": name,
        "actual": actual,
        "prior": prior,
        "budget": budget,
        "variance_prior": f"{actual_d - prior_d:.2f}",
        "variance_budget": f"{actual_d - budget_d:.2f}",
        "variance_budget_pct": pct,
    }


def _payload(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "period": "2026-10",
        "threshold_amount": "5000.00",
        "threshold_pct": "10.0",
        "grounding_tolerance": "0.01",
        "lines": lines,
    }


RENT_OVER = _line("6100", "Rent", "66000.00", "53000.00")  # +13,000.00, 24.5%: flagged
POWER_UNDER = _line("6200", "Power", "1000.00", "9000.00")  # -8,000.00, -88.9%: flagged
TRAVEL_SMALL_AMOUNT = _line("6300", "Travel", "5900.00", "1000.00")  # +4,900.00, 490%: under amount
PAYROLL_SMALL_PCT = _line("6400", "Payroll", "560000.00", "500000.00")  # +60,000.00, 12.0%: flagged
SALARIES_UNDER_PCT = _line("6500", "Salaries", "540000.00", "500000.00")  # +40,000.00, 8.0%: under pct
MISC_NO_BUDGET = _line("6600", "Sundries", "7000.00", "0.00")  # +7,000.00, pct null: flagged


def test_flags_lines_over_both_thresholds_and_keeps_input_order() -> None:
    lines = [
        RENT_OVER,
        POWER_UNDER,
        TRAVEL_SMALL_AMOUNT,
        PAYROLL_SMALL_PCT,
        SALARIES_UNDER_PCT,
        MISC_NO_BUDGET,
    ]

    result = handle(_payload(lines))

    assert result["flagged"] == [RENT_OVER, POWER_UNDER, PAYROLL_SMALL_PCT, MISC_NO_BUDGET]


def test_amount_exactly_at_threshold_is_not_flagged() -> None:
    at_threshold = _line("6100", "Rent", "10000.00", "5000.00")  # +5,000.00, 100%

    assert handle(_payload([at_threshold]))["flagged"] == []


def test_narrative_cites_the_flagged_values_in_house_style() -> None:
    narrative = handle(_payload([RENT_OVER, POWER_UNDER, MISC_NO_BUDGET]))["narrative"]

    assert "Rent is above budget" in narrative
    assert "£66,000.00" in narrative
    assert "24.5%" in narrative
    assert "(£8,000.00)" in narrative
    assert "-88.9%" in narrative
    assert "no percentage" in narrative
    assert "6100" not in narrative
    assert "2026" not in narrative


def test_every_figure_in_the_narrative_is_an_input_value() -> None:
    lines = [RENT_OVER, POWER_UNDER, PAYROLL_SMALL_PCT, MISC_NO_BUDGET]
    allowed = {
        abs(Decimal(line[key]))
        for line in lines
        for key in ("actual", "prior", "budget", "variance_prior", "variance_budget", "variance_budget_pct")
        if line[key] is not None
    }

    result = handle(_payload(lines))

    figures = extract_figures(result["narrative"])
    assert figures
    assert {abs(figure.value) for figure in figures} <= allowed
    assert result["figures"] == [{"raw": figure.raw, "value": str(figure.value)} for figure in figures]


@given(
    amounts=st.lists(
        st.tuples(
            st.decimals(min_value=Decimal("-9999999.99"), max_value=Decimal("9999999.99"), places=2),
            st.decimals(min_value=Decimal("-9999999.99"), max_value=Decimal("9999999.99"), places=2),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_narrative_is_always_grounded(amounts: list[tuple[Decimal, Decimal]]) -> None:
    lines = [
        _line(f"6{index:03d}", f"Account {chr(65 + index)}", f"{actual:.2f}", f"{budget:.2f}")
        for index, (actual, budget) in enumerate(amounts)
    ]

    result = handle(_payload(lines))

    assert isinstance(result["narrative"], str)


def test_nothing_flagged_says_so_without_numbers() -> None:
    result = handle(_payload([SALARIES_UNDER_PCT, TRAVEL_SMALL_AMOUNT]))

    assert result["flagged"] == []
    assert result["narrative"] == variance.NOTHING_FLAGGED_TEXT
    assert extract_figures(result["narrative"]) == []
    assert result["figures"] == []


def test_digits_in_an_account_name_do_not_count_as_invented_figures() -> None:
    unit_rent = _line("6100", "Unit 4 rent", "66000.00", "53000.00")

    result = handle(_payload([unit_rent]))

    assert "Unit 4 rent" in result["narrative"]


def test_drafter_inserting_an_unqueried_number_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    honest_drafter = variance.draft_narrative

    def drafter_with_an_invented_figure(lines: Sequence[VarianceLine], currency_symbol: str = "£") -> str:
        return honest_drafter(lines, currency_symbol) + " Forecast overspend is £12,345.00."

    monkeypatch.setattr(variance, "draft_narrative", drafter_with_an_invented_figure)
    returned: list[dict[str, Any]] = []

    with pytest.raises(UngroundedFigureError) as caught:
        returned.append(handle(_payload([RENT_OVER])))

    assert returned == []
    assert caught.value.figure.raw == "£12,345.00"


def test_template_inserting_an_unqueried_number_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(variance, "LINE_TEMPLATE", variance.LINE_TEMPLATE + " Last year it was £41,000.00.")
    returned: list[dict[str, Any]] = []

    with pytest.raises(UngroundedFigureError) as caught:
        returned.append(handle(_payload([RENT_OVER])))

    assert returned == []
    assert caught.value.figure.value == Decimal("41000.00")


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p.update(period="October"), "period"),
        (lambda p: p.update(threshold_amount=5000.0), "threshold_amount"),
        (lambda p: p.update(threshold_pct="-1"), "threshold_pct"),
        (lambda p: p.pop("grounding_tolerance"), "grounding_tolerance"),
        (lambda p: p.update(lines={"6100": {}}), "lines"),
        (lambda p: p["lines"].append(["6100"]), "lines[2]"),
        (lambda p: p["lines"][1].pop("name"), "lines[1].name"),
        (lambda p: p["lines"][1].update(actual=1000), "lines[1].actual"),
        (lambda p: p["lines"][0].update(variance_budget_pct="twelve"), "lines[0].variance_budget_pct"),
        (lambda p: p["lines"][0].update(variance_budget="1.00"), "lines[0].variance_budget"),
        (lambda p: p["lines"][0].update(variance_prior="1.00"), "lines[0].variance_prior"),
        (lambda p: p["lines"][0].update(variance_budget_pct="30.0"), "lines[0].variance_budget_pct"),
        (lambda p: p["lines"][0].update(variance_budget_pct=None), "lines[0].variance_budget_pct"),
    ],
)
def test_malformed_payload_names_the_field(mutate: Any, field: str) -> None:
    payload = _payload([dict(RENT_OVER), dict(POWER_UNDER)])
    mutate(payload)

    with pytest.raises(SpecialistInputError) as caught:
        handle(payload)

    assert caught.value.field == field
    assert str(caught.value).startswith(f"invalid specialist input: {field}: ")
