"""A contract that rounds value to date once (cumulative quantity x rate) is not held for a penny.

L01 is priced at 10.01 a unit and 0.33 units are done each month, so each month's own product is 3.3033. Rounded per
period that is 3.30 every month; rounded once to date it is 3.30, 6.61, 9.91, 13.21, so month 2 is valued at 3.31.
The default (per-period) contract still holds that penny; a cumulative contract still holds a superseded rate and a
value off by a penny from both roundings.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from countersign.certificates import assess_contract, parse_certificate, parse_contract
from countersign.certificates import invariants as inv
from countersign.certificates.assessment import CertificateAssessment
from countersign.certificates.correction import reconstructed_amount_due
from tests.certificates.history import minor, money
from tests.certificates.statements import Period, contract, honest_history, restate

CUMULATIVE: dict[str, Any] = {"conventions": {"valuation_rounding": "cumulative"}}


def penny_contract(*, revised: bool = False, **extra: Any) -> dict[str, Any]:
    versions: list[dict[str, Any]] = [{"version": "R1", "effective_from": "2025-01-01", "rates": {"L01": "10.01"}}]
    if revised:
        versions.append({"version": "R2", "effective_from": "2025-03-01", "rates": {"L01": "11.01"}})
    return contract(
        boq=[
            {"id": "L01", "package": "P1", "description": "Fill", "unit": "m3", "quantity": "100.00", "rate": "10.01"}
        ],
        rate_versions=versions,
        packages=[{"id": "P1", "name": "Earthworks", "scope": {"L01": "hash-l01"}}],
        **extra,
    )


PERIODS = [Period({"L01": f"{0.33 * month:.2f}"}) for month in range(1, 5)]


def assess(contract_data: dict[str, Any], certificates: list[dict[str, Any]]) -> tuple[CertificateAssessment, ...]:
    return assess_contract(parse_contract(contract_data), [parse_certificate(c) for c in certificates])


def at_rate(assessment: CertificateAssessment) -> inv.InvariantResult:
    return next(r for r in assessment.results if r.name == inv.PERIOD_WORK_AT_RATE_IN_FORCE)


def test_values_rounded_once_to_date_differ_by_a_penny_from_each_period_rounded() -> None:
    cumulative = honest_history(penny_contract(**CUMULATIVE), PERIODS)
    per_period = honest_history(penny_contract(), PERIODS)
    assert [line["value_to_date"] for c in cumulative for line in c["lines"]] == ["3.30", "6.61", "9.91", "13.21"]
    assert [line["value_to_date"] for c in per_period for line in c["lines"]] == ["3.30", "6.60", "9.90", "13.20"]


def test_a_cumulative_contract_is_certified_throughout_with_nothing_to_correct() -> None:
    data = penny_contract(**CUMULATIVE)
    history = honest_history(data, PERIODS)
    assessments = assess(data, history)
    assert [a.certified for a in assessments] == [True] * 4, [v.explanation for a in assessments for v in a.violations]
    parsed = parse_contract(data)
    for assessment in assessments:
        correction = reconstructed_amount_due(parsed, assessment.position, assessment.certificate)
        assert correction.items == () and correction.reconstructed_minor == correction.claimed_minor


def test_the_default_per_period_contract_still_holds_the_penny() -> None:
    history = honest_history(penny_contract(**CUMULATIVE), PERIODS)
    assessments = assess(penny_contract(), history)
    found = at_rate(assessments[1])
    assert found.violated
    assert found.amounts["difference"] == Decimal("0.01")
    assert "values 0.33 this period at 3.31, not 3.30 at the rate 10.01 of version R1" in found.explanation


def test_the_default_per_period_history_is_certified_throughout() -> None:
    data = penny_contract()
    assert all(a.certified for a in assess(data, honest_history(data, PERIODS)))


def test_a_cumulative_contract_still_catches_a_superseded_rate() -> None:
    data = penny_contract(revised=True, **CUMULATIVE)
    history = honest_history(data, PERIODS)
    assert all(a.certified for a in assess(data, history))
    line = history[2]["lines"][0]  # March: 0.33 at R2's 11.01 to date; value it at R1's 10.01 instead
    previous = minor(line["previous_value"])
    line["value_to_date"] = money(previous + 330)
    restate(history[2])
    found = at_rate(assess(data, history)[2])
    assert found.violated
    assert "matches the superseded rate 10.01 of version R1" in found.explanation


def test_a_cumulative_contract_still_catches_a_value_a_penny_off_both_roundings() -> None:
    data = penny_contract(**CUMULATIVE)
    history = honest_history(data, PERIODS)
    history[1]["lines"][0]["value_to_date"] = "6.62"  # month 2: 3.32, where 3.31 (to date) or 3.30 (per period)
    restate(history[1])
    found = at_rate(assess(data, history)[1])
    assert found.violated
    assert found.amounts["difference"] == Decimal("0.01")
