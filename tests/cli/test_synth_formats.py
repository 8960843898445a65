"""`countersign synth --bank-format ... --ledger-format ...`: the exports and their mapping, the books untouched."""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path
from typing import Any

import openpyxl
import yaml
from typer.testing import CliRunner

from countersign.cli.main import app

EXPORTED = {
    "bank.camt053.xml",
    "bank.mt940",
    "bank.ofx",
    "bank-1000.csv",
    "bank-1000.mapping.yaml",
    "bank-1010.csv",
    "bank-1010.mapping.yaml",
    "gl.xlsx",
    "ap.xlsx",
    "ar.xlsx",
    "mapping.yaml",
}
CORRECTED = {
    "bank.camt053.xml",
    "bank.mt940",
    "bank.ofx",
    "bank-1000.csv",
    "bank-1000.mapping.yaml",
    "bank-1010.csv",
    "bank-1010.mapping.yaml",
    "mapping.yaml",
}


def synth(out: Path, *options: str) -> Any:
    return CliRunner().invoke(app, ["synth", "--seed", "7", "--out", str(out), *options], env={"COLUMNS": "400"})


def digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def headings(path: Path, section: dict[str, Any]) -> set[str]:
    if path.suffix == ".xlsx":
        sheet = openpyxl.load_workbook(path, read_only=True)[section["sheet"]]
        row = next(sheet.iter_rows(min_row=section["header_row"], max_row=section["header_row"], values_only=True))
        return {str(cell) for cell in row if cell is not None}
    text = path.read_bytes().decode("utf-8-sig" if section.get("encoding", "utf-8") == "utf-8" else section["encoding"])
    return set(next(csv.reader(io.StringIO(text), delimiter=section.get("delimiter", ","))))


def test_synth_writes_each_export_with_a_mapping_naming_its_headings_and_leaves_the_books_alone(tmp_path: Path) -> None:
    plain = synth(tmp_path / "plain")
    assert plain.exit_code == 0, plain.output
    options = ("--bank-format", "camt053,mt940", "--bank-format", "ofx", "--bank-format", "csv")
    done = synth(tmp_path / "a", *options, "--ledger-format", "xlsx")
    assert done.exit_code == 0, done.output
    export = tmp_path / "a" / "export"

    books = {name: digest for name, digest in digests(tmp_path / "a").items() if not name.startswith("export/")}
    assert books == digests(tmp_path / "plain")
    assert {p.name for p in export.iterdir() if p.is_file()} == EXPORTED
    assert {p.name for p in (export / "corrected").iterdir()} == CORRECTED
    printed = [line.strip() for line in done.output.splitlines()]
    assert f"wrote {len(EXPORTED) + len(CORRECTED)} export files to {export}:" in printed
    assert set(printed) >= EXPORTED | {f"corrected/{name}" for name in CORRECTED}

    mapping = yaml.safe_load((export / "mapping.yaml").read_text(encoding="utf-8"))
    assert mapping["version"] == 1
    assert mapping["bank_accounts"] == {"GB33BUKB20201555555555": "1000", "GB94BARC10201530093459": "1010"}
    files = {"bank_csv": "bank-1000.csv", "gl": "gl.xlsx", "chart": "gl.xlsx", "ap": "ap.xlsx", "ar": "ar.xlsx"}
    assert set(mapping) == {"version", "bank_accounts", *files}
    for section, name in files.items():
        assert set(mapping[section]["columns"].values()) == headings(export / name, mapping[section]), section
    for name in ("bank-1000.mapping.yaml", "bank-1010.mapping.yaml"):
        own = yaml.safe_load((export / name).read_text(encoding="utf-8"))
        assert own["bank_csv"]["columns"] == mapping["bank_csv"]["columns"]

    again = synth(tmp_path / "b", *options, "--ledger-format", "xlsx")
    assert again.exit_code == 0, again.output
    assert digests(tmp_path / "b" / "export") == digests(export)  # the workbooks too: no clock in their bytes

    refused = synth(tmp_path / "c", "--bank-format", "camt053,bai2")
    assert refused.exit_code == 2
    assert "--bank-format: expected some of books, camt053, mt940, ofx, csv, found 'bai2'" in refused.output
    assert not (tmp_path / "c").exists()
