"""The books' GL, chart and sub-ledgers written as an XLSX report and an SAP-style CSV read back to the books."""

from __future__ import annotations

import csv
import io
import time
import zipfile
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import openpyxl
import pytest

from countersign.synthetic import generate_books, ledger_formats, load_profile
from countersign.synthetic.ledger_formats import write_ledger_exports
from tests.synthetic.books_fixture import DEFAULT_PROFILE, read_rows

PERIOD_END = datetime(2026, 10, 31, 23, 59, 59)
TOTALS = ("Total", "Summe")


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("books")
    generate_books(load_profile(DEFAULT_PROFILE), 42, out)
    return out


@pytest.fixture(scope="module")
def exports(books: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    out: dict[str, tuple[Path, dict[str, Any]]] = {}
    for name in ("xlsx", "csv"):
        folder = tmp_path_factory.mktemp(name)
        out[name] = (folder, write_ledger_exports(books, folder, name).mapping)
    return out


def sheet_records(path: Path, section: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]], list[Any]]:
    """(header, rows as heading -> cell value, the total row) of the section's sheet."""
    workbook = openpyxl.load_workbook(path, read_only=True)
    read = list(workbook[section["sheet"]].iter_rows(values_only=True))
    width = max(len(row) for row in read)
    rows = [(*row, *(None,) * (width - len(row))) for row in read]  # a row's trailing empty cells are not stored
    header = [cell for cell in rows[section["header_row"] - 1] if cell is not None]
    rows = [row[: len(header)] for row in rows]
    body = rows[section["header_row"] :]
    records = [dict(zip(header, row, strict=True)) for row in body if row[0] not in TOTALS]
    totals = [row for row in body if row[0] in TOTALS]
    assert len(totals) <= 1 and (not totals or body[-1] is totals[0])
    return header, records, list(totals[0]) if totals else []


def csv_records(path: Path, section: dict[str, Any]) -> tuple[list[str], list[dict[str, str]], list[str]]:
    text = path.read_bytes().decode(section["encoding"])
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=section["delimiter"]))
    header, body = rows[0], rows[1:]
    records = [dict(zip(header, row, strict=True)) for row in body if row[0] not in TOTALS]
    totals = [row for row in body if row[0] in TOTALS]
    return header, records, totals[0] if totals else []


def cell_amount(value: Any) -> Decimal:
    """A number cell as openpyxl reads it (int or float) -> Decimal via its shortest repr; None is 0."""
    if value is None:
        return Decimal("0")
    assert isinstance(value, int | float) and not isinstance(value, bool), value
    return Decimal(repr(value))


def sap_amount(text: str) -> Decimal:
    return Decimal(text.replace(".", "").replace(",", ".")) if text else Decimal("0")


def test_xlsx_gl_amounts_read_back_equal_the_books_exactly(books: Path, exports: dict[str, Any]) -> None:
    folder, mapping = exports["xlsx"]
    section = mapping["gl"]
    header, records, total = sheet_records(folder / "gl.xlsx", section)
    columns = section["columns"]
    want = read_rows(books / "gl_lines.csv")
    assert len(records) == len(want) == 2000
    for record, row in zip(records, want, strict=True):
        debit, credit = cell_amount(record[columns["debit"]]), cell_amount(record[columns["credit"]])
        assert debit - credit == Decimal(row["amount"]), row["line_id"]
        assert debit >= 0 and credit >= 0 and (debit == 0 or credit == 0)
        assert record[columns["line_id"]] == row["line_id"]
        assert record[columns["journal_id"]] == row["journal_id"]
        assert record[columns["date"]] == datetime.fromisoformat(row["date"])  # a date cell, not text
        assert (record[columns["account"]], record[columns["reference"]], record[columns["description"]]) == (
            row["account"],
            row["reference"],
            row["description"],
        )
    debits = sum((Decimal(r["amount"]) for r in want if not r["amount"].startswith("-")), Decimal("0"))
    assert total[0] == "Total"
    assert cell_amount(total[header.index("Debit")]) == cell_amount(total[header.index("Credit")]) == debits


def test_xlsx_cells_hold_the_two_decimal_text_and_dates_are_date_cells(exports: dict[str, Any]) -> None:
    folder, _ = exports["xlsx"]
    with zipfile.ZipFile(folder / "gl.xlsx") as archive:
        sheet = archive.read("xl/worksheets/sheet1.xml").decode()
    workbook = openpyxl.load_workbook(folder / "gl.xlsx")
    first = workbook["GL"].cell(row=5, column=7)
    assert first.data_type == "n" and first.number_format == "#,##0.00"
    assert f"<v>{first.value}</v>" in sheet
    assert workbook["GL"].cell(row=5, column=3).is_date
    assert workbook["GL"].cell(row=1, column=1).value == "ACME-UK General Ledger"


def test_xlsx_chart_and_open_items_read_back(books: Path, exports: dict[str, Any]) -> None:
    folder, mapping = exports["xlsx"]
    chart = mapping["chart"]
    _, records, _ = sheet_records(folder / "gl.xlsx", chart)
    columns, types = chart["columns"], chart["type_values"]
    assert [
        (r[columns["account"]], r[columns["name"]], types[r[columns["type"]]], r[columns["subtype"]]) for r in records
    ] == [(r["account"], r["name"], r["type"], r["subtype"]) for r in read_rows(books / "accounts.csv")]
    for ledger, party in (("ap", "vendor"), ("ar", "customer")):
        section = mapping[ledger]
        header, records, total = sheet_records(folder / f"{ledger}.xlsx", section)
        columns = section["columns"]
        want = read_rows(books / f"{ledger}_subledger.csv")
        assert [
            (
                r[columns["invoice_id"]],
                r[columns[party]],
                r[columns["invoice_date"]].date(),
                r[columns["due_date"]].date(),
                cell_amount(r[columns["amount"]]),
            )
            for r in records
        ] == [
            (
                w["invoice_id"],
                w[party],
                date.fromisoformat(w["invoice_date"]),
                date.fromisoformat(w["due_date"]),
                Decimal(w["amount"]),
            )
            for w in want
        ]
        assert cell_amount(total[header.index(columns["amount"])]) == sum(Decimal(w["amount"]) for w in want)


def test_sap_csv_reads_back_to_the_books(books: Path, exports: dict[str, Any]) -> None:
    folder, mapping = exports["csv"]
    section = mapping["gl"]
    columns = section["columns"]
    header, records, total = csv_records(folder / "gl.csv", section)
    want = read_rows(books / "gl_lines.csv")
    assert len(records) == len(want)
    for record, row in zip(records, want, strict=True):
        amount = sap_amount(record[columns["debit"]]) - sap_amount(record[columns["credit"]])
        assert amount == Decimal(row["amount"]), row["line_id"]
        assert datetime.strptime(record[columns["date"]], section["date_format"]).date() == date.fromisoformat(
            row["date"]
        )
        assert (record[columns["line_id"]], record[columns["account"]], record[columns["currency"]]) == (
            row["line_id"],
            row["account"],
            "GBP",
        )
    debits = sum((Decimal(r["amount"]) for r in want if not r["amount"].startswith("-")), Decimal("0"))
    assert total[0] == "Summe" and sap_amount(total[header.index("Soll")]) == sap_amount(total[header.index("Haben")])
    assert sap_amount(total[header.index("Soll")]) == debits
    chart = mapping["chart"]
    _, records, _ = csv_records(folder / "chart.csv", chart)
    assert [(r["Sachkonto"], chart["type_values"][r["Kontoart"]]) for r in records] == [
        (r["account"], r["type"]) for r in read_rows(books / "accounts.csv")
    ]
    for ledger in ("ap", "ar"):
        _, records, total = csv_records(folder / f"{ledger}.csv", mapping[ledger])
        amounts = [sap_amount(r["Offener Betrag"]) for r in records]
        assert amounts == [Decimal(r["amount"]) for r in read_rows(books / f"{ledger}_subledger.csv")]
        assert sap_amount(total[-1]) == sum(amounts)


def test_sap_csv_is_windows_1252_semicolons_crlf_and_german_numbers(exports: dict[str, Any]) -> None:
    folder, _ = exports["csv"]
    data = (folder / "gl.csv").read_bytes()
    assert data.startswith(b"Zeile;Belegnr.;Buchungsdatum;Sachkonto;Referenz;Buchungstext;Soll;Haben;W\xe4hrung\r\n")
    assert data.count(b"\n") == data.count(b"\r\n")
    assert b";01.10.2026;" in data
    assert any(part.count(b".") == 1 and part.count(b",") == 1 for part in data.split(b";"))  # 1.234,56
    assert (folder / "ap.csv").read_bytes().startswith(b"Beleg;Kreditor;Belegdatum;F\xe4lligkeit;Offener Betrag\r\n")


@pytest.mark.parametrize("name", ["xlsx", "csv"])
def test_mapping_names_every_heading_in_the_files(exports: dict[str, Any], name: str) -> None:
    folder, mapping = exports[name]
    files = {
        "xlsx": {"gl": "gl.xlsx", "chart": "gl.xlsx", "ap": "ap.xlsx", "ar": "ar.xlsx"},
        "csv": {"gl": "gl.csv", "chart": "chart.csv", "ap": "ap.csv", "ar": "ar.csv"},
    }[name]
    assert set(mapping) == set(files)
    for section_name, file_name in files.items():
        section = mapping[section_name]
        reader = sheet_records if name == "xlsx" else csv_records
        header = reader(folder / file_name, section)[0]
        assert set(section["columns"].values()) == set(header), section_name


def test_xlsx_bytes_do_not_depend_on_the_clock(
    books: Path, exports: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = exports["xlsx"]
    later = time.time() + 3 * 24 * 3600
    monkeypatch.setattr(time, "time", lambda: later)  # zipfile stamps members with time.time()
    write_ledger_exports(books, tmp_path, "xlsx")
    for name in ("gl.xlsx", "ap.xlsx", "ar.xlsx"):
        assert (tmp_path / name).read_bytes() == (folder / name).read_bytes(), name
        with zipfile.ZipFile(tmp_path / name) as archive:
            assert {info.date_time[:3] for info in archive.infolist()} == {(2026, 10, 31)}
    workbook = openpyxl.load_workbook(tmp_path / "gl.xlsx")
    assert workbook.properties.created == workbook.properties.modified == PERIOD_END


def test_sap_csv_is_byte_identical_when_written_again(books: Path, exports: dict[str, Any], tmp_path: Path) -> None:
    folder, _ = exports["csv"]
    write_ledger_exports(books, tmp_path, "csv")
    for name in ("gl.csv", "chart.csv", "ap.csv", "ar.csv"):
        assert (tmp_path / name).read_bytes() == (folder / name).read_bytes(), name


def test_a_ledger_too_long_for_a_sheet_is_refused_naming_csv(
    books: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_formats, "XLSX_MAX_ROWS", 2000)
    with pytest.raises(ValueError, match=r"gl_lines.csv has 2,000 lines: an XLSX sheet holds at most 2,000 rows"):
        write_ledger_exports(books, tmp_path, "xlsx")
    assert not (tmp_path / "gl.xlsx").exists()


def test_unknown_ledger_format_is_refused(books: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown ledger format 'sage': expected one of \['xlsx', 'csv'\]"):
        write_ledger_exports(books, tmp_path, "sage")


# --- round trip through the ledger importer ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["xlsx", "csv"])
def test_ledger_importer_reads_the_exports_back_to_the_books(
    books: Path, exports: dict[str, Any], name: str, tmp_path: Path
) -> None:
    import yaml

    from countersign.importers.ledger import read_chart, read_gl, read_open_items
    from countersign.importers.mapping import load_mapping

    folder, sections = exports[name]
    (tmp_path / "mapping.yaml").write_text(yaml.safe_dump({"version": 1, **sections}), encoding="utf-8")
    mapping = load_mapping(tmp_path / "mapping.yaml")
    chart_file = folder / ("gl.xlsx" if name == "xlsx" else "chart.csv")
    chart = read_chart(chart_file, mapping.chart)
    lines = list(read_gl(folder / f"gl.{name}", mapping.gl, chart))
    assert [(g.line_id, g.journal_id, g.line_date, g.account, g.amount, g.reference, g.description) for g in lines] == [
        (
            r["line_id"],
            r["journal_id"],
            date.fromisoformat(r["date"]),
            r["account"],
            Decimal(r["amount"]),
            r["reference"],
            r["description"],
        )
        for r in read_rows(books / "gl_lines.csv")
    ]
    parties: tuple[tuple[str, Literal["vendor", "customer"]], ...] = (("ap", "vendor"), ("ar", "customer"))
    for ledger, party in parties:
        layout = mapping.ap if ledger == "ap" else mapping.ar
        items = list(read_open_items(folder / f"{ledger}.{name}", layout, party))
        assert [(i.invoice_id, i.party, i.invoice_date, i.due_date, i.amount) for i in items] == [
            (
                r["invoice_id"],
                r[party],
                date.fromisoformat(r["invoice_date"]),
                date.fromisoformat(r["due_date"]),
                Decimal(r["amount"]),
            )
            for r in read_rows(books / f"{ledger}_subledger.csv")
        ]
