"""The books format's JSON Schemas (docs/schemas/books/) say what the loader reads, and what we write passes them.

The schemas are documentation a controller or an ERP integrator builds against; these tests keep them true: their
columns are the loader's (countersign/engine/books.py), the generator's books pass them row by row, and a bad row fails
them.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from countersign.engine.books import (
    ACCOUNTS,
    AP_ITEMS,
    AR_ITEMS,
    BANK_LINES_COLUMNS,
    BANK_LINES_OPTIONAL,
    BANK_STATEMENTS_COLUMNS,
    GL_LINES,
    GRNI,
    INTERCOMPANY,
    PNL_COLUMNS,
    RATES,
    SUPPLIER_BANK_CHANGES,
)
from countersign.synthetic import generate_books, load_profile
from tests.synthetic.books_fixture import DEFAULT_PROFILE

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "books"

# file -> (required columns, optional columns), as the loader reads them
LOADER_COLUMNS: dict[str, tuple[list[str], list[str]]] = {
    "accounts.csv": ([c[0] for c in ACCOUNTS.columns], [o.header for o in ACCOUNTS.optional]),
    "gl_lines.csv": ([c[0] for c in GL_LINES.columns], [o.header for o in GL_LINES.optional]),
    "bank_lines.csv": ([c[0] for c in BANK_LINES_COLUMNS], [o.header for o in BANK_LINES_OPTIONAL]),
    "bank_statements.csv": ([c[0] for c in BANK_STATEMENTS_COLUMNS], []),
    "ap_subledger.csv": ([c[0] for c in AP_ITEMS.columns], []),
    "ar_subledger.csv": ([c[0] for c in AR_ITEMS.columns], []),
    "grni.csv": ([c[0] for c in GRNI.columns], []),
    "intercompany.csv": ([c[0] for c in INTERCOMPANY.columns], []),
    "prior_period.csv": ([c[0] for c in PNL_COLUMNS], []),
    "budget.csv": ([c[0] for c in PNL_COLUMNS], []),
    "rates.csv": ([c[0] for c in RATES.columns], []),
    "supplier_bank_changes.csv": ([c[0] for c in SUPPLIER_BANK_CHANGES.columns], []),
}


def _schema(file: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / (file.removesuffix(".csv").removesuffix(".json") + ".schema.json")).read_text())


def _row_errors(path: Path, schema: dict[str, Any]) -> list[str]:
    validator = Draft202012Validator(schema)
    errors: list[str] = []
    with path.open(encoding="utf-8", newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            errors += [f"{path.name} line {line}: {error.message}" for error in validator.iter_errors(row)]
    return errors


@pytest.mark.parametrize("file", sorted(LOADER_COLUMNS))
def test_each_schema_names_exactly_the_columns_the_loader_reads(file: str) -> None:
    schema = _schema(file)
    Draft202012Validator.check_schema(schema)
    required, optional = LOADER_COLUMNS[file]
    assert schema["required"] == required
    assert set(schema["properties"]) == set(required) | set(optional)
    assert schema["additionalProperties"] is False


def test_generated_books_pass_every_schema_row_by_row(tmp_path: Path) -> None:
    books = tmp_path / "books"
    generate_books(load_profile(DEFAULT_PROFILE), 42, books, gl_lines=400)
    checked = 0
    for file in LOADER_COLUMNS:
        if (books / file).is_file():
            assert _row_errors(books / file, _schema(file)) == []
            checked += 1
    assert checked == 9  # the nine files synthetic books have; rates, statements and supplier changes are optional
    manifest = json.loads((books / "entity.json").read_text())
    assert list(Draft202012Validator(_schema("entity.json")).iter_errors(manifest)) == []


def test_a_bad_row_fails_its_schema(tmp_path: Path) -> None:
    """Negative control: the schemas can fail."""
    path = tmp_path / "gl_lines.csv"
    path.write_text(
        "line_id,journal_id,date,account,amount,reference,description\n"
        "L1,J1,2026-13-01,1000,12.345,ref,three decimals in month thirteen\n",
        encoding="utf-8",
    )
    errors = _row_errors(path, _schema("gl_lines.csv"))
    assert any("12.345" in error for error in errors)
    assert any("2026-13-01" in error for error in errors)
