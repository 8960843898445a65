"""A pay application's Variations section may carry each instruction's Limit (a quotation accepted up to a sum)."""

from __future__ import annotations

from pathlib import Path

from countersign.applications import read_application_files
from countersign.certificates import Contract, parse_certificate
from tests.applications.conftest import APPLICATIONS

VARIATIONS = (
    'Variations\nVariation,Instruction,Description,Amount,Limit\nV-07,AI 007,Extra drainage,"12,000.00","15,000.00"\n'
)


def _with_variations(tmp_path: Path, section: str) -> Path:
    text = (APPLICATIONS / "app.csv").read_text()
    path = tmp_path / "app.csv"
    path.write_text(text.replace("Packages\n", section + "\nPackages\n", 1))
    return path


def test_the_limit_column_reaches_the_record_and_the_domain(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    (read,) = read_application_files([_with_variations(tmp_path, VARIATIONS)], contracts)
    (variation,) = read.record["variations"]
    assert variation["limit"] == "15000.00"
    assert parse_certificate(read.record).variations[0].limit_minor == 1_500_000


def test_without_the_column_a_variation_has_no_limit(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    section = 'Variations\nVariation,Instruction,Description,Amount\nV-07,AI 007,Extra drainage,"12,000.00"\n'
    (read,) = read_application_files([_with_variations(tmp_path, section)], contracts)
    assert parse_certificate(read.record).variations[0].limit_minor is None
