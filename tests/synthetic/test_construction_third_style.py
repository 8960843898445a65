"""The third generator style writes the documented format, deterministically, the way another firm writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.certificates import parse_certificate, parse_contract
from countersign.synthetic.construction_profile import load_construction_profile
from countersign.synthetic.construction_third_style import ThirdStyleManifest, generate_third_style

PROFILE = PROJECT_ROOT / "config" / "profiles" / "construction-third-style-small.yaml"
SEED = 5


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> ThirdStyleManifest:
    return generate_third_style(load_construction_profile(PROFILE), SEED, tmp_path_factory.mktemp("third"))


def _records(manifest: ThirdStyleManifest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    contracts = json.loads((manifest.out_dir / "contracts.json").read_text())["contracts"]
    lines = (manifest.out_dir / "certificates.jsonl").read_text().splitlines()
    return contracts, [json.loads(line) for line in lines]


def test_the_same_seed_writes_the_same_bytes_and_another_seed_does_not(
    generated: ThirdStyleManifest, tmp_path: Path
) -> None:
    profile = load_construction_profile(PROFILE)
    assert generate_third_style(profile, SEED, tmp_path / "again").files == generated.files
    assert generate_third_style(profile, SEED + 1, tmp_path / "other").files != generated.files


def test_every_record_parses_and_no_contract_declares_its_conventions(generated: ThirdStyleManifest) -> None:
    contracts, certificates = _records(generated)
    assert all("conventions" not in contract for contract in contracts)
    parsed = [parse_contract(contract) for contract in contracts]
    assert {c.form for c in parsed} == {"CSB", "CSE"}
    for record in certificates:
        parse_certificate(record)
    assert next(iter(certificates[0])) == "totals"  # this firm writes its totals first


def test_it_writes_the_conventions_real_documents_show(generated: ThirdStyleManifest) -> None:
    _, certificates = _records(generated)
    invoices = {str(record["invoice_number"]) for record in certificates}
    assert "INV-001" in invoices and any("/" in number for number in invoices)
    descriptions = " ".join(str(record["description"]) for record in certificates)
    assert "price for work done to date" in descriptions and "gross valuation" in descriptions
    whole = [r for r in certificates if all(line["value_to_date"].endswith(".00") for line in r["lines"])]
    assert len(whole) > len(certificates) // 5
    assert any("limit" in v for r in certificates for v in r["variations"])  # a quotation's ceiling
    events = {release["event"] for record in certificates for release in record["retention_releases"]}
    assert events == {"practical_completion", "defects_end"}


def test_its_files_validate_against_the_published_schemas(generated: ThirdStyleManifest) -> None:
    def validator(name: str) -> Draft202012Validator:
        schema = json.loads((PROJECT_ROOT / "docs" / "schemas" / name).read_text())
        return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    contracts = json.loads((generated.out_dir / "contracts.json").read_text())
    assert list(validator("construction-contracts.schema.json").iter_errors(contracts)) == []
    certificate = validator("construction-certificate.schema.json")
    _, records = _records(generated)
    for record in records:
        assert list(certificate.iter_errors(record)) == [], record["id"]
