"""A text PDF of a valuation table as rows of cell text, located by the words' positions on the page.

pdfplumber gives each word with its box. Words on one baseline are one row; a gap wider than `CELL_GAP_PT` between
two words starts a new cell, so "Retention held      1,234.00" is two cells. Under a section's row of column names,
each cell is put in the column whose span (from its name to the next name) it overlaps most, so an empty cell keeps
the others in their columns. A PDF with no text layer (a scan) is refused naming its first page: nothing is guessed
from pictures.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from countersign.applications.errors import ApplicationError
from countersign.applications.layout import SECTION_TITLES, TABLES, loose
from countersign.applications.tabular import MAX_ROWS, Row

CELL_GAP_PT = 6.0
"""Wider than a space between two words at any ordinary type size, narrower than a table's column gap."""
SAME_LINE_PT = 3.0
MAX_PAGES = 200
_TABLE_TITLES = frozenset(loose(section.title) for section in TABLES)


@dataclass(frozen=True)
class _Cell:
    x0: float
    x1: float
    text: str


def _lines(words: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Words grouped into lines (tops within SAME_LINE_PT), top to bottom, each left to right."""
    lines: list[list[dict[str, Any]]] = []
    for word in sorted(words, key=lambda w: (float(w["top"]), float(w["x0"]))):
        if lines and abs(float(lines[-1][0]["top"]) - float(word["top"])) <= SAME_LINE_PT:
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line, key=lambda w: float(w["x0"])) for line in lines]


def _cells(line: Sequence[dict[str, Any]]) -> list[_Cell]:
    cells: list[_Cell] = []
    for word in line:
        x0, x1, text = float(word["x0"]), float(word["x1"]), str(word["text"])
        if cells and x0 - cells[-1].x1 <= CELL_GAP_PT:
            last = cells[-1]
            cells[-1] = _Cell(last.x0, x1, f"{last.text} {text}")
        else:
            cells.append(_Cell(x0, x1, text))
    return cells


def _in_columns(cells: Sequence[_Cell], heading: Sequence[_Cell]) -> tuple[str, ...]:
    """Each cell in the column whose span it overlaps most (spans run from one column name to the next)."""
    starts = [column.x0 for column in heading]
    spans = [(start, starts[i + 1] if i + 1 < len(starts) else float("inf")) for i, start in enumerate(starts)]
    placed: list[list[str]] = [[] for _ in heading]

    def overlap(cell: _Cell, span: tuple[float, float]) -> float:
        return min(cell.x1, span[1]) - max(cell.x0, span[0])

    for cell in cells:
        best = max(range(len(spans)), key=lambda i: overlap(cell, spans[i]))
        placed[best].append(cell.text)
    return tuple(" ".join(texts) for texts in placed)


def pdf_rows(path: Path, raw: bytes) -> tuple[list[Row], str]:
    """The document's rows ("page N, row '<first cell>'") and its extent ("page 1" or "pages 1-3")."""
    import pdfplumber

    try:
        document = pdfplumber.open(io.BytesIO(raw))
    except Exception as exc:  # pdfminer raises its own syntax errors for a file that is not a PDF
        raise ApplicationError(path.name, "", "(file)", f"not a readable PDF ({type(exc).__name__})") from None
    rows: list[Row] = []
    with document:
        pages = document.pages
        if not pages:
            raise ApplicationError(path.name, "", "(file)", "the PDF has no pages")
        if len(pages) > MAX_PAGES:
            raise ApplicationError(path.name, "", "(file)", f"more than {MAX_PAGES} pages")
        heading: list[_Cell] | None = None
        expect_heading = False
        any_text = False
        for number, page in enumerate(pages, start=1):
            try:
                words = page.extract_words()
            except Exception as exc:  # a damaged content stream
                raise ApplicationError(path.name, f"page {number}", "(page)", f"unreadable ({exc})") from None
            any_text = any_text or bool(words)
            for line in _lines(words):
                cells = _cells(line)
                title = SECTION_TITLES.get(loose(cells[0].text)) if len(cells) == 1 else None
                if title is not None:
                    heading, expect_heading = None, loose(title) in _TABLE_TITLES
                    texts: tuple[str, ...] = (cells[0].text,)
                elif expect_heading:
                    heading, expect_heading = cells, False
                    texts = tuple(cell.text for cell in cells)
                elif heading is not None:
                    texts = _in_columns(cells, heading)
                else:
                    texts = tuple(cell.text for cell in cells)
                rows.append(Row(f"page {number}, row {cells[0].text!r}", texts))
                if len(rows) > MAX_ROWS:
                    raise ApplicationError(path.name, f"page {number}", "(file)", f"more than {MAX_ROWS} rows")
        if not any_text:
            raise ApplicationError(
                path.name, "page 1", "(text)", "no text layer (a scanned image?): the figures cannot be located"
            )
        extent = "page 1" if len(pages) == 1 else f"pages 1-{len(pages)}"
    return rows, extent
