"""Loading a construction set: the certificate domain values any currency's minor units, but the payment workflow's
evidence and books still write two places, so a contract in yen or dinars is refused when a set is loaded, in words
that name the contract, the field and the places."""

from __future__ import annotations

import json

import pytest

from countersign.engine.construction import ConstructionDataError, read_certificates, read_contracts
from tests.certificates.history import CONTRACT, history
from tests.certificates.test_currency_minor_units import _restate_contract


def _contracts(*contracts: object) -> bytes:
    return json.dumps({"contracts": list(contracts)}).encode("utf-8")


@pytest.mark.parametrize(("currency", "places"), [("JPY", 0), ("BHD", 3)])
def test_a_contract_in_other_minor_units_is_refused_at_the_door_in_words(currency: str, places: int) -> None:
    with pytest.raises(ConstructionDataError) as caught:
        read_contracts(_contracts(_restate_contract(CONTRACT, currency)))
    assert caught.value.source == "contracts.json contracts[0]"
    assert caught.value.field == "currency"
    assert caught.value.reason.startswith(f"contract CT-T: {currency} is written to {places} decimal places")


def test_a_two_place_set_loads_its_certificates_in_the_contract_currency() -> None:
    contracts = {contract.id: contract for _, contract in read_contracts(_contracts(CONTRACT))}
    lines = "\n".join(json.dumps(certificate) for certificate in history()).encode("utf-8")
    loaded = read_certificates(lines, contracts)
    assert [certificate.totals.amount_due_minor for _, certificate in loaded] == [40_000, 44_500, 53_500, 56_000]
