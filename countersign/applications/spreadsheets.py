"""CSV files and XLSX workbooks as rows of cell text: one certificate per CSV file, one per titled XLSX sheet."""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

from countersign.applications.errors import ApplicationError
from countersign.applications.figures import cell_text
from countersign.applications.layout import TITLE, loose
from countersign.applications.tabular import MAX_ROWS, Row

MAX_COLUMNS = 64


def csv_rows(path: Path, raw: bytes) -> list[Row]:
    """The file's rows ("row N" counts from 1, as a spreadsheet shows them); UTF-8, a BOM allowed."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ApplicationError(path.name, f"row {line}", "(encoding)", "not valid UTF-8") from None
    rows: list[Row] = []
    try:
        for number, cells in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
            if number > MAX_ROWS:
                raise ApplicationError(path.name, "", "(file)", f"more than {MAX_ROWS} rows")
            rows.append(Row(f"row {number}", tuple(cell.strip() for cell in cells[:MAX_COLUMNS])))
    except csv.Error as exc:
        raise ApplicationError(path.name, f"row {len(rows) + 1}", "(csv)", str(exc)) from None
    return rows


def xlsx_sheets(path: Path, raw: bytes) -> list[tuple[str, list[Row]]]:
    """(sheet name, rows) of every sheet whose first filled cell is the title 'Payment application', in workbook
    order; other sheets (notes, a cover) are skipped. Cell values, not formulas: a formula cell reads as the value
    the workbook last saved for it."""
    from openpyxl import load_workbook

    try:
        workbook = load_workbook(io.BytesIO(raw), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise ApplicationError(path.name, "", "(file)", f"not a readable XLSX workbook ({exc})") from None
    sheets: list[tuple[str, list[Row]]] = []
    try:
        for sheet in workbook.worksheets:
            rows: list[Row] = []
            for number, values in enumerate(sheet.iter_rows(values_only=True, max_col=MAX_COLUMNS), start=1):
                if number > MAX_ROWS:
                    raise ApplicationError(path.name, f"sheet {sheet.title}", "(sheet)", f"more than {MAX_ROWS} rows")
                rows.append(Row(f"sheet {sheet.title}, row {number}", tuple(cell_text(v) for v in values)))
            first = next((row for row in rows if not row.blank), None)
            if first is not None and loose(first.filled[0]) == loose(TITLE):
                sheets.append((sheet.title, rows))
    finally:
        workbook.close()
    if not sheets:
        raise ApplicationError(path.name, "", "(file)", "no sheet starts with the title 'Payment application'")
    return sheets
