"""What `payments load` and `payments check` read from PATH (countersign.services.construction_input): the JSON
directory byte for
byte, pay applications beside a certificates.jsonl, one file with its contracts beside it; a certificate listed twice,
a missing path and a directory with nothing to read are refused naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from countersign.applications import ApplicationError
from countersign.engine.construction import ConstructionDataError
from countersign.services.construction_input import parse_construction_input, read_construction_input

APPLICATIONS = Path(__file__).resolve().parents[1] / "data" / "applications"


def _month(tmp_path: Path, *names: str) -> Path:
    out = tmp_path / "month"
    out.mkdir()
    for name in ("contracts.json", *names):
        shutil.copy(APPLICATIONS / name, out / name)
    return out


def _jsonl_of(name: str) -> bytes:
    """The certificate of one test file as a certificates.jsonl line (without its sources)."""
    read = read_construction_input(APPLICATIONS / name)
    record = json.loads(read.certificates_raw)
    del record["sources"]
    return (json.dumps(record) + "\n").encode()


def test_a_json_directory_is_read_byte_for_byte(tmp_path: Path) -> None:
    month = _month(tmp_path)
    (month / "certificates.jsonl").write_bytes(_jsonl_of("app.csv"))
    (month / "ground_truth.json").write_text("{}")  # the generator's answer key is never read
    read = read_construction_input(month)
    assert read.contracts_raw == (month / "contracts.json").read_bytes()
    assert read.certificates_raw == (month / "certificates.jsonl").read_bytes()
    assert read.files == ("contracts.json", "certificates.jsonl") and read.source == "month"


def test_pay_applications_beside_a_certificates_jsonl_are_read_together(tmp_path: Path) -> None:
    month = _month(tmp_path, "app.xlsx", "valuation.pdf")
    (month / "certificates.jsonl").write_bytes(_jsonl_of("app.csv"))
    seen: list[str] = []
    read = read_construction_input(month, on_file=seen.append)
    assert read.files == ("contracts.json", "certificates.jsonl", "app.xlsx", "valuation.pdf")
    assert seen == ["certificates.jsonl", "app.xlsx", "valuation.pdf"]
    parsed = parse_construction_input(read)
    assert [c.id for c in parsed.certificates] == ["IPC-CT100-001", "IPC-CT100-002", "IPC-CT100-003"]
    assert [bool(c.sources) for c in parsed.certificates] == [False, True, True]


def test_a_certificate_in_the_jsonl_and_in_a_spreadsheet_is_refused_naming_the_row(tmp_path: Path) -> None:
    month = _month(tmp_path, "app.csv")
    (month / "certificates.jsonl").write_bytes(_jsonl_of("app.csv"))
    with pytest.raises(ApplicationError) as refused:
        read_construction_input(month)
    assert str(refused.value) == "app.csv, row 3: Certificate: certificate IPC-CT100-001 is also in certificates.jsonl"


def test_a_certificates_jsonl_file_reads_with_the_contracts_beside_it(tmp_path: Path) -> None:
    month = _month(tmp_path)
    (month / "certificates.jsonl").write_bytes(_jsonl_of("app.csv"))
    read = read_construction_input(month / "certificates.jsonl")
    assert read.files == ("contracts.json", "certificates.jsonl")


def test_nothing_to_read_is_refused_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConstructionDataError) as missing:
        read_construction_input(tmp_path / "nowhere")
    assert str(missing.value) == "nowhere: (path): does not exist"
    month = _month(tmp_path)
    with pytest.raises(ConstructionDataError) as empty:
        read_construction_input(month)
    assert str(empty.value) == (
        "month: (directory): holds no certificates.jsonl and no .csv, .xlsx or .pdf pay application"
    )


def test_a_bad_contracts_file_given_by_name_is_named(tmp_path: Path) -> None:
    document = json.loads((APPLICATIONS / "contracts.json").read_text())
    document["contracts"][0]["currency"] = "pounds"
    (tmp_path / "ct100-contracts.json").write_text(json.dumps(document))
    with pytest.raises(ConstructionDataError) as refused:
        read_construction_input(APPLICATIONS / "app.csv", contracts_file=tmp_path / "ct100-contracts.json")
    assert str(refused.value) == (
        "ct100-contracts.json contracts[0]: currency: contract CT-100: expected a 3-letter ISO code, got 'pounds'"
    )
