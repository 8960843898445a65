"""Rows of cells (from a CSV file, an XLSX sheet or a PDF's text) -> one certificate's JSON record, with `sources`.

The layout is `countersign.applications.layout`'s. Every figure keeps where it came from: the record's `sources` maps
its field
path (`totals.amount_due`, `lines[2].quantity_to_date`) to "<file>, <place>". The contract supplies what a
surveyor's sheet does not carry: each bill line's package and scope hash. A bad cell raises ApplicationError naming
the file, the row and the field; the finished record is parsed by the domain's own `parse_certificate`, whose
refusal is traced back to the row the field came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from countersign.applications.errors import ApplicationError
from countersign.applications.figures import decimal_text, iso_date, period_text, whole_number
from countersign.applications.layout import (
    HEADER,
    MEASURED_WORK,
    PACKAGES,
    SECTION_TITLES,
    TABLES,
    TITLE,
    TOTALS,
    TOTALS_TITLE,
    Field,
    Figure,
    Section,
    loose,
)
from countersign.certificates import CertificateDataError, Contract, parse_certificate

MAX_ROWS = 100_000


@dataclass(frozen=True)
class Row:
    place: str
    """Where the row is in its file: "row 12", "sheet Summary, row 12", "page 2, row 'Retention held'"."""
    cells: tuple[str, ...]

    @property
    def blank(self) -> bool:
        return not any(self.cells)

    @property
    def filled(self) -> tuple[str, ...]:
        return tuple(cell for cell in self.cells if cell)


def _convert(text: str, figure: Figure) -> str | int:
    if figure in (Figure.AMOUNT, Figure.QUANTITY):
        return decimal_text(text)
    if figure == Figure.DATE:
        return iso_date(text)
    if figure == Figure.PERIOD:
        return period_text(text)
    if figure == Figure.WHOLE:
        return whole_number(text)
    return text.strip()


def _section_title(row: Row) -> str | None:
    """The section a row opens: one filled cell naming a section."""
    filled = row.filled
    return SECTION_TITLES.get(loose(filled[0])) if len(filled) == 1 else None


class _Reader:
    def __init__(self, rows: Sequence[Row], file: str, extent: str) -> None:
        if len(rows) > MAX_ROWS:
            raise ApplicationError(file, extent, "(file)", f"more than {MAX_ROWS} rows")
        self.rows = rows
        self.file = file
        self.extent = extent
        self.at = 0
        self.sources: dict[str, str] = {}

    def fail(self, place: str, field: str, reason: str) -> ApplicationError:
        return ApplicationError(self.file, place, field, reason)

    def source(self, path: str, row: Row) -> None:
        self.sources[path] = f"{self.file}, {row.place}"

    def value(self, row: Row, text: str, field: Field, name: str) -> str | int:
        try:
            return _convert(text, field.figure)
        except ValueError as exc:
            raise self.fail(row.place, name, str(exc)) from None

    def next_filled(self) -> Row | None:
        while self.at < len(self.rows) and self.rows[self.at].blank:
            self.at += 1
        return self.rows[self.at] if self.at < len(self.rows) else None

    def read(self) -> tuple[dict[str, Any], dict[str, Row]]:
        first = self.next_filled()
        if first is None:
            raise self.fail(self.extent, "(file)", "is empty: no pay application in it")
        if len(first.filled) != 1 or loose(first.filled[0]) != loose(TITLE):
            raise self.fail(
                first.place, "(title)", f"expected the title 'Payment application', got {first.filled[0]!r}"
            )
        self.at += 1
        record: dict[str, Any] = {}
        places: dict[str, Row] = {}  # header key -> its row
        self.header(record, places)
        seen: set[str] = set()
        while (row := self.next_filled()) is not None:
            title = _section_title(row)
            if title is None:
                raise self.fail(row.place, "(section)", f"expected a section title, got {row.filled[0]!r}")
            if title in seen:
                raise self.fail(row.place, "(section)", f"section {title!r} appears twice")
            seen.add(title)
            self.at += 1
            if title == TOTALS_TITLE:
                record["totals"] = self.totals(row)
            else:
                section = next(s for s in TABLES if s.title == title)
                record[section.key] = self.table(section, row)
        for section in TABLES:
            if section.title not in seen and section.required:
                raise self.fail(self.extent, section.title, "section not found")
        if TOTALS_TITLE not in seen:
            raise self.fail(self.extent, TOTALS_TITLE, "section not found: the totals rows are missing")
        return record, places

    def header(self, record: dict[str, Any], places: dict[str, Row]) -> None:
        known = {loose(f.label): f for f in HEADER}
        while (row := self.next_filled()) is not None and _section_title(row) is None:
            self.at += 1
            label = row.cells[0] if row.cells else ""
            field = known.get(loose(label))
            if field is None:
                raise self.fail(row.place, label or "(label)", "not a header field (" + _labels(HEADER) + ")")
            if field.key in record:
                raise self.fail(row.place, field.label, "given twice")
            text = next((cell for cell in row.cells[1:] if cell), "")
            if not text:
                if field.required:
                    raise self.fail(row.place, field.label, "is empty")
                continue
            record[field.key] = self.value(row, text, field, field.label)
            places[field.key] = row
            self.source(field.key, row)
        for field in HEADER:
            if field.required and field.key not in record:
                raise self.fail(self.extent, field.label, "header row missing")

    def table(self, section: Section, title_row: Row) -> list[dict[str, Any]]:
        heading = self.next_filled()
        if heading is None or _section_title(heading) is not None:
            raise self.fail(title_row.place, section.title, "expected a row of column names after the title")
        self.at += 1
        known = {loose(f.label): f for f in section.columns}
        columns: dict[str, int] = {}
        for index, name in enumerate(heading.cells):
            field = known.get(loose(name))
            if field is not None and field.key not in columns:
                columns[field.key] = index
        for field in section.columns:
            if field.required and field.key not in columns:
                raise self.fail(heading.place, f"{field.label} ({section.title})", "column missing")
        items: list[dict[str, Any]] = []
        while self.at < len(self.rows):
            row = self.rows[self.at]
            if row.blank or _section_title(row) is not None:
                break
            self.at += 1
            item: dict[str, Any] = {}
            path = f"{section.key}[{len(items)}]"
            for field in section.columns:
                if field.key not in columns:
                    continue
                index = columns[field.key]
                text = row.cells[index] if index < len(row.cells) else ""
                name = f"{field.label} ({section.title})"
                if not text:
                    if field.required:
                        raise self.fail(row.place, name, "is empty")
                    continue
                item[field.key] = self.value(row, text, field, name)
                self.source(f"{path}.{field.key}", row)
            self.source(path, row)
            items.append(item)
        return items

    def totals(self, title_row: Row) -> dict[str, Any]:
        known = {loose(f.label): f for f in TOTALS}
        totals: dict[str, Any] = {}
        while self.at < len(self.rows):
            row = self.rows[self.at]
            if row.blank or (_section_title(row) is not None and loose(row.filled[0]) != loose("Materials on site")):
                break
            self.at += 1
            label = row.cells[0]
            field = known.get(loose(label))
            if field is None:
                raise self.fail(row.place, label or "(label)", "not a totals row (" + _labels(TOTALS) + ")")
            name = f"{field.label} ({TOTALS_TITLE})"
            if field.key in totals:
                raise self.fail(row.place, name, "given twice")
            text = next((cell for cell in row.cells[1:] if cell), "")
            if not text:
                raise self.fail(row.place, name, "is empty")
            totals[field.key] = self.value(row, text, field, name)
            self.source(f"totals.{field.key}", row)
        for field in TOTALS:
            if field.key not in totals:
                raise self.fail(title_row.place, f"{field.label} ({TOTALS_TITLE})", "totals row missing")
        return totals


def _labels(fields: Sequence[Field]) -> str:
    return "expected one of " + ", ".join(f.label for f in fields)


def certificate_record(
    rows: Sequence[Row], *, file: str, extent: str, contracts: Mapping[str, Contract]
) -> dict[str, Any]:
    """One certificate's JSON record (with `sources`) from its rows; ApplicationError names file, row and field."""
    reader = _Reader(rows, file, extent)
    record, places = reader.read()
    contract = contracts.get(record["contract"])
    if contract is None:
        raise reader.fail(places["contract"].place, "Contract", f"{record['contract']!r} is not a known contract")
    for index, line in enumerate(record.get("lines", [])):
        place = reader.sources[f"lines[{index}]"].removeprefix(f"{file}, ")
        bill_line = contract.line(line["boq_line"])
        if bill_line is None:
            raise reader.fail(place, "BoQ line (Measured work)", f"{line['boq_line']!r} is not a line of {contract.id}")
        line.setdefault("package", contract.owner_package(bill_line.id) or bill_line.package)
        line.setdefault("scope_hash", contract.scope_hash(bill_line.id) or "")
    for section in TABLES:
        record.setdefault(section.key, [])
    if not record[PACKAGES.key]:
        record[PACKAGES.key] = _derived_packages(record[MEASURED_WORK.key])
        reader.sources["packages"] = f"{file}, derived from the Measured work rows (no Packages section)"
    record["sources"] = dict(sorted(reader.sources.items()))
    try:
        parse_certificate(record, currency=contract.currency)
    except CertificateDataError as bad:
        raise reader.fail(_place_of(bad.field, reader.sources, file, extent), bad.field, bad.reason) from None
    return record


def _derived_packages(lines: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Package totals as the sum of each package's lines' value to date (exact decimals)."""
    totals: dict[str, Decimal] = {}
    for line in lines:
        totals[line["package"]] = totals.get(line["package"], Decimal(0)) + Decimal(line["value_to_date"])
    return [{"package": package, "value_to_date": f"{value:.2f}"} for package, value in sorted(totals.items())]


def _place_of(field: str, sources: Mapping[str, str], file: str, extent: str) -> str:
    """The row a domain field came from: its own source, else its nearest parent's (`lines[2].x` -> `lines[2]`)."""
    candidate = field
    while candidate:
        if candidate in sources:
            return sources[candidate].removeprefix(f"{file}, ")
        cut = max(candidate.rfind("."), candidate.rfind("["))
        candidate = candidate[:cut] if cut > 0 else ""
    return extent
