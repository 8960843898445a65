"""Any honest history, priced independently of the checks, is certified throughout with nothing to correct; leaving
a certified variation off a later statement is always caught. Hypothesis draws the months, quantities, variations,
materials and the contract's rounding and consumption conventions."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.certificates import assess_contract, parse_certificate, parse_contract
from countersign.certificates import invariants as inv
from countersign.certificates.correction import reconstructed_amount_due
from tests.certificates.history import money
from tests.certificates.statements import Period, contract, honest_history, materials, restate, variation

BILL_CENTI = {"L01": 100_000, "L02": 50_000}


@st.composite
def honest_months(draw: st.DrawFn) -> tuple[dict[str, Any], list[Period]]:
    """Materials stay on site from month to month: under materials-first consumption the work since draws on them
    oldest first; under other-stock-first they are only cut back when work and materials would pass the bill."""
    conventions = {
        "valuation_rounding": draw(st.sampled_from(["per_period", "cumulative"])),
        "materials_consumption": draw(st.sampled_from(["materials_first", "other_stock_first"])),
    }
    materials_first = conventions["materials_consumption"] == "materials_first"
    months = draw(st.integers(2, 7))
    done = dict.fromkeys(BILL_CENTI, 0)
    listed: list[dict[str, Any]] = []
    on_site: list[list[Any]] = []  # [id, line, quantity, amount], oldest first
    periods = []
    for month in range(1, months + 1):
        for line_id, bill in BILL_CENTI.items():
            before = done[line_id]
            done[line_id] = min(bill, before + draw(st.integers(0, bill // 3)))
            used = done[line_id] - before if materials_first else 0
            stocked = sum(item[2] for item in on_site if item[1] == line_id)
            used = max(used, done[line_id] + stocked - bill)
            for item in (item for item in on_site if item[1] == line_id):
                taken = min(item[2], used)
                item[3] = item[3] * (item[2] - taken) // item[2]
                item[2] -= taken
                used -= taken
        on_site = [item for item in on_site if item[2] > 0]
        if draw(st.booleans()):
            amount = draw(st.integers(-2_000_000, 2_000_000))
            listed.append(variation(f"V{month}", money(amount), instruction=f"CAI-{month:03d}"))
        line_id = draw(st.sampled_from(sorted(BILL_CENTI)))
        room = BILL_CENTI[line_id] - done[line_id] - sum(item[2] for item in on_site if item[1] == line_id)
        if room > 0 and draw(st.booleans()):
            on_site.append([f"M{month}", line_id, draw(st.integers(1, room)), draw(st.integers(0, 5_000_000))])
        periods.append(
            Period(
                {k: money(v) for k, v in done.items()},
                variations=list(listed),
                materials=[materials(i, line, money(q), money(a)) for i, line, q, a in on_site],
            )
        )
    return contract(conventions=conventions), periods


@given(honest_months())
@settings(max_examples=150, deadline=None)
def test_an_honest_history_is_certified_throughout_with_nothing_to_correct(
    drawn: tuple[dict[str, Any], list[Period]],
) -> None:
    data, periods = drawn
    parsed = parse_contract(data)
    assessments = assess_contract(parsed, [parse_certificate(c) for c in honest_history(data, periods)])
    for assessment in assessments:
        assert assessment.certified, [v.explanation for v in assessment.violations]
        correction = reconstructed_amount_due(parsed, assessment.position, assessment.certificate)
        assert correction.items == (), [item.description for item in correction.items]


@given(honest_months(), st.data())
@settings(max_examples=150, deadline=None)
def test_a_certified_variation_left_off_a_later_statement_is_always_caught(
    drawn: tuple[dict[str, Any], list[Period]], data: st.DataObject
) -> None:
    contract_data, periods = drawn
    history = honest_history(contract_data, periods)
    later = [k for k in range(1, len(history)) if history[k - 1]["variations"]]
    if not later:
        return
    target = data.draw(st.sampled_from(later))
    dropped = data.draw(st.sampled_from(history[target - 1]["variations"]))
    history[target]["variations"] = [v for v in history[target]["variations"] if v["id"] != dropped["id"]]
    restate(history[target])
    assessments = assess_contract(parse_contract(contract_data), [parse_certificate(c) for c in history])
    found = next(r for r in assessments[target].results if r.name == inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD)
    assert found.violated
    assert dropped["id"] in found.lines
