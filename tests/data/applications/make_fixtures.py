"""Writes the pay-application test files beside this script: contracts.json, app.csv (certificate 1), app.xlsx
(certificate 2 on sheet "Valuation 2", after a "Notes" sheet the reader skips) and valuation.pdf (certificate 3, its
totals on page 2). Run it from the repository root: `python tests/data/applications/make_fixtures.py`.

The three certificates are one contract's first three months, hand-written so that every check passes: a surveyor's
figures with thousands separators, a variation carried forward, retention at 5 %. Tests build bad variants from the
same rows (`certificate_rows`) in their own temporary directories.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXED_TIME = datetime(2025, 7, 1, 9, 0, 0)

CONTRACT: dict[str, Any] = {
    "id": "CT-100",
    "form": "CSB",
    "title": "Riverside depot refurbishment",
    "contractor": {"vendor_id": "V-100", "name": "Harbour Build Ltd"},
    "currency": "GBP",
    "start_period": "2025-04",
    "boq": [
        {"id": "L01", "package": "P1", "description": "Strip out", "unit": "m2", "quantity": "400.00", "rate": "12.50"},
        {"id": "L02", "package": "P1", "description": "Blockwork", "unit": "m2", "quantity": "250.00", "rate": "48.00"},
        {
            "id": "L03",
            "package": "P2",
            "description": "Roof covering",
            "unit": "m2",
            "quantity": "300.00",
            "rate": "65.00",
        },
    ],
    "rate_versions": [
        {"version": "R1", "effective_from": "2025-04-01", "rates": {"L01": "12.50", "L02": "48.00", "L03": "65.00"}}
    ],
    "retention": {
        "rate": "0.05",
        "cap": "5000.00",
        "release_at_practical_completion": "0.5",
        "defects_period_months": 12,
    },
    "advance": {"amount": "0.00", "start_pct": "0.10", "rate": "0.20", "repaid_by_pct": "0.85"},
    "packages": [
        {"id": "P1", "name": "Internal works", "scope": {"L01": "a1f0c3d2e4b5a6c7", "L02": "b2e1d4c3f5a6b7d8"}},
        {"id": "P2", "name": "Roof", "scope": {"L03": "c3d2e5f4a6b7c8e9"}},
    ],
    "practical_completion": None,
    "clause_refs": {},
}
CONTRACTS: dict[str, Any] = {
    "schema": "countersign.construction-contracts/1",
    "currency": "GBP",
    "contracts": [CONTRACT],
}

RATES = {"L01": Decimal("12.50"), "L02": Decimal("48.00"), "L03": Decimal("65.00")}
# certificate number -> (date, quantities to date per line, variations to date)
MONTHS: dict[int, tuple[str, dict[str, Decimal], list[tuple[str, str, str, Decimal]]]] = {
    1: ("2025-04-28", {"L01": Decimal(400), "L02": Decimal(50), "L03": Decimal(0)}, []),
    2: (
        "2025-05-28",
        {"L01": Decimal(400), "L02": Decimal(150), "L03": Decimal(100)},
        [("VO-01", "AI-003", "Additional lintels", Decimal("1250.00"))],
    ),
    3: (
        "2025-06-27",
        {"L01": Decimal(400), "L02": Decimal(250), "L03": Decimal(220)},
        [("VO-01", "AI-003", "Additional lintels", Decimal("1250.00"))],
    ),
}


def money(value: Decimal) -> str:
    return f"{value:,.2f}"


def _net(number: int) -> Decimal:
    _, quantities, variations = MONTHS[number]
    gross = sum((quantities[line] * RATES[line] for line in RATES), Decimal(0)) + sum(
        (v[3] for v in variations), Decimal(0)
    )
    return gross - (gross * Decimal("0.05")).quantize(Decimal("0.01"))


def certificate_rows(number: int) -> list[list[Any]]:
    """Certificate `number` of CT-100 as the rows a surveyor's sheet holds (figures as people write them)."""
    day, quantities, variations = MONTHS[number]
    previous = MONTHS[number - 1][1] if number > 1 else {line: Decimal(0) for line in RATES}
    work = sum((quantities[line] * RATES[line] for line in RATES), Decimal(0))
    varied = sum((v[3] for v in variations), Decimal(0))
    gross = work + varied
    retention = (gross * Decimal("0.05")).quantize(Decimal("0.01"))
    net = gross - retention
    before = _net(number - 1) if number > 1 else Decimal(0)
    rows: list[list[Any]] = [
        ["Payment application"],
        ["Contract", "CT-100"],
        ["Certificate", f"IPC-CT100-{number:03d}"],
        ["Number", str(number)],
        ["Period", day[:7]],
        ["Date", f"{day[8:10]}/{day[5:7]}/{day[:4]}"],
        ["Invoice", f"HB/2025/{number:04d}"],
        ["Vendor", "Harbour Build Ltd"],
        ["Description", f"Interim valuation {number}: Riverside depot"],
        [],
        ["Measured work"],
        ["BoQ line", "Description", "Quantity to date", "Value to date", "Previous quantity", "Previous value"],
    ]
    descriptions = {"L01": "Strip out", "L02": "Blockwork", "L03": "Roof covering"}
    for line in RATES:
        rows.append(
            [
                line,
                descriptions[line],
                money(quantities[line]),
                money(quantities[line] * RATES[line]),
                money(previous[line]),
                money(previous[line] * RATES[line]),
            ]
        )
    rows.append([])
    if variations:
        rows += [["Variations"], ["Variation", "Instruction", "Description", "Amount"]]
        rows += [[vid, ref, text, money(amount)] for vid, ref, text, amount in variations]
        rows.append([])
    package_totals = {
        "P1": quantities["L01"] * RATES["L01"] + quantities["L02"] * RATES["L02"],
        "P2": quantities["L03"] * RATES["L03"],
    }
    rows += [["Packages"], ["Package", "Value to date"]]
    rows += [[package, money(value)] for package, value in package_totals.items()]
    rows.append([])
    rows += [
        ["Totals"],
        ["Work to date", money(work)],
        ["Variations to date", money(varied)],
        ["Materials on site", money(Decimal(0))],
        ["Gross", money(gross)],
        ["Retention deducted", money(retention)],
        ["Retention released", money(Decimal(0))],
        ["Retention held", money(retention)],
        ["Advance repaid", money(Decimal(0))],
        ["Net to date", money(net)],
        ["Previously certified", money(before)],
        ["Amount due", money(net - before)],
    ]
    return rows


def write_contracts(path: Path) -> None:
    path.write_text(json.dumps(CONTRACTS, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def write_csv(path: Path, rows: list[list[Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows(rows)


def _spreadsheet_value(text: Any) -> Any:
    """Figures as number cells and the date as a date cell, as a spreadsheet holds them."""
    if isinstance(text, str) and text.count("/") == 2 and text.replace("/", "").isdigit():
        day, month, year = (int(part) for part in text.split("/"))
        return datetime(year, month, day)
    if isinstance(text, str) and text.replace(",", "").replace(".", "", 1).lstrip("-").isdigit() and "." in text:
        return float(text.replace(",", ""))  # a spreadsheet's number cell: the reader must not do float arithmetic
    return text


def write_xlsx(path: Path, sheets: list[tuple[str, list[list[Any]]]], *, notes: bool = True) -> None:
    from openpyxl import Workbook

    workbook = Workbook()
    first = workbook.active
    assert first is not None
    if notes:
        first.title = "Notes"
        first.append(["Prepared by the site QS; figures in GBP."])
    else:
        workbook.remove(first)
    for name, rows in sheets:
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append([_spreadsheet_value(cell) for cell in row])
    workbook.properties.created = FIXED_TIME
    workbook.properties.modified = FIXED_TIME
    workbook.save(path)


def write_pdf(
    path: Path, rows: list[list[Any]], *, break_before: str | None = "Totals", align_right: bool = False
) -> None:
    """A valuation table as text: labels and figures at fixed columns, as a surveyor's report prints them
    (`align_right`: every cell after the first right-aligned in its column, headings included)."""
    from fpdf import FPDF

    pdf = FPDF(orientation="landscape", unit="pt", format="A4")
    pdf.set_creation_date(FIXED_TIME)
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    column_pt = 120.0
    in_table = False
    for row in rows:
        if not row:
            pdf.ln(8)
            continue
        if len(row) == 1 and row[0] == break_before:
            pdf.add_page()
        if len(row) == 1:
            in_table = row[0] not in ("Payment application", "Totals")
            pdf.set_font("Helvetica", style="B", size=10)
            pdf.cell(text=str(row[0]), new_x="LMARGIN", new_y="NEXT", h=14)
            pdf.set_font("Helvetica", size=9)
            continue
        width = column_pt if in_table else 160.0
        for index, cell in enumerate(row):
            pdf.set_x(pdf.l_margin + index * width)
            pdf.cell(w=width - 10, h=12, text=str(cell), align="R" if align_right and index else "L")
        pdf.ln(12)
    pdf.output(str(path))


def write_fixtures(out: Path) -> None:
    write_contracts(out / "contracts.json")
    write_csv(out / "app.csv", certificate_rows(1))
    write_xlsx(out / "app.xlsx", [("Valuation 2", certificate_rows(2))])
    write_pdf(out / "valuation.pdf", certificate_rows(3))


if __name__ == "__main__":
    write_fixtures(HERE)
    print(f"wrote contracts.json, app.csv, app.xlsx and valuation.pdf beside {Path(__file__).name}")
