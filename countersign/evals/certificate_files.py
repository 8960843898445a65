"""Read a construction data directory (contracts.json, certificates.jsonl, ground_truth.json) into the domain."""

from __future__ import annotations

import json
from pathlib import Path

from countersign.certificates import Certificate, Contract, parse_certificate, parse_contract
from countersign.evals.certificates import GroundTruth, parse_ground_truth

CONTRACTS_FILE = "contracts.json"
CERTIFICATES_FILE = "certificates.jsonl"
GROUND_TRUTH_FILE = "ground_truth.json"


def read_contracts(data_dir: Path) -> dict[str, Contract]:
    document = json.loads((data_dir / CONTRACTS_FILE).read_text(encoding="utf-8"))
    contracts = [parse_contract(item) for item in document["contracts"]]
    return {contract.id: contract for contract in contracts}


def read_certificates(data_dir: Path) -> list[Certificate]:
    """Every certificate of the directory, its money read in its contract's currency."""
    currencies = {contract.id: contract.currency for contract in read_contracts(data_dir).values()}
    with (data_dir / CERTIFICATES_FILE).open(encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return [parse_certificate(record, currency=currencies.get(record.get("contract"))) for record in records]


def read_ground_truth(data_dir: Path) -> GroundTruth:
    return parse_ground_truth(json.loads((data_dir / GROUND_TRUTH_FILE).read_text(encoding="utf-8")))
