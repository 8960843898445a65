"""The published JSON Schemas of the construction format (docs/schemas/) describe what the loader reads: the
generator's contracts and certificates and the pay applications read from files validate; a bad record is refused by
the schema as by the domain's parser."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from countersign.applications import read_application_files
from countersign.certificates import CertificateDataError, Contract, parse_certificate, parse_contract
from countersign.synthetic import generate_construction, load_construction_profile
from tests.applications.conftest import APPLICATIONS

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"


def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


CONTRACTS = _validator("construction-contracts.schema.json")
CERTIFICATE = _validator("construction-certificate.schema.json")


@pytest.mark.parametrize("profile", ["construction-demo", "construction-second-style-small"])
def test_the_generators_files_validate(tmp_path: Path, profile: str) -> None:
    generate_construction(load_construction_profile(ROOT / "config" / "profiles" / f"{profile}.yaml"), 7, tmp_path)
    contracts = json.loads((tmp_path / "contracts.json").read_text())
    assert list(CONTRACTS.iter_errors(contracts)) == []
    records = [json.loads(line) for line in (tmp_path / "certificates.jsonl").read_text().splitlines() if line]
    assert records
    for record in records:
        assert list(CERTIFICATE.iter_errors(record)) == [], record["id"]


def test_pay_applications_read_from_files_validate_with_their_sources(contracts: dict[str, Contract]) -> None:
    assert list(CONTRACTS.iter_errors(json.loads((APPLICATIONS / "contracts.json").read_text()))) == []
    files = [APPLICATIONS / name for name in ("app.csv", "app.xlsx", "valuation.pdf")]
    for read in read_application_files(files, contracts):
        assert read.record["sources"]
        assert list(CERTIFICATE.iter_errors(read.record)) == [], read.file


def _contracts_document() -> dict[str, Any]:
    return json.loads((APPLICATIONS / "contracts.json").read_text())


def _certificate(contracts: dict[str, Contract]) -> dict[str, Any]:
    (read,) = read_application_files([APPLICATIONS / "app.csv"], contracts)
    return copy.deepcopy(read.record)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = record
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value

    return change


_DELETE = object()
BAD_CERTIFICATES = {
    "an amount with one decimal place": _set("totals.amount_due", "7030.5"),
    "an amount as a JSON number": _set("totals.gross", 7400.0),
    "a missing total": _set("totals.amount_due", _DELETE),
    "a certificate number of 0": _set("number", 0),
    "a date that is not a date": _set("date", "28/04/2025"),
    "a month 13": _set("period", "2025-13"),
    "an unknown retention release event": _set("retention_releases", [{"event": "handover", "amount": "1.00"}]),
    "an empty vendor": _set("vendor", " "),
    "a quantity with three places": _set("lines.0.quantity_to_date", "400.000"),
    "a figure source that is not text": _set("sources", {"totals.gross": 12}),
}


@pytest.mark.parametrize("mutation", sorted(BAD_CERTIFICATES))
def test_a_bad_certificate_is_refused_by_the_schema_and_by_the_parser(
    contracts: dict[str, Contract], mutation: str
) -> None:
    record = _certificate(contracts)
    assert list(CERTIFICATE.iter_errors(record)) == []  # the control: unbroken, it validates
    BAD_CERTIFICATES[mutation](record)
    assert list(CERTIFICATE.iter_errors(record)), mutation
    with pytest.raises(CertificateDataError):
        parse_certificate(record)


BAD_CONTRACTS = {
    "an unknown form": _set("contracts.0.form", "NEC4"),
    "a lower-case currency": _set("contracts.0.currency", "gbp"),
    "a retention rate above 1": _set("contracts.0.retention.rate", "1.5"),
    "an unknown convention": _set("contracts.0.conventions", {"valuation_rounding": "per_line"}),
    "an unknown payment term": _set("contracts.0.payment_terms", {"due_days": 7}),
    "payment days beyond a year": _set("contracts.0.payment_terms", {"final_date_days": 400}),
    "a missing contractor": _set("contracts.0.contractor", _DELETE),
}


@pytest.mark.parametrize("mutation", sorted(BAD_CONTRACTS))
def test_a_bad_contract_is_refused_by_the_schema_and_by_the_parser(mutation: str) -> None:
    document = _contracts_document()
    assert list(CONTRACTS.iter_errors(document)) == []
    BAD_CONTRACTS[mutation](document)
    assert list(CONTRACTS.iter_errors(document)), mutation
    with pytest.raises(CertificateDataError):
        parse_contract(document["contracts"][0])


def test_the_new_contract_fields_are_optional_and_validate_when_given() -> None:
    document = _contracts_document()
    assert "conventions" not in document["contracts"][0] and "payment_terms" not in document["contracts"][0]
    document["contracts"][0]["conventions"] = {"valuation_rounding": "cumulative", "application_numbering": "contract"}
    document["contracts"][0]["payment_terms"] = {"due_date_days": 14, "duplicate_window_days": None}
    assert list(CONTRACTS.iter_errors(document)) == []
    parse_contract(document["contracts"][0])
