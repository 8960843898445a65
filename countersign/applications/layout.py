"""The documented layout of a pay application in a CSV file, an XLSX sheet or a PDF (docs/pay-applications.md).

A title row `Payment application`, then header rows (a label, then its value), then sections: a row with the
section's title, a row of column names, one row per item, until a blank row or the next section. `Totals` holds
label/value rows. Labels and column names are matched without regard to case, spaces, underscores or a trailing
colon. Columns a table does not know (Description, Unit, Rate...) are allowed and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

TITLE = "Payment application"


class Figure(StrEnum):
    """How a cell's text becomes the JSON record's value."""

    TEXT = "text"
    AMOUNT = "amount"
    QUANTITY = "quantity"
    DATE = "date"
    PERIOD = "period"
    WHOLE = "whole"


@dataclass(frozen=True)
class Field:
    label: str
    """As a person writes it in the file (matched loosely)."""
    key: str
    """The JSON record's key."""
    figure: Figure
    required: bool = True


HEADER: tuple[Field, ...] = (
    Field("Contract", "contract", Figure.TEXT),
    Field("Certificate", "id", Figure.TEXT),
    Field("Number", "number", Figure.WHOLE),
    Field("Period", "period", Figure.PERIOD),
    Field("Date", "date", Figure.DATE),
    Field("Invoice", "invoice_number", Figure.TEXT),
    Field("Vendor", "vendor", Figure.TEXT),
    Field("Description", "description", Figure.TEXT),
    Field("Supersedes", "supersedes", Figure.TEXT, required=False),
)


@dataclass(frozen=True)
class Section:
    title: str
    key: str
    """The JSON record's list this section fills."""
    columns: tuple[Field, ...]
    required: bool = False


MEASURED_WORK = Section(
    "Measured work",
    "lines",
    (
        Field("BoQ line", "boq_line", Figure.TEXT),
        Field("Quantity to date", "quantity_to_date", Figure.QUANTITY),
        Field("Value to date", "value_to_date", Figure.AMOUNT),
        Field("Previous quantity", "previous_quantity", Figure.QUANTITY),
        Field("Previous value", "previous_value", Figure.AMOUNT),
        Field("Package", "package", Figure.TEXT, required=False),
        Field("Scope hash", "scope_hash", Figure.TEXT, required=False),
    ),
    required=True,
)
VARIATIONS = Section(
    "Variations",
    "variations",
    (
        Field("Variation", "id", Figure.TEXT),
        Field("Instruction", "instruction_ref", Figure.TEXT, required=False),
        Field("Description", "description", Figure.TEXT),
        Field("Amount", "amount", Figure.AMOUNT),
        Field("BoQ line", "boq_line", Figure.TEXT, required=False),
        Field("Quantity change", "quantity_change", Figure.QUANTITY, required=False),
        Field("Reverses", "reverses", Figure.TEXT, required=False),
        Field("Limit", "limit", Figure.AMOUNT, required=False),
    ),
)
MATERIALS = Section(
    "Materials on site",
    "materials_on_site",
    (
        Field("Item", "id", Figure.TEXT),
        Field("BoQ line", "boq_line", Figure.TEXT),
        Field("Description", "description", Figure.TEXT),
        Field("Quantity", "quantity", Figure.QUANTITY),
        Field("Amount", "amount", Figure.AMOUNT),
    ),
)
RETENTION_RELEASES = Section(
    "Retention releases",
    "retention_releases",
    (Field("Event", "event", Figure.TEXT), Field("Amount", "amount", Figure.AMOUNT)),
)
PACKAGES = Section(
    "Packages",
    "packages",
    (Field("Package", "package", Figure.TEXT), Field("Value to date", "value_to_date", Figure.AMOUNT)),
)
TABLES: tuple[Section, ...] = (MEASURED_WORK, VARIATIONS, MATERIALS, RETENTION_RELEASES, PACKAGES)

TOTALS_TITLE = "Totals"
TOTALS: tuple[Field, ...] = (
    Field("Work to date", "work_to_date", Figure.AMOUNT),
    Field("Variations to date", "variations_to_date", Figure.AMOUNT),
    Field("Materials on site", "materials_on_site", Figure.AMOUNT),
    Field("Gross", "gross", Figure.AMOUNT),
    Field("Retention deducted", "retention_deducted", Figure.AMOUNT),
    Field("Retention released", "retention_released", Figure.AMOUNT),
    Field("Retention held", "retention_held", Figure.AMOUNT),
    Field("Advance repaid", "advance_repaid", Figure.AMOUNT),
    Field("Net to date", "net_to_date", Figure.AMOUNT),
    Field("Previously certified", "previously_certified", Figure.AMOUNT),
    Field("Amount due", "amount_due", Figure.AMOUNT),
)


def loose(label: str) -> str:
    """A label as matched: case, spaces, underscores, hyphens and a trailing colon ignored."""
    return "".join(ch for ch in label.casefold().rstrip(":").strip() if ch.isalnum())


SECTION_TITLES: dict[str, str] = {loose(s.title): s.title for s in TABLES} | {loose(TOTALS_TITLE): TOTALS_TITLE}
