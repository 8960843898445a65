"""The books' ledgers as ERPs export them: an XLSX report workbook, or an SAP-style CSV list.

Read back from a written books directory (gl_lines.csv, accounts.csv, ap_subledger.csv, ar_subledger.csv), so the
books stay byte for byte what `generate_books` wrote. Each writer returns the mapping sections (docs/books-format.md)
that read its files back into the books format.

- xlsx: `gl.xlsx` (sheet "GL": a title, a subtitle and a blank row above the headings, date cells, numeric Debit and
  Credit cells, a final "Total" row; sheet "Chart"), `ap.xlsx` (sheet "AP") and `ar.xlsx` (sheet "AR"), each with a
  title row and a "Total" row. Amounts are written as Decimal cells (openpyxl stores their 2-decimal text, which
  reads back exactly). The workbook's created and modified times and every zip member's time are the period's end,
  so the bytes depend on the books alone.
- csv: `gl.csv`, `chart.csv`, `ap.csv`, `ar.csv` as an SAP list export: semicolons, Windows-1252, CRLF, German
  headings (Soll/Haben), dd.mm.yyyy, `1.234,56`, and a trailing "Summe" row.

Money is integer minor units until it is written: text for CSV, a Decimal for a cell. Never a float.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from openpyxl import Workbook
from openpyxl.cell import Cell, WriteOnlyCell
from openpyxl.worksheet._write_only import WriteOnlyWorksheet
from openpyxl.writer.excel import ExcelWriter

from countersign.synthetic.bank_formats import Export, decimal_text, minor_units
from countersign.synthetic.period import period_days

LEDGER_FORMATS: tuple[str, ...] = ("xlsx", "csv")
XLSX_MAX_ROWS = 1_048_576
XLSX_EXACT_MINOR = 10**15
"""openpyxl writes a number cell as "%.16g" (a double): exact for amounts below 10^13 with two decimals."""
XLSX_DATE_FORMAT = "dd/mm/yyyy"
XLSX_AMOUNT_FORMAT = "#,##0.00"

_XLSX_GL_HEADER = ("Line", "Journal", "Posting Date", "Account", "Reference", "Description", "Debit", "Credit")
_XLSX_GL_HEADER_ROW = 4
_XLSX_CHART_HEADER = ("Code", "Name", "Type", "Subtype")
_XLSX_TYPES = {
    "asset": "Asset",
    "liability": "Liability",
    "equity": "Equity",
    "revenue": "Income",
    "expense": "Expense",
}
_XLSX_ITEMS_HEADER_ROW = 3

_CSV_GL_HEADER = ("Zeile", "Belegnr.", "Buchungsdatum", "Sachkonto", "Referenz", "Buchungstext", "Soll", "Haben",
                  "Währung")  # fmt: skip
_CSV_CHART_HEADER = ("Sachkonto", "Bezeichnung", "Kontoart", "Untertyp")
_CSV_TYPES = {"asset": "Aktiva", "liability": "Passiva", "equity": "Eigenkapital", "revenue": "Ertrag",
              "expense": "Aufwand"}  # fmt: skip
_CSV_TOTAL = "Summe"
_CSV_ENCODING = "cp1252"


@dataclass(frozen=True)
class _Books:
    entity: str
    period: str
    currency: str
    period_start: date
    period_end: date


@dataclass(frozen=True)
class _Items:
    """One sub-ledger: its file stem, sheet name, what the party is called in each style."""

    ledger: str
    party: str
    source: str
    xlsx_title: str
    xlsx_party: str
    csv_party: str


_AP = _Items("ap", "vendor", "ap_subledger.csv", "Aged creditors", "Supplier", "Kreditor")
_AR = _Items("ar", "customer", "ar_subledger.csv", "Aged debtors", "Customer", "Debitor")


def write_ledger_exports(books_dir: Path, out_dir: Path, ledger_format: str) -> Export:
    """Write the GL, the chart and the AP and AR open items of `books_dir` into `out_dir` in `ledger_format`."""
    if ledger_format not in LEDGER_FORMATS:
        raise ValueError(f"unknown ledger format {ledger_format!r}: expected one of {list(LEDGER_FORMATS)}")
    books = _read_books(books_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if ledger_format == "xlsx":
        return _write_xlsx(books_dir, out_dir, books)
    return _write_csv(books_dir, out_dir, books)


def _read_books(books_dir: Path) -> _Books:
    entity = json.loads((books_dir / "entity.json").read_text(encoding="utf-8"))
    days = period_days(str(entity["period"]))
    return _Books(str(entity["entity"]), str(entity["period"]), str(entity["currency"]), days[0], days[-1])


def _rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        yield from csv.DictReader(handle)


def _count_rows(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle) - 1


# --- XLSX --------------------------------------------------------------------------------------------------------


def _write_xlsx(books_dir: Path, out_dir: Path, books: _Books) -> Export:
    gl_rows = _count_rows(books_dir / "gl_lines.csv")
    if gl_rows + _XLSX_GL_HEADER_ROW + 1 > XLSX_MAX_ROWS:
        raise ValueError(
            f"gl_lines.csv has {gl_rows:,} lines: an XLSX sheet holds at most {XLSX_MAX_ROWS:,} rows "
            "(write the ledger as csv instead)"
        )
    workbook = Workbook(write_only=True)
    _xlsx_gl(workbook.create_sheet("GL"), books_dir, books)
    _xlsx_chart(workbook.create_sheet("Chart"), books_dir)
    (out_dir / "gl.xlsx").write_bytes(workbook_bytes(workbook, books.period_end))
    for items in (_AP, _AR):
        workbook = Workbook(write_only=True)
        _xlsx_items(workbook.create_sheet(items.ledger.upper()), books_dir, books, items)
        (out_dir / f"{items.ledger}.xlsx").write_bytes(workbook_bytes(workbook, books.period_end))
    xlsx_common: dict[str, Any] = {"date_format": "%d/%m/%Y", "skip_rows_starting_with": ["Total"]}
    mapping: dict[str, Any] = {
        "gl": {
            "sheet": "GL",
            "header_row": _XLSX_GL_HEADER_ROW,
            **xlsx_common,
            "columns": dict(
                zip(
                    ("line_id", "journal_id", "date", "account", "reference", "description", "debit", "credit"),
                    _XLSX_GL_HEADER,
                    strict=True,
                )
            ),
        },
        "chart": {
            "sheet": "Chart",
            "header_row": 1,
            "columns": dict(zip(("account", "name", "type", "subtype"), _XLSX_CHART_HEADER, strict=True)),
            "type_values": {shown: ours for ours, shown in _XLSX_TYPES.items()},
        },
    }
    for items in (_AP, _AR):
        mapping[items.ledger] = {
            "sheet": items.ledger.upper(),
            "header_row": _XLSX_ITEMS_HEADER_ROW,
            **xlsx_common,
            "columns": dict(zip(_item_fields(items), _xlsx_items_header(items), strict=True)),
        }
    return Export(
        files=("gl.xlsx", "ap.xlsx", "ar.xlsx"),
        mapping=mapping,
        described={"gl": "gl.xlsx (sheet GL)", "chart": "gl.xlsx (sheet Chart)", "ap": "ap.xlsx", "ar": "ar.xlsx"},
    )


def workbook_bytes(workbook: Workbook, as_of: date) -> bytes:
    """The workbook saved with `as_of` (23:59:59) as its created and modified times and every zip member's time."""
    stamp = datetime(as_of.year, as_of.month, as_of.day, 23, 59, 59)
    workbook.properties.created = stamp
    workbook.properties.modified = stamp
    workbook.properties.creator = "countersign synth"
    saved = io.BytesIO()
    with zipfile.ZipFile(saved, "w", zipfile.ZIP_DEFLATED) as archive:
        ExcelWriter(workbook, archive).save()  # workbook.save() would stamp `modified` with the clock
    fixed = io.BytesIO()
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(fixed, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.infolist():
            info = zipfile.ZipInfo(member.filename, date_time=(stamp.year, stamp.month, stamp.day, 23, 59, 58))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            target.writestr(info, source.read(member))
    return fixed.getvalue()


def _cell(sheet: WriteOnlyWorksheet, value: date | Decimal | None, number_format: str) -> Cell | None:
    if value is None:
        return None
    cell = WriteOnlyCell(sheet)
    cell.value = value
    cell.number_format = number_format
    return cell


def _amount_cell(sheet: WriteOnlyWorksheet, minor: int | None) -> Cell | None:
    """A numeric cell holding the amount as a Decimal (two places), or an empty cell for None."""
    if minor is not None and abs(minor) >= XLSX_EXACT_MINOR:
        raise ValueError(f"{decimal_text(minor)} has more digits than an XLSX number cell holds exactly")
    return _cell(sheet, None if minor is None else Decimal(minor).scaleb(-2), XLSX_AMOUNT_FORMAT)


def _date_cell(sheet: WriteOnlyWorksheet, text: str) -> Cell | None:
    return _cell(sheet, date.fromisoformat(text), XLSX_DATE_FORMAT)


def _xlsx_gl(sheet: WriteOnlyWorksheet, books_dir: Path, books: _Books) -> None:
    sheet.append([f"{books.entity} General Ledger"])
    sheet.append([f"Period {books.period_start:%d/%m/%Y} to {books.period_end:%d/%m/%Y}, amounts in {books.currency}"])
    sheet.append([])
    sheet.append(list(_XLSX_GL_HEADER))
    debit_total = credit_total = 0
    for row in _rows(books_dir / "gl_lines.csv"):
        amount = minor_units(row["amount"])
        debit, credit = (amount, None) if amount >= 0 else (None, -amount)
        debit_total += debit or 0
        credit_total += credit or 0
        sheet.append(
            [
                row["line_id"],
                row["journal_id"],
                _date_cell(sheet, row["date"]),
                row["account"],
                row["reference"],
                row["description"],
                _amount_cell(sheet, debit),
                _amount_cell(sheet, credit),
            ]
        )
    sheet.append(
        ["Total", None, None, None, None, None, _amount_cell(sheet, debit_total), _amount_cell(sheet, credit_total)]
    )


def _xlsx_chart(sheet: WriteOnlyWorksheet, books_dir: Path) -> None:
    sheet.append(list(_XLSX_CHART_HEADER))
    for row in _rows(books_dir / "accounts.csv"):
        sheet.append([row["account"], row["name"], _XLSX_TYPES[row["type"]], row["subtype"]])


def _item_fields(items: _Items) -> tuple[str, ...]:
    return ("invoice_id", items.party, "invoice_date", "due_date", "amount")


def _xlsx_items_header(items: _Items) -> tuple[str, ...]:
    return ("Invoice", items.xlsx_party, "Invoice Date", "Due Date", "Open Amount")


def _xlsx_items(sheet: WriteOnlyWorksheet, books_dir: Path, books: _Books, items: _Items) -> None:
    sheet.append([f"{books.entity} {items.xlsx_title}: open items at {books.period_end:%d/%m/%Y} ({books.currency})"])
    sheet.append([])
    sheet.append(list(_xlsx_items_header(items)))
    total = 0
    for row in _rows(books_dir / items.source):
        amount = minor_units(row["amount"])
        total += amount
        sheet.append(
            [
                row["invoice_id"],
                row[items.party],
                _date_cell(sheet, row["invoice_date"]),
                _date_cell(sheet, row["due_date"]),
                _amount_cell(sheet, amount),
            ]
        )
    sheet.append(["Total", None, None, None, _amount_cell(sheet, total)])


# --- SAP-style CSV -----------------------------------------------------------------------------------------------


def _sap_amount(minor: int | None) -> str:
    return "" if minor is None else decimal_text(minor, separator=",", thousands=".")


def _sap_date(text: str) -> str:
    return f"{date.fromisoformat(text):%d.%m.%Y}"


def _write_sap(path: Path, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    with path.open("w", encoding=_CSV_ENCODING, newline="") as handle:
        writer = csv.writer(handle, delimiter=";", lineterminator="\r\n")
        writer.writerow(header)
        writer.writerows(rows)


def _write_csv(books_dir: Path, out_dir: Path, books: _Books) -> Export:
    totals = [0, 0]

    def gl_rows() -> Iterator[tuple[str, ...]]:
        for row in _rows(books_dir / "gl_lines.csv"):
            amount = minor_units(row["amount"])
            debit, credit = (amount, None) if amount >= 0 else (None, -amount)
            totals[0] += debit or 0
            totals[1] += credit or 0
            yield (
                row["line_id"],
                row["journal_id"],
                _sap_date(row["date"]),
                row["account"],
                row["reference"],
                row["description"],
                _sap_amount(debit),
                _sap_amount(credit),
                books.currency,
            )
        yield (_CSV_TOTAL, "", "", "", "", "", _sap_amount(totals[0]), _sap_amount(totals[1]), books.currency)

    _write_sap(out_dir / "gl.csv", _CSV_GL_HEADER, gl_rows())
    _write_sap(
        out_dir / "chart.csv",
        _CSV_CHART_HEADER,
        ((r["account"], r["name"], _CSV_TYPES[r["type"]], r["subtype"]) for r in _rows(books_dir / "accounts.csv")),
    )
    for items in (_AP, _AR):
        rows = list(_rows(books_dir / items.source))
        total = sum(minor_units(r["amount"]) for r in rows)
        _write_sap(
            out_dir / f"{items.ledger}.csv",
            _csv_items_header(items),
            [
                *(
                    (
                        r["invoice_id"],
                        r[items.party],
                        _sap_date(r["invoice_date"]),
                        _sap_date(r["due_date"]),
                        _sap_amount(minor_units(r["amount"])),
                    )
                    for r in rows
                ),
                (_CSV_TOTAL, "", "", "", _sap_amount(total)),
            ],
        )
    csv_common: dict[str, Any] = {
        "encoding": _CSV_ENCODING,
        "delimiter": ";",
        "header_row": 1,
        "date_format": "%d.%m.%Y",
        "decimal_separator": ",",
        "thousands_separator": ".",
    }
    gl_fields = ("line_id", "journal_id", "date", "account", "reference", "description", "debit", "credit", "currency")
    mapping: dict[str, Any] = {
        "gl": {
            **csv_common,
            "skip_rows_starting_with": [_CSV_TOTAL],
            "columns": dict(zip(gl_fields, _CSV_GL_HEADER, strict=True)),
        },
        "chart": {
            **csv_common,
            "columns": dict(zip(("account", "name", "type", "subtype"), _CSV_CHART_HEADER, strict=True)),
            "type_values": {shown: ours for ours, shown in _CSV_TYPES.items()},
        },
    }
    for items in (_AP, _AR):
        mapping[items.ledger] = {
            **csv_common,
            "skip_rows_starting_with": [_CSV_TOTAL],
            "columns": dict(zip(_item_fields(items), _csv_items_header(items), strict=True)),
        }
    return Export(
        files=("gl.csv", "chart.csv", "ap.csv", "ar.csv"),
        mapping=mapping,
        described={"gl": "gl.csv", "chart": "chart.csv", "ap": "ap.csv", "ar": "ar.csv"},
    )


def _csv_items_header(items: _Items) -> tuple[str, ...]:
    return ("Beleg", items.csv_party, "Belegdatum", "Fälligkeit", "Offener Betrag")
