"""A contract's money is read, checked, rounded and written in its currency's ISO 4217 minor units
(`countersign.money.units.minor_units`): JPY none, BHD and KWD three, GBP two. Quantities stay in hundredths.

The hand-priced GBP history (`tests.certificates.history`) is restated in another currency with the same minor-unit
integers: `"446.00"` GBP (44,600 pence) is `"44600"` JPY and `"44.600"` BHD. The arithmetic is then the same, so what
passes in pounds passes in yen and dinars, and what is held is held with the same minor units, written to the
currency's own places.
"""

from __future__ import annotations

import copy
import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from countersign.certificates import (
    INVARIANTS,
    CertificateDataError,
    assess_contract,
    parse_certificate,
    parse_contract,
)
from countersign.certificates import invariants as inv
from countersign.certificates.assessment import CertificateAssessment
from countersign.certificates.conventions import read_valuation_rounding
from countersign.certificates.duplicates import DuplicateHold, submission_of
from countersign.certificates.model import TOTAL_KEYS, Contract, ValuationRounding, amount_text
from countersign.certificates.mutations import MUTATIONS
from countersign.certificates.reconstruction import LinePosition, accepted_period_values, opening_position
from countersign.money.formatting import format_money
from countersign.money.units import minor_units
from tests.certificates.history import CONTRACT, history
from tests.certificates.test_invariants import CRAFTED

OTHER_PLACES = ("JPY", "BHD", "KWD")


def _written(text: str, places: int, factor: int) -> str:
    """A GBP figure (two places) as `factor` times its minor units, written to `places` decimals."""
    minor = int(Decimal(text).scaleb(2)) * factor
    return f"{Decimal(minor).scaleb(-places):.{places}f}"


def _restate_contract(data: dict[str, Any], currency: str, factor: int = 1) -> dict[str, Any]:
    places = minor_units(currency)
    out = copy.deepcopy(data)
    out["currency"] = currency
    for line in out["boq"]:
        line["rate"] = _written(line["rate"], places, factor)
    for version in out["rate_versions"]:
        version["rates"] = {key: _written(value, places, factor) for key, value in version["rates"].items()}
    out["retention"]["cap"] = _written(out["retention"]["cap"], places, factor)
    out["advance"]["amount"] = _written(out["advance"]["amount"], places, factor)
    return out


def _restate_certificate(data: dict[str, Any], currency: str, factor: int = 1) -> dict[str, Any]:
    places = minor_units(currency)
    out = copy.deepcopy(data)

    def money_of(record: dict[str, Any], *keys: str) -> None:
        for key in keys:
            if record.get(key) is not None:
                record[key] = _written(record[key], places, factor)

    for line in out["lines"]:
        money_of(line, "value_to_date", "previous_value")
    for package in out["packages"]:
        money_of(package, "value_to_date")
    for variation in out.get("variations", []):
        money_of(variation, "amount", "limit")
    for item in out.get("materials_on_site", []):
        money_of(item, "amount")
    for release in out.get("retention_releases", []):
        money_of(release, "amount")
    money_of(out["totals"], *TOTAL_KEYS)
    return out


def _assess(currency: str, certificates: list[dict[str, Any]]) -> tuple[CertificateAssessment, ...]:
    contract = parse_contract(_restate_contract(CONTRACT, currency))
    parsed = [parse_certificate(_restate_certificate(c, currency), currency=currency) for c in certificates]
    return assess_contract(contract, parsed)


def _result(assessment: CertificateAssessment, name: str) -> inv.InvariantResult:
    return next(r for r in assessment.results if r.name == name)


# --- parsing ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("currency", OTHER_PLACES)
def test_a_contract_in_other_minor_units_is_read_in_them(currency: str) -> None:
    contract = parse_contract(_restate_contract(CONTRACT, currency))
    gbp = parse_contract(CONTRACT)
    assert contract.currency == currency
    assert [line.rate_minor for line in contract.boq] == [line.rate_minor for line in gbp.boq]
    assert [line.quantity_centi for line in contract.boq] == [line.quantity_centi for line in gbp.boq]  # hundredths
    assert contract.retention.cap_minor == gbp.retention.cap_minor == 8_000
    assert contract.advance.amount_minor == gbp.advance.amount_minor == 20_000


def test_yen_are_whole_and_dinars_have_three_places() -> None:
    data = _restate_contract(CONTRACT, "JPY")
    assert data["advance"]["amount"] == "20000"
    assert parse_contract(data).advance.amount_minor == 20_000
    data = _restate_contract(CONTRACT, "BHD")
    assert data["advance"]["amount"] == "20.000"
    assert parse_contract(data).advance.amount_minor == 20_000


@pytest.mark.parametrize(
    ("currency", "written", "reason"),
    [
        ("JPY", "200.00", "expected a decimal amount with 0 places like '1250', got '200.00'"),
        ("BHD", "200.00", "expected a decimal amount with 3 places like '12.500', got '200.00'"),
        ("KWD", "200", "expected a decimal amount with 3 places like '12.500', got '200'"),
        ("GBP", "200.000", "expected a decimal amount with 2 places like '12.50', got '200.000'"),
    ],
)
def test_an_amount_not_written_to_its_currency_places_is_refused_naming_the_field(
    currency: str, written: str, reason: str
) -> None:
    data = _restate_contract(CONTRACT, currency)
    data["advance"]["amount"] = written
    with pytest.raises(CertificateDataError) as caught:
        parse_contract(data)
    assert (caught.value.field, caught.value.reason) == ("advance.amount", reason)


def test_a_certificate_is_read_in_the_currency_it_is_given() -> None:
    jpy = _restate_certificate(history()[1], "JPY")
    assert parse_certificate(jpy, currency="JPY").totals.amount_due_minor == 44_500
    with pytest.raises(CertificateDataError, match="2 places"):
        parse_certificate(jpy)  # without a currency: two places, and "44500" is not written to them
    with pytest.raises(CertificateDataError, match="3 places"):
        parse_certificate(jpy, currency="KWD")


# --- the invariants -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("currency", OTHER_PLACES)
def test_the_clean_history_passes_every_invariant_in_other_minor_units(currency: str) -> None:
    assessments = _assess(currency, history())
    for assessment in assessments:
        assert [r.explanation for r in assessment.violations] == []
        assert assessment.certified
    assert assessments[-1].position.net_to_date_minor == 138_000


@pytest.mark.parametrize("currency", OTHER_PLACES)
@pytest.mark.parametrize("name", INVARIANTS)
def test_each_crafted_violation_is_held_in_other_minor_units(currency: str, name: str) -> None:
    edit, amounts = CRAFTED[name]
    h = history()
    target = edit(h)
    found = _result(_assess(currency, h)[target], name)
    assert found.verdict == "violation", found.explanation
    for key, pounds in amounts.items():  # the same minor units, as an amount in the currency's places
        assert found.amounts[key] == pounds.scaleb(2 - minor_units(currency))


@pytest.mark.parametrize(
    ("currency", "stated", "figure", "money"),
    [
        ("JPY", "1250000", "1,250,000", "JPY 1,250,000"),
        ("BHD", "1250.500", "1,250.500", "BHD 1,250.500"),
        ("KWD", "0.125", "0.125", "KWD 0.125"),
        ("GBP", "1250.50", "1,250.50", "GBP 1,250.50"),
    ],
)
def test_a_planted_arithmetic_error_names_the_amount_in_its_currency_places(
    currency: str, stated: str, figure: str, money: str
) -> None:
    certificates = [_restate_certificate(c, currency) for c in history()]
    certificates[1]["totals"]["amount_due"] = stated
    contract = parse_contract(_restate_contract(CONTRACT, currency))
    held = assess_contract(contract, [parse_certificate(c, currency=currency) for c in certificates])[1]
    found = _result(held, inv.STATEMENT_FOOTS)
    assert found.verdict == "violation"
    assert f"amount due is stated as {figure} but its parts add to" in found.explanation
    assert format_money(found.amounts["stated"], currency) == money
    assert amount_text(found.amounts["stated"], currency) == money  # the pure domain's writer agrees


@pytest.mark.parametrize("currency", ("GBP", *OTHER_PLACES))
def test_the_eval_mutations_plant_one_unit_of_the_currency(currency: str) -> None:
    """The eval's seeded errors are one whole unit (a pound, a yen, a dinar), and each is still caught."""
    contract = parse_contract(_restate_contract(CONTRACT, currency))
    certificates = [parse_certificate(_restate_certificate(c, currency), currency=currency) for c in history()]
    clean = assess_contract(contract, certificates)
    before = certificates[1].totals.amount_due_minor
    footing = MUTATIONS[inv.STATEMENT_FOOTS]
    broken = footing(contract, clean[1].position, certificates[1])
    assert broken is not None
    assert broken.totals.amount_due_minor - before == 10 ** minor_units(currency)


# --- rounding to whole units, and reading it from the documents ---------------------------------------------------


def _whole_units(contract: Contract) -> Contract:
    conventions = dataclasses.replace(contract.conventions, valuation_rounding=ValuationRounding.WHOLE_UNITS)
    return dataclasses.replace(contract, conventions=conventions)


@pytest.mark.parametrize(
    ("currency", "accepted"),
    [
        # 0.37 m3 at a rate of 10,005 minor units: 3,701.85, so 3,702 to the minor unit; to the whole unit
        ("GBP", {3_702, 3_700}),  # 37.02 -> 37.00
        ("JPY", {3_702}),  # a yen is its own whole unit: rounding to it changes nothing
        ("BHD", {3_702, 4_000}),  # 3.702 -> 4.000 (a dinar is 1,000 fils)
        ("KWD", {3_702, 4_000}),
    ],
)
def test_whole_unit_rounding_rounds_to_the_currency_unit(currency: str, accepted: set[int]) -> None:
    contract = _whole_units(parse_contract(_restate_contract(CONTRACT, currency)))
    assert accepted_period_values(contract, LinePosition(0, 0), 37, 1_0005) == accepted


@pytest.mark.parametrize(
    ("currency", "stated", "expected", "within"),
    [
        ("GBP", 400, 370, True),
        ("GBP", 300, 370, False),  # 0.70 off: more than half a pound
        ("JPY", 371, 370, False),  # a yen is the whole unit: nothing to round
        ("BHD", 0, 370, True),
        ("BHD", 1_000, 370, False),  # 0.630 off: more than half a dinar
        ("BHD", 400, 370, False),  # 400 fils is not a whole dinar
    ],
)
def test_a_figure_within_rounding_is_a_whole_unit_within_half_of_one(
    currency: str, stated: int, expected: int, within: bool
) -> None:
    contract = _whole_units(parse_contract(_restate_contract(CONTRACT, currency)))
    assert inv.within_rounding(contract, stated, expected) is within


@pytest.mark.parametrize(
    ("currency", "factor", "reading"),
    [
        ("GBP", 1, ValuationRounding.WHOLE_UNITS),  # 300.00, 200.00, 25.00, 75.00: whole pounds
        ("BHD", 1, ValuationRounding.PER_PERIOD),  # the same minor units are 30.000, 20.000, 2.500, 7.500 dinars
        ("BHD", 10, ValuationRounding.WHOLE_UNITS),  # 300.000, 200.000, 25.000, 75.000: whole dinars
        ("JPY", 1, ValuationRounding.PER_PERIOD),  # every yen figure is whole, so whole figures tell nothing
    ],
)
def test_whole_unit_valuation_is_read_in_the_currency_unit(
    currency: str, factor: int, reading: ValuationRounding
) -> None:
    contract = parse_contract(_restate_contract(CONTRACT, currency, factor))
    certificate = parse_certificate(_restate_certificate(history()[0], currency, factor), currency=currency)
    assert read_valuation_rounding(contract, opening_position(contract), certificate) == (reading, None)


def test_a_single_whole_figure_asks_in_the_currency_words() -> None:
    data = _restate_contract(CONTRACT, "BHD", 10)
    contract = parse_contract(data)
    certificate = parse_certificate(_restate_certificate(history()[0], "BHD", 10), currency="BHD")
    one = dataclasses.replace(
        certificate,
        lines=certificate.lines[:1],
        totals=dataclasses.replace(certificate.totals, retention_deducted_minor=0, advance_repaid_minor=0),
    )
    rounding, question = read_valuation_rounding(contract, opening_position(contract), one)
    assert rounding is ValuationRounding.PER_PERIOD
    assert question is not None
    assert "in whole units of BHD" in question and "checked to the minor unit of BHD" in question


# --- duplicates -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("currency", "overlap"), [("GBP", "445.00"), ("JPY", "44500"), ("BHD", "44.500")])
def test_a_duplicate_hold_writes_its_overlap_in_the_contract_currency(currency: str, overlap: str) -> None:
    contract = parse_contract(_restate_contract(CONTRACT, currency))
    certificate = parse_certificate(_restate_certificate(history()[1], currency), currency=currency)
    submission = submission_of(certificate, contract)
    assert submission.places == minor_units(currency)
    hold = DuplicateHold("C2b", "C2", "L01", 44_500, features=None, places=submission.places)  # type: ignore[arg-type]
    assert str(hold.overlap) == overlap
