"""Parsing: illegal input raises an error that names the record and the field; money stays exact."""

from __future__ import annotations

import copy
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.certificates import CertificateDataError, parse_certificate, parse_contract
from countersign.certificates.model import amount_text, fraction_of, value_of
from countersign.money.formatting import format_money
from tests.certificates.history import CERTIFICATE_2, CONTRACT


def test_the_hand_priced_contract_parses() -> None:
    contract = parse_contract(CONTRACT)
    assert contract.contract_sum_minor == 200_000
    assert contract.owner_package("L02") == "P2"
    assert contract.rate_in_force("L01", parse_certificate(CERTIFICATE_2).date) == ("R1", 1_000)


ContractEdit = Callable[[dict[str, Any]], None]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda c: c.update(form="XYZ"), "form"),
        (lambda c: c.update(currency="pounds"), "currency"),
        (lambda c: c.update(currency="JPY"), "boq[0].rate"),  # no minor unit: "10.00" is not a yen amount
        (lambda c: c.update(currency="KWD"), "boq[0].rate"),  # three places
        (lambda c: c["boq"][0].update(rate="ten"), "boq[0].rate"),
        (lambda c: c["boq"][1].update(quantity="-1.00"), "boq[1].quantity"),
        (lambda c: c["boq"][1].pop("unit"), "boq[1].unit"),
        (lambda c: c["rate_versions"][1].update(effective_from="2025-02-30"), "rate_versions[1].effective_from"),
        (lambda c: c["rate_versions"][1]["rates"].update(L09="1.00"), "rate_versions[1].rates.L09"),
        (lambda c: c["retention"].update(rate="5%"), "retention.rate"),
        (lambda c: c["advance"].update(rate="1.5"), "advance.rate"),
        (lambda c: c["packages"][1]["scope"].update(L01="dup"), "packages[1].scope.L01"),
        (lambda c: c.update(clause_refs=[]), "clause_refs"),
    ],
)
def test_an_illegal_contract_names_the_field(edit: ContractEdit, field: str) -> None:
    data = copy.deepcopy(CONTRACT)
    edit(data)
    with pytest.raises(CertificateDataError) as caught:
        parse_contract(data)
    assert caught.value.field == field
    assert caught.value.record == "contract CT-T" or field == "id"
    assert str(caught.value).startswith(f"{caught.value.record}: {field}: ")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda c: c.update(number=0), "number"),
        (lambda c: c.update(date="25/02/2025"), "date"),
        (lambda c: c.update(period="2025-13"), "period"),
        (lambda c: c["lines"][1].pop("quantity_to_date"), "lines[1].quantity_to_date"),
        (lambda c: c["lines"][0].update(value_to_date=600.0), "lines[0].value_to_date"),
        (lambda c: c["totals"].update(amount_due="445"), "totals.amount_due"),
        (lambda c: c["materials_on_site"][0].update(quantity="20.001"), "materials_on_site[0].quantity"),
        (
            lambda c: c.update(retention_releases=[{"event": "whenever", "amount": "1.00"}]),
            "retention_releases[0].event",
        ),
        (lambda c: c.update(variations={}), "variations"),
    ],
)
def test_an_illegal_certificate_names_the_field(edit: ContractEdit, field: str) -> None:
    data = copy.deepcopy(CERTIFICATE_2)
    edit(data)
    with pytest.raises(CertificateDataError) as caught:
        parse_certificate(data)
    assert caught.value.field == field
    assert caught.value.record == "certificate C2"


def test_amounts_written_to_another_currency_places_are_refused_in_words() -> None:
    data = copy.deepcopy(CONTRACT)
    data["currency"] = "JPY"
    with pytest.raises(CertificateDataError, match=r"with 0 places like '1250', got '10\.00'"):
        parse_contract(data)
    data["currency"] = "EUR"
    assert parse_contract(data).currency == "EUR"


def test_a_certificate_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(CertificateDataError, match="<root>"):
        parse_certificate(["not", "a", "mapping"])


@given(st.integers(-(10**9), 10**9), st.integers(0, 10**7))
def test_value_of_rounds_half_away_from_zero_exactly(quantity_centi: int, rate_minor: int) -> None:
    exact = (Decimal(quantity_centi) / 100 * Decimal(rate_minor)).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    assert value_of(quantity_centi, rate_minor) == int(exact)
    assert value_of(-quantity_centi, rate_minor) == -value_of(quantity_centi, rate_minor)


@given(st.integers(0, 10**12), st.decimals(min_value=0, max_value=1, places=4))
def test_fraction_of_never_uses_floats(amount_minor: int, fraction: Decimal) -> None:
    expected = int((Decimal(amount_minor) * fraction).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    assert fraction_of(amount_minor, fraction) == expected


@pytest.mark.parametrize("amount", ["0.00", "82213.52", "-82213.5", "1640038.33", "0.005", "-0.01"])
def test_the_domain_writes_amounts_as_money_formatting_does_in_en_gb(amount: str) -> None:
    assert amount_text(Decimal(amount), "GBP") == format_money(Decimal(amount), "GBP")
    assert amount_text(Decimal(amount), "CHF") == format_money(Decimal(amount), "CHF", locale="en_GB")
