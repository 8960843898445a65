"""A table as an ERP or a bank exports it, a CSV file or an XLSX sheet, read one row at a time.

`read_table` streams: a CSV file is read through the csv module line by line, an XLSX sheet through openpyxl's
read-only mode, so a file of millions of lines never sits in memory. Each row comes out as our fields (the layout
maps them to the file's column headings) with the file's own line or row number. Cells are text for CSV; for XLSX,
date cells are dates and numeric cells Decimals made from the number's shortest repr (never float arithmetic).
Blank rows and totals rows are skipped; anything else that does not fit the header is an ImportFileError.
"""

from __future__ import annotations

import codecs
import csv
import re
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

from countersign.importers.amounts import checked_amount, parse_amount, parse_date
from countersign.importers.errors import ImportFileError
from countersign.importers.mapping import TableLayout

MAX_ROWS = 50_000_000
MAX_COLUMNS = 1_000
MAX_HEADINGS_SHOWN = 20
XLSX_SUFFIXES = (".xlsx", ".xlsm")
XLSX_DIGITS = 15  # a spreadsheet number is a binary double: 15 significant decimal digits survive it
_UTF8_BOM = codecs.BOM_UTF8
_TOTALS = re.compile(r"(grand\s*|sub)?totals?\b", re.IGNORECASE)
"""Totals rows skipped whatever the mapping says: "Total", "Totals:", "Grand total", "Subtotal" (a whole word, so a
first cell like "TotalEnergies fuel" is data)."""

Cell = str | Decimal | date | None
_Field = tuple[str, str, bool]  # (our field, its heading, whether the file may lack the column)


class TableRow(NamedTuple):
    """One data row (a NamedTuple: immutable and cheap to build, one per line of a large file)."""

    number: int
    """The file's 1-based line (CSV: the line a record starts on) or row (XLSX) number."""
    values: Mapping[str, Cell]
    """Our field -> the cell: trimmed text, or (XLSX) a Decimal or a date; None when empty. Mapped fields only."""
    location: str
    """Where the row is, as errors name it: "line 12" (CSV) or "sheet GL, row 12" (XLSX)."""


def read_table(
    path: Path, layout: TableLayout, *, required: Sequence[str], optional: Sequence[str] = ()
) -> Iterator[TableRow]:
    """The table's data rows, streamed; `required` fields must be mapped, mapped `optional` ones are read too.

    Every mapped column's heading must be in the header row. Raises ImportFileError naming the file, the line or row
    and the heading; rows already yielded stay yielded, so a caller that must load all or nothing collects first.
    """
    file = path.name
    for name in required:
        if name not in layout.columns:
            raise ImportFileError(file, "", name, "not mapped: the mapping's `columns` needs a heading for it")
    fields = [
        (name, layout.columns[name], name in layout.may_be_absent and name not in required)
        for name in (*required, *optional)
        if name in layout.columns
    ]
    skip = _Skip(layout.skip_rows_starting_with)
    if path.suffix.lower() in XLSX_SUFFIXES:
        return _xlsx_rows(path, layout, fields, skip)
    if path.suffix.lower() == ".xls":
        raise ImportFileError(file, "", "(file)", "an Excel 97-2003 .xls workbook: save it as .xlsx or .csv")
    return _csv_rows(path, layout, fields, skip)


class _Skip:
    def __init__(self, prefixes: Iterable[str]) -> None:
        self.prefixes = tuple(prefix.casefold() for prefix in prefixes if prefix)
        self.initials = frozenset("tgs" + "".join(prefix[0] for prefix in self.prefixes))
        """The first letters a skipped row can start with (casefolded): most rows are ruled out by one look."""

    def __call__(self, first: str) -> bool:
        if first[:1].casefold()[:1] not in self.initials:
            return False
        return first.casefold().startswith(self.prefixes) or _TOTALS.match(first) is not None


def _first_filled(cells: Sequence[Any]) -> str | None:
    """The first non-empty cell as text, or None when the row is blank."""
    for cell in cells:
        if cell is None:
            continue
        text = cell.strip() if isinstance(cell, str) else str(cell)
        if text:
            return text
    return None


def _columns(file: str, location: str, header: Sequence[str], fields: Sequence[_Field]) -> list[tuple[str, int]]:
    """(our field, index in the row) for each mapped field, from the header row's headings."""
    if len(header) > MAX_COLUMNS:
        raise ImportFileError(file, location, "(header)", f"more than {MAX_COLUMNS} columns")
    at: dict[str, int] = {}
    twice: set[str] = set()
    for index, heading in enumerate(header):
        if heading in at:
            twice.add(heading)
        at.setdefault(heading, index)
    columns: list[tuple[str, int]] = []
    for name, heading, may_be_absent in fields:
        if heading not in at:
            if may_be_absent:
                continue
            found = [h for h in header if h]
            shown = ", ".join(repr(h) for h in found[:MAX_HEADINGS_SHOWN])
            more = f" and {len(found) - MAX_HEADINGS_SHOWN} more" if len(found) > MAX_HEADINGS_SHOWN else ""
            raise ImportFileError(
                file,
                location,
                heading,
                f"column heading not found (the mapping's {name}); the header row has {shown or 'no headings'}{more}",
            )
        if heading in twice:
            raise ImportFileError(file, location, heading, f"two columns have this heading: which one is {name}?")
        columns.append((name, at[heading]))
    return columns


# --- CSV ----------------------------------------------------------------------------------------------------------


def _python_encoding(layout: TableLayout) -> str:
    return "utf-8-sig" if layout.encoding in ("utf-8", "utf-8-sig") else layout.encoding


def _csv_rows(path: Path, layout: TableLayout, fields: Sequence[_Field], skip: _Skip) -> Iterator[TableRow]:
    file = path.name
    encoding = _python_encoding(layout)
    try:
        with path.open("rb") as probe:
            start = probe.read(len(_UTF8_BOM))
    except OSError as exc:
        raise ImportFileError(file, "", "(file)", f"cannot read: {exc.strerror or exc}") from None
    if start == _UTF8_BOM and encoding != "utf-8-sig":
        raise ImportFileError(
            file, "line 1", "(encoding)", f"starts with a UTF-8 byte order mark, but the mapping says {layout.encoding}"
        )
    return _csv_records(path, layout, fields, skip, encoding)


def _csv_records(
    path: Path, layout: TableLayout, fields: Sequence[_Field], skip: _Skip, encoding: str
) -> Iterator[TableRow]:
    file = path.name
    line = 1
    try:
        with path.open(encoding=encoding, errors="strict", newline="") as handle:
            reader = csv.reader(handle, delimiter=layout.delimiter, strict=True)
            try:
                columns: list[tuple[str, int]] | None = None
                width = 0
                header_line = 0
                for record, cells in enumerate(reader, start=1):
                    if record > MAX_ROWS:
                        raise ImportFileError(file, f"line {line}", "(file)", f"more than {MAX_ROWS} rows")
                    number, line = line, reader.line_num + 1
                    if columns is None:
                        if record == layout.header_row:
                            header = [cell.strip() for cell in cells]
                            columns = _columns(file, f"line {number}", header, fields)
                            width, header_line = len(cells), number
                        continue
                    lead = cells[0] if cells else ""
                    first = lead if lead and not lead[0].isspace() else _first_filled(cells)
                    if first is None or skip(first):
                        continue
                    if len(cells) != width:
                        raise ImportFileError(
                            file,
                            f"line {number}",
                            "(row)",
                            f"expected {width} fields like the header on line {header_line}, found {len(cells)}"
                            f" (is the delimiter {layout.delimiter!r} right?)",
                        )
                    values: dict[str, Cell] = {name: cells[index].strip() or None for name, index in columns}
                    yield TableRow(number, values, f"line {number}")
            except csv.Error as exc:
                raise ImportFileError(file, f"line {reader.line_num}", "(csv)", f"malformed CSV: {exc}") from None
            if columns is None:
                raise ImportFileError(
                    file, "", "(header)", f"no header row: expected the column headings on line {layout.header_row}"
                )
    except UnicodeDecodeError:
        bad_line, offset, byte = _decoding_error(path, encoding)
        raise ImportFileError(
            file,
            f"line {bad_line}",
            "(encoding)",
            f"not valid {layout.encoding}: byte 0x{byte:02x} at offset {offset} (is the mapping's encoding right?)",
        ) from None
    except OSError as exc:
        raise ImportFileError(file, "", "(file)", f"cannot read: {exc.strerror or exc}") from None


def _decoding_error(path: Path, encoding: str) -> tuple[int, int, int]:
    """(line, byte offset, byte) of the first byte `encoding` cannot decode; read again only once decoding failed."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    line, offset = 1, 0
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                # exc.start indexes the decoder's buffer: bytes held over from the last chunk, then this chunk
                held = len(exc.object) - len(chunk)
                at = max(exc.start - held, 0)
                return line + chunk.count(b"\n", 0, at), offset + at, chunk[at] if at < len(chunk) else 0
            line += chunk.count(b"\n")
            offset += len(chunk)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:  # the file ends inside a multi-byte character
        return line, offset - len(exc.object) + exc.start, exc.object[exc.start]
    return line, offset, 0


# --- XLSX ---------------------------------------------------------------------------------------------------------


def _xlsx_cell(value: object) -> Cell:
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))  # the shortest text that reads back as this float: 1234.56 -> "1234.56"
    return str(value)


def _heading(value: object) -> str:
    cell = _xlsx_cell(value)
    if isinstance(cell, date):
        return cell.isoformat()
    return "" if cell is None else str(cell)


def _xlsx_rows(path: Path, layout: TableLayout, fields: Sequence[_Field], skip: _Skip) -> Iterator[TableRow]:
    from openpyxl import load_workbook

    file = path.name
    try:
        workbook = load_workbook(path, read_only=True, data_only=True)
    except OSError as exc:
        raise ImportFileError(file, "", "(file)", f"cannot read: {exc.strerror or exc}") from None
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError) as exc:
        raise ImportFileError(file, "", "(file)", f"not a readable XLSX workbook ({exc})") from None
    try:
        if layout.sheet is None:
            sheet = workbook.worksheets[0]
        elif layout.sheet in workbook.sheetnames:
            sheet = workbook[layout.sheet]
        else:
            names = ", ".join(repr(name) for name in workbook.sheetnames)
            raise ImportFileError(file, "", "(sheet)", f"no sheet named {layout.sheet!r}; the workbook has {names}")
    except BaseException:
        workbook.close()
        raise
    return _sheet_rows(workbook, sheet, file, layout, fields, skip)


def _sheet_rows(
    workbook: Any, sheet: Any, file: str, layout: TableLayout, fields: Sequence[_Field], skip: _Skip
) -> Iterator[TableRow]:
    title = sheet.title
    try:
        columns: list[tuple[str, int]] | None = None
        width = 0
        for number, cells in enumerate(sheet.iter_rows(values_only=True), start=1):
            if number > MAX_ROWS:
                raise ImportFileError(file, f"sheet {title}", "(sheet)", f"more than {MAX_ROWS} rows")
            location = f"sheet {title}, row {number}"
            if columns is None:
                if number == layout.header_row:
                    header = [_heading(cell) for cell in cells]
                    while header and not header[-1]:
                        header.pop()
                    columns = _columns(file, location, header, fields)
                    width = len(header)
                continue
            first = _first_filled(cells)
            if first is None or skip(first):
                continue
            beyond = next((index for index in range(width, len(cells)) if _xlsx_cell(cells[index]) is not None), None)
            if beyond is not None:
                raise ImportFileError(
                    file,
                    location,
                    "(row)",
                    f"a value in column {beyond + 1}, right of the last heading (column {width})",
                )
            values = {name: _xlsx_cell(cells[index]) if index < len(cells) else None for name, index in columns}
            yield TableRow(number, values, location)
        if columns is None:
            raise ImportFileError(
                file,
                f"sheet {title}",
                "(header)",
                f"no header row: expected the column headings on row {layout.header_row}",
            )
    finally:
        workbook.close()


# --- cells as values ----------------------------------------------------------------------------------------------

_SPACE_CHARS = " \u00a0\u202f"  # a space as thousands separator also matches no-break spaces (French amounts)
MAX_TEXT_CHARS = 512  # the book tables' text columns (countersign/engine/books.py MAX_FIELD_CHARS)
_DATE_CACHE_ENTRIES = 4096


class Cells:
    """A row's cells read as text, amounts and dates the way `layout` writes them; errors name the row and heading."""

    def __init__(self, file: str, layout: TableLayout) -> None:
        self.file = file
        self.layout = layout
        self._dates: dict[str, date] = {}
        separator = layout.thousands_separator
        self._thousands = _SPACE_CHARS if separator == " " else separator
        group = "[ \u00a0\u202f]" if separator == " " else re.escape(separator)
        self._grouped = re.compile(rf"[0-9]{{1,3}}(?:{group}[0-9]{{3}})+")
        whole = rf"[0-9]{{1,3}}(?:{group}[0-9]{{3}})+|[0-9]+" if separator else "[0-9]+"
        self._plain = re.compile(rf"(-?)({whole})(?:{re.escape(layout.decimal_separator)}([0-9]{{1,2}}))?(-?)")
        self._ungroup = str.maketrans("", "", self._thousands)

    def fail(self, row: TableRow, name: str, reason: str) -> ImportFileError:
        return ImportFileError(self.file, row.location, self.layout.columns.get(name, name), reason)

    def text(self, row: TableRow, name: str, *, required: bool = False) -> str:
        """The cell as text ("" when empty or unmapped); a required one must not be empty."""
        value = row.values.get(name)
        if value is None:
            if required:
                raise self.fail(row, name, f"is empty: expected the {name.replace('_', ' ')}")
            return ""
        if isinstance(value, str):
            text = value
        elif isinstance(value, Decimal):
            text = str(int(value)) if value == value.to_integral_value() else str(value)
        else:
            text = value.isoformat()
        if len(text) > MAX_TEXT_CHARS:
            raise self.fail(row, name, f"longer than {MAX_TEXT_CHARS} characters")
        if "\x00" in text:
            raise self.fail(row, name, "contains a NUL character")
        return text

    def amount(self, row: TableRow, name: str) -> Decimal | None:
        """The cell as an amount to the cent, None when empty."""
        value = row.values.get(name)
        if value is None:
            return None
        try:
            if isinstance(value, str):
                plain = self._plain.fullmatch(value)
                if plain is not None and not (plain[1] and plain[4]):
                    # the usual shape (`-1.234,56`, `1234,5`, `12,00-`) read directly; anything else, and every
                    # mistake, goes the long way through parse_amount and its reasons
                    whole = plain[2].translate(self._ungroup) if self._thousands else plain[2]
                    amount = Decimal(f"{'-' if plain[1] or plain[4] else ''}{whole}.{plain[3] or '0'}")
                    return checked_amount(amount, value)
                _check_one_sign(value)
                if self._thousands and any(char in value for char in self._thousands):
                    self._check_grouping(value)
                return parse_amount(
                    value,
                    decimal_separator=self.layout.decimal_separator,
                    thousands_separator=self.layout.thousands_separator,
                )
            if isinstance(value, Decimal):
                amount = checked_amount(value, value)
                if amount != amount.to_integral_value() and len(amount.as_tuple().digits) > XLSX_DIGITS:
                    raise ValueError(
                        f"expected at most {XLSX_DIGITS} significant digits in a number cell (a spreadsheet number"
                        f" holds no more), found {value}: store amounts this large as text"
                    )
                return amount
        except ValueError as exc:
            raise self.fail(row, name, str(exc)) from None
        raise self.fail(row, name, f"expected an amount, found the date {value.isoformat()}")

    def _check_grouping(self, raw: str) -> None:
        """Thousands separators only between groups of three digits before the decimal separator: with "." as the
        thousands separator, "980.00" is a mistake (a point-decimal amount), not 98000."""
        core = raw.strip().removeprefix("(").removesuffix(")").strip().removesuffix("-").strip()
        core = core.removeprefix("-").removeprefix("+").strip()
        whole, _, fraction = core.partition(self.layout.decimal_separator)
        if any(char in fraction for char in self._thousands) or (
            any(char in whole for char in self._thousands) and not self._grouped.fullmatch(whole)
        ):
            shown = "space" if self.layout.thousands_separator == " " else repr(self.layout.thousands_separator)
            raise ValueError(
                f"expected the thousands separator {shown} only between groups of three digits before the decimal"
                f" separator {self.layout.decimal_separator!r}, like {_example_amount(self.layout)}, found {raw!r}"
            )

    def date(self, row: TableRow, name: str, *, required: bool = False) -> date | None:
        """The cell as a date (text in the layout's date_format, or an XLSX date cell), None when empty."""
        value = row.values.get(name)
        if value is None:
            if required:
                raise self.fail(row, name, f"is empty: expected a date like {_example(self.layout.date_format)}")
            return None
        if isinstance(value, date):
            return value
        if isinstance(value, Decimal):
            raise self.fail(
                row, name, f"expected a date, found the number {value} (is the column formatted as a date?)"
            )
        known = self._dates.get(value)
        if known is not None:
            return known
        try:
            parsed = parse_date(value, self.layout.date_format)
        except ValueError as exc:
            raise self.fail(row, name, str(exc)) from None
        if len(self._dates) >= _DATE_CACHE_ENTRIES:
            self._dates.clear()
        self._dates[value] = parsed
        return parsed


def _check_one_sign(raw: str) -> None:
    """At most one of a leading sign, a trailing minus and parentheses: parse_amount reads "-12.00-" and "(-12.00)"
    as +12.00, two negations cancelling, where a file that writes so means something we cannot know."""
    text = raw.strip()
    parenthesised = text.startswith("(") and text.endswith(")")
    core = text[1:-1].strip() if parenthesised else text
    signs = parenthesised + core.startswith(("-", "+")) + core.endswith("-")
    if signs > 1:
        raise ValueError(f"expected one sign (a leading -, a trailing - or parentheses), found {raw!r}")


def _example_amount(layout: TableLayout) -> str:
    return f"1{layout.thousands_separator}234{layout.decimal_separator}56"


def _example(date_format: str) -> str:
    return date(2026, 11, 30).strftime(date_format)
