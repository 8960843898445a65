"""Every refusal of a pay application is one line naming the file, the row (or sheet and row, or page) and the
field, and says why. Each bad file is the good one with one thing broken."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from countersign.applications import ApplicationError, read_application_file, read_application_files
from countersign.certificates import Contract
from tests.applications.conftest import APPLICATIONS, make_fixtures


def _refusal(path: Path, contracts: dict[str, Contract]) -> str:
    with pytest.raises(ApplicationError) as refused:
        read_application_file(path, contracts)
    return str(refused.value)


def _csv(tmp_path: Path, rows: list[list[Any]], name: str = "app.csv") -> Path:
    make_fixtures.write_csv(tmp_path / name, rows)
    return tmp_path / name


def _replace(rows: list[list[Any]], label: str, value: list[Any] | None) -> list[list[Any]]:
    """The rows with the (first) row starting with `label` replaced by `value`, or removed."""
    index = next(i for i, row in enumerate(rows) if row and row[0] == label)
    return rows[:index] + ([] if value is None else [value]) + rows[index + 1 :]


def test_a_missing_column_names_the_heading_row_and_the_column(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = make_fixtures.certificate_rows(1)
    heading = ["BoQ line", "Description", "Quantity to date", "Value", "Previous quantity", "Previous value"]
    rows = _replace(rows, "BoQ line", heading)
    assert _refusal(_csv(tmp_path, rows), contracts) == "app.csv, row 12: Value to date (Measured work): column missing"


def test_a_bad_amount_names_the_row_and_the_field(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = _replace(make_fixtures.certificate_rows(1), "Amount due", ["Amount due", "12,5x"])
    assert _refusal(_csv(tmp_path, rows), contracts) == (
        "app.csv, row 33: Amount due (Totals): expected a figure with at most 2 decimal places like 12,345.60,"
        " got '12,5x'"
    )
    rows = make_fixtures.certificate_rows(1)
    rows[13][3] = "2,40.00"  # a misplaced thousands separator in L02's value to date
    assert _refusal(_csv(tmp_path, rows), contracts).startswith(
        "app.csv, row 14: Value to date (Measured work): expected a figure"
    )


def test_a_date_that_is_not_a_date_names_its_row(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = _replace(make_fixtures.certificate_rows(1), "Date", ["Date", "31/02/2025"])
    assert _refusal(_csv(tmp_path, rows), contracts) == (
        "app.csv, row 6: Date: expected a date like 2025-06-28 or 28/06/2025, got '31/02/2025'"
    )


def test_an_unknown_contract_names_the_contract_row(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = _replace(make_fixtures.certificate_rows(1), "Contract", ["Contract", "CT-999"])
    assert _refusal(_csv(tmp_path, rows), contracts) == "app.csv, row 2: Contract: 'CT-999' is not a known contract"


def test_an_unknown_bill_line_names_its_row(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = make_fixtures.certificate_rows(1)
    rows[14][0] = "L99"
    assert _refusal(_csv(tmp_path, rows), contracts) == (
        "app.csv, row 15: BoQ line (Measured work): 'L99' is not a line of CT-100"
    )


def test_a_missing_totals_row_names_the_totals_and_the_row_missing(
    tmp_path: Path, contracts: dict[str, Contract]
) -> None:
    rows = _replace(make_fixtures.certificate_rows(1), "Retention held", None)
    assert _refusal(_csv(tmp_path, rows), contracts) == "app.csv, row 22: Retention held (Totals): totals row missing"
    without_totals = make_fixtures.certificate_rows(1)[: make_fixtures.certificate_rows(1).index(["Totals"])]
    assert _refusal(_csv(tmp_path, without_totals), contracts) == (
        "app.csv: Totals: section not found: the totals rows are missing"
    )


def test_an_unknown_totals_label_is_refused_not_ignored(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = _replace(make_fixtures.certificate_rows(1), "Amount due", ["Amount payable", "7,030.00"])
    assert _refusal(_csv(tmp_path, rows), contracts).startswith(
        "app.csv, row 33: Amount payable: not a totals row (expected one of Work to date,"
    )


def test_an_empty_file_and_a_wrong_extension_are_refused_before_reading(
    tmp_path: Path, contracts: dict[str, Contract]
) -> None:
    (tmp_path / "empty.csv").write_text("\n\n")
    assert _refusal(tmp_path / "empty.csv", contracts) == "empty.csv: (file): is empty: no pay application in it"
    (tmp_path / "blank.csv").write_text(",,\n,,\n")
    assert _refusal(tmp_path / "blank.csv", contracts) == "blank.csv: (file): is empty: no pay application in it"
    (tmp_path / "app.txt").write_text("Payment application\n")
    assert _refusal(tmp_path / "app.txt", contracts) == "app.txt: (file): expected a .csv, .xlsx, .pdf file, got '.txt'"
    (tmp_path / "app.xlsx").write_text("not a workbook")
    assert _refusal(tmp_path / "app.xlsx", contracts).startswith("app.xlsx: (file): not a readable XLSX workbook")


def test_a_file_that_is_not_a_pay_application_names_its_first_row(
    tmp_path: Path, contracts: dict[str, Contract]
) -> None:
    with (tmp_path / "ledger.csv").open("w", newline="") as out:
        csv.writer(out).writerows([["Account", "Amount"], ["4000", "12.00"]])
    assert _refusal(tmp_path / "ledger.csv", contracts) == (
        "ledger.csv, row 1: (title): expected the title 'Payment application', got 'Account'"
    )


def test_a_bad_xlsx_cell_names_the_sheet_and_row(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = make_fixtures.certificate_rows(2)
    rows[13][2] = "a lot"  # L02's quantity to date
    make_fixtures.write_xlsx(tmp_path / "app.xlsx", [("Valuation 2", rows)])
    assert _refusal(tmp_path / "app.xlsx", contracts) == (
        "app.xlsx, sheet Valuation 2, row 14: Quantity to date (Measured work): expected a figure with at most 2"
        " decimal places like 12,345.60, got 'a lot'"
    )
    make_fixtures.write_xlsx(tmp_path / "notes.xlsx", [("Notes 2", [["Prepared by the site QS"]])])
    assert _refusal(tmp_path / "notes.xlsx", contracts) == (
        "notes.xlsx: (file): no sheet starts with the title 'Payment application'"
    )


def test_a_domain_refusal_is_traced_back_to_its_row(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = make_fixtures.certificate_rows(1)
    at = rows.index(["Totals"])
    rows[at:at] = [["Retention releases"], ["Event", "Amount"], ["on handover", "10.00"], []]
    assert _refusal(_csv(tmp_path, rows), contracts) == (
        "app.csv, row 24: retention_releases[0].event: expected one of practical_completion, defects_end"
    )


def test_the_same_certificate_in_two_files_names_both(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    first = _csv(tmp_path, make_fixtures.certificate_rows(1), "a.csv")
    second = _csv(tmp_path, make_fixtures.certificate_rows(1), "b.csv")
    with pytest.raises(ApplicationError) as refused:
        read_application_files([first, second], contracts)
    assert str(refused.value) == ("b.csv, row 3: Certificate: certificate IPC-CT100-001 is also in a.csv, row 3")


def test_a_pdf_without_a_text_layer_is_refused_naming_its_page(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    from fpdf import FPDF

    scan = FPDF()
    scan.add_page()
    scan.rect(20, 20, 120, 80, style="F")  # a picture of a table, no text
    scan.output(str(tmp_path / "scan.pdf"))
    assert _refusal(tmp_path / "scan.pdf", contracts) == (
        "scan.pdf, page 1: (text): no text layer (a scanned image?): the figures cannot be located"
    )


def test_a_pdf_whose_figures_cannot_be_located_names_the_pages(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    letter = [["Dear Sir"], ["Please find our valuation enclosed."]]
    make_fixtures.write_pdf(tmp_path / "letter.pdf", letter, break_before=None)
    assert _refusal(tmp_path / "letter.pdf", contracts) == (
        "letter.pdf, page 1, row 'Dear Sir': (title): expected the title 'Payment application', got 'Dear Sir'"
    )
    rows = make_fixtures.certificate_rows(3)
    make_fixtures.write_pdf(tmp_path / "valuation.pdf", [*rows[: rows.index(["Totals"])], ["Totals"]])
    assert _refusal(tmp_path / "valuation.pdf", contracts) == (
        "valuation.pdf, page 2, row 'Totals': Work to date (Totals): totals row missing"
    )
    make_fixtures.write_pdf(tmp_path / "short.pdf", rows[: rows.index(["Totals"])], break_before=None)
    assert _refusal(tmp_path / "short.pdf", contracts) == (
        "short.pdf, page 1: Totals: section not found: the totals rows are missing"
    )


def test_a_bad_pdf_figure_names_the_page_and_the_row(tmp_path: Path, contracts: dict[str, Contract]) -> None:
    rows = _replace(make_fixtures.certificate_rows(3), "Retention held", ["Retention held", "1.627,50"])
    make_fixtures.write_pdf(tmp_path / "valuation.pdf", rows)
    assert _refusal(tmp_path / "valuation.pdf", contracts) == (
        "valuation.pdf, page 2, row 'Retention held': Retention held (Totals): expected a figure with at most 2"
        " decimal places like 12,345.60, got '1.627,50'"
    )


def test_the_committed_test_files_are_all_accepted(contracts: dict[str, Contract]) -> None:
    """The positive control for every refusal above: the unbroken files read."""
    for name in ("app.csv", "app.xlsx", "valuation.pdf"):
        assert read_application_file(APPLICATIONS / name, contracts)
