"""Pay applications read from CSV, XLSX and text PDF: the certificate records the domain's parser takes, every
figure carrying the file, sheet, row or page it came from, and the three test files pass every check."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.applications import ApplicationError, read_application_file, read_application_files
from countersign.applications.figures import cell_text, decimal_text
from countersign.certificates import Contract, parse_certificate
from countersign.certificates.pipeline import run_pipeline
from tests.applications.conftest import APPLICATIONS, make_fixtures


def test_the_three_test_files_read_into_certificates_that_pass_every_check(contracts: dict[str, Contract]) -> None:
    files = [APPLICATIONS / name for name in ("app.csv", "app.xlsx", "valuation.pdf")]
    reads = read_application_files(files, contracts)
    assert [(r.file, r.certificate_id) for r in reads] == [
        ("app.csv", "IPC-CT100-001"),
        ("app.xlsx", "IPC-CT100-002"),
        ("valuation.pdf", "IPC-CT100-003"),
    ]
    certificates = [parse_certificate(r.record) for r in reads]
    assert [c.totals.amount_due_minor for c in certificates] == [703000, 1192250, 1197000]
    assert [c.date.isoformat() for c in certificates] == ["2025-04-28", "2025-05-28", "2025-06-27"]
    # The sheet carries no package or scope hash: they come from the contract's bill.
    assert [(line.boq_line, line.package, line.scope_hash) for line in certificates[2].lines] == [
        ("L01", "P1", "a1f0c3d2e4b5a6c7"),
        ("L02", "P1", "b2e1d4c3f5a6b7d8"),
        ("L03", "P2", "c3d2e5f4a6b7c8e9"),
    ]
    run = run_pipeline(contracts, certificates)
    assert run.holds == () and run.certified == {c.id for c in certificates}


def test_every_figure_names_where_it_came_from(contracts: dict[str, Contract]) -> None:
    (csv_read,) = read_application_file(APPLICATIONS / "app.csv", contracts)
    (xlsx_read,) = read_application_file(APPLICATIONS / "app.xlsx", contracts)
    (pdf_read,) = read_application_file(APPLICATIONS / "valuation.pdf", contracts)
    assert parse_certificate(csv_read.record).sources["totals.amount_due"] == "app.csv, row 33"
    assert csv_read.record["sources"]["lines[1].value_to_date"] == "app.csv, row 14"
    assert xlsx_read.record["sources"]["totals.retention_held"] == "app.xlsx, sheet Valuation 2, row 33"
    assert xlsx_read.record["sources"]["variations[0].amount"] == "app.xlsx, sheet Valuation 2, row 19"
    assert pdf_read.record["sources"]["totals.retention_held"] == "valuation.pdf, page 2, row 'Retention held'"
    assert pdf_read.record["sources"]["lines[2].quantity_to_date"] == "valuation.pdf, page 1, row 'L03'"
    assert pdf_read.record["sources"]["number"] == "valuation.pdf, page 1, row 'Number'"
    figures = [key for key in csv_read.record["sources"] if key.startswith(("totals.", "lines[", "packages["))]
    assert len(figures) >= 11 + 3 * 5 + 2 * 2


def test_an_xlsx_number_cell_is_read_as_its_decimal_not_through_float_arithmetic(
    tmp_path: Path, contracts: dict[str, Contract]
) -> None:
    assert cell_text(0.1 + 0.2) == "0.30000000000000004"
    assert cell_text(11922.5) == "11922.5" and decimal_text(cell_text(11922.5)) == "11922.50"
    rows = make_fixtures.certificate_rows(1)
    rows[-1] = ["Amount due", 7030.005]  # an unrounded formula result: refused, never rounded
    make_fixtures.write_xlsx(tmp_path / "float.xlsx", [("Valuation 1", rows)], notes=False)
    try:
        read_application_file(tmp_path / "float.xlsx", contracts)
    except ValueError as refused:
        assert str(refused) == (
            "float.xlsx, sheet Valuation 1, row 33: Amount due (Totals): expected a figure with at most 2 decimal"
            " places like 12,345.60, got '7030.005'"
        )
    else:
        raise AssertionError("a float with more than 2 places was accepted")


def test_the_committed_files_are_what_the_script_writes(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    make_fixtures.write_fixtures(tmp_path)
    for name in ("contracts.json", "app.csv"):
        assert (tmp_path / name).read_bytes() == (APPLICATIONS / name).read_bytes(), name
    for name in ("app.xlsx", "valuation.pdf"):
        written = [r.record for r in read_application_file(tmp_path / name, contracts)]
        committed = [r.record for r in read_application_file(APPLICATIONS / name, contracts)]
        assert _without_sources(written) == _without_sources(committed), name


def _without_sources(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in record.items() if key != "sources"} for record in records]


@given(st.decimals(min_value=Decimal("-999999999999.99"), max_value=Decimal("999999999999.99"), places=2))
def test_a_figure_with_thousands_separators_reads_as_the_same_amount(amount: Decimal) -> None:
    assert Decimal(decimal_text(f"{amount:,.2f}")) == amount
    assert Decimal(decimal_text(f"({abs(amount):,.2f})")) == -abs(amount)
    assert Decimal(decimal_text(f"{amount:.2f}")) == amount


def test_a_pdf_with_right_aligned_figures_and_an_empty_cell_reads_the_same(
    tmp_path: Path, contracts: dict[str, Contract]
) -> None:
    rows = make_fixtures.certificate_rows(3)
    at = rows.index(["Variation", "Instruction", "Description", "Amount"])
    rows[at] = ["Variation", "Instruction", "Description", "Amount", "BoQ line"]
    rows[at + 1] = ["VO-01", "", "Additional lintels", "1,250.00", "L02"]  # no instruction: the cell is empty
    make_fixtures.write_pdf(tmp_path / "right.pdf", rows, align_right=True)
    (read,) = read_application_file(tmp_path / "right.pdf", contracts)
    (committed,) = read_application_file(APPLICATIONS / "valuation.pdf", contracts)
    assert read.record["totals"] == committed.record["totals"]
    assert read.record["lines"] == committed.record["lines"]
    assert read.record["variations"] == [
        {"id": "VO-01", "description": "Additional lintels", "amount": "1250.00", "boq_line": "L02"}
    ]


def test_a_period_a_spreadsheet_turned_into_a_date_reads_as_its_month(
    tmp_path: Path, contracts: dict[str, Contract]
) -> None:
    from datetime import datetime

    rows = make_fixtures.certificate_rows(2)
    rows[4] = ["Period", datetime(2025, 5, 1)]  # Excel's reading of a typed "2025-05"
    make_fixtures.write_xlsx(tmp_path / "app.xlsx", [("Valuation 2", rows)])
    (read,) = read_application_file(tmp_path / "app.xlsx", contracts)
    assert read.record["period"] == "2025-05"
    rows[4] = ["Period", datetime(2025, 5, 28)]  # a day in the month is not a month: refused
    make_fixtures.write_xlsx(tmp_path / "app.xlsx", [("Valuation 2", rows)])
    with pytest.raises(ApplicationError) as refused:
        read_application_file(tmp_path / "app.xlsx", contracts)
    assert str(refused.value) == (
        "app.xlsx, sheet Valuation 2, row 5: Period: expected a month like 2025-06, got '2025-05-28'"
    )
