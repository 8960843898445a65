"""Tables streamed from CSV and XLSX: headings found, blank and totals rows skipped, cells as exact values."""

from __future__ import annotations

import tracemalloc
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openpyxl import Workbook

from countersign.importers.amounts import parse_amount
from countersign.importers.errors import ImportFileError
from countersign.importers.mapping import TableLayout
from countersign.importers.tabular import Cells, TableRow, read_table

TABLES = Path(__file__).resolve().parent / "data" / "tables"
QB = TableLayout(
    columns={"line_id": "Line ID", "journal_id": "Journal No.", "date": "Date", "amount": "Amount", "memo": "Memo"},
    date_format="%m/%d/%Y",
    thousands_separator=",",
)
SAP = TableLayout(
    columns={"journal_id": "Belegnummer", "debit": "Soll", "credit": "Haben", "description": "Buchungstext"},
    encoding="cp1252",
    delimiter=";",
    header_row=3,
    decimal_separator=",",
    thousands_separator=".",
)


def _error(
    path: Path, layout: TableLayout, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> ImportFileError:
    with pytest.raises(ImportFileError) as caught:
        list(read_table(path, layout, required=required, optional=optional))
    return caught.value


def test_csv_with_bom_and_crlf_reads_headings_and_trimmed_cells() -> None:
    rows = list(read_table(TABLES / "qb_gl.csv", QB, required=("journal_id", "date", "amount"), optional=("memo",)))
    assert [row.number for row in rows] == [2, 3, 4, 5, 6, 7, 8, 9]
    assert rows[0].values == {
        "journal_id": "JE-1001",
        "date": "11/02/2026",
        "amount": "1,250.00",
        "memo": "Invoice INV-0042 Northwind Traders",
    }
    assert rows[4].values["memo"] == 'Customer payment - Northwind "early"'
    assert rows[1].location == "line 3"
    assert "line_id" not in rows[0].values  # only the fields asked for


def test_cp1252_title_rows_and_a_totals_row_are_skipped() -> None:
    rows = list(
        read_table(
            TABLES / "sap_gl_export.csv", SAP, required=("journal_id", "debit", "credit"), optional=("description",)
        )
    )
    assert len(rows) == 9
    assert rows[0].number == 4  # the title and a blank row above the header on line 3
    assert rows[0].values["description"] == "Müller GmbH Rohstoffe"
    assert rows[7].values == {
        "journal_id": "1900000104",
        "debit": "45,00-",
        "credit": None,
        "description": "Storno Büromaterial 45 € (Gutschrift; Beleg 17)",
    }
    assert rows[-1].number == 12  # ";;;Total;14.669,56;..." on line 13 is not data


def test_totals_rows_are_skipped_but_words_starting_total_are_data(tmp_path: Path) -> None:
    path = tmp_path / "bank.csv"
    path.write_text(
        "Date,Description,Amount\n"
        "01/11/2026,TotalEnergies fuel,-45.00\n"
        ",,\n"
        "SUBTOTAL,,-45.00\n"
        "Grand total:,,-45.00\n"
        "Closing figures,,-45.00\n",
        encoding="utf-8",
    )
    layout = TableLayout(columns={"date": "Date", "description": "Description"}, skip_rows_starting_with=("closing",))
    rows = list(read_table(path, layout, required=("date", "description")))
    assert [(row.number, row.values["description"]) for row in rows] == [(2, "TotalEnergies fuel")]
    unskipped = list(read_table(path, TableLayout(columns=layout.columns), required=("date",)))
    assert [row.number for row in unskipped] == [2, 6]  # a control: without the prefix the last row is data


def test_a_record_spanning_lines_is_numbered_by_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "gl.csv"
    path.write_text('Journal,Memo\nJ1,"two\nlines"\nJ2,one\n', encoding="utf-8")
    rows = list(
        read_table(
            path, TableLayout(columns={"journal_id": "Journal", "memo": "Memo"}), required=("journal_id", "memo")
        )
    )
    assert [(row.number, row.values["memo"]) for row in rows] == [(2, "two\nlines"), (4, "one")]


def _ledger_workbook(path: Path) -> None:
    workbook = Workbook()
    notes = workbook.active
    assert notes is not None
    notes.title = "Notes"
    notes.append(["Exported from the ERP on 2026-12-01"])
    sheet = workbook.create_sheet("GL")
    sheet.append(["General ledger November 2026"])
    sheet.append([])
    sheet.append(["Journal", "Posted", "Account", "Amount", "Text", None])
    sheet.append(["J-1", date(2026, 11, 3), 1000, 1234.56, "Rent  "])
    sheet.append(["J-1", datetime(2026, 11, 3, 0, 0), "2000", -1234.56, None])
    sheet.append([])
    sheet.append(["J-2", date(2026, 11, 30), 1000, 0.1, "Interest"])
    sheet.append(["J-2", date(2026, 11, 30), 4000, "(0.10)", "Interest"])
    sheet.append([None, None, "Total", 0])
    workbook.save(path)


def test_xlsx_sheet_by_name_with_date_and_numeric_cells(tmp_path: Path) -> None:
    path = tmp_path / "ledger.xlsx"
    _ledger_workbook(path)
    layout = TableLayout(
        columns={"journal_id": "Journal", "date": "Posted", "account": "Account", "amount": "Amount", "text": "Text"},
        sheet="GL",
        header_row=3,
    )
    rows = list(read_table(path, layout, required=("journal_id", "date", "account", "amount", "text")))
    assert [row.number for row in rows] == [4, 5, 7, 8]
    assert rows[0].location == "sheet GL, row 4"
    assert rows[0].values == {
        "journal_id": "J-1",
        "date": date(2026, 11, 3),
        "account": Decimal(1000),
        "amount": Decimal("1234.56"),
        "text": "Rent",
    }
    assert rows[1].values["date"] == date(2026, 11, 3) and type(rows[1].values["date"]) is date
    assert rows[1].values["amount"] == Decimal("-1234.56") and rows[1].values["text"] is None
    assert rows[2].values["amount"] == Decimal("0.1")  # the float 0.1 read as the decimal it was typed as
    assert rows[3].values["amount"] == "(0.10)"


def test_xlsx_first_sheet_by_default_and_a_missing_sheet_is_named(tmp_path: Path) -> None:
    path = tmp_path / "ledger.xlsx"
    _ledger_workbook(path)
    first = list(
        read_table(path, TableLayout(columns={"note": "Exported from the ERP on 2026-12-01"}), required=("note",))
    )
    assert first == []  # the Notes sheet: a header and nothing under it
    error = _error(path, TableLayout(columns={"journal_id": "Journal"}, sheet="Hauptbuch"), ("journal_id",))
    assert str(error) == "ledger.xlsx: (sheet): no sheet named 'Hauptbuch'; the workbook has 'Notes', 'GL'"


def test_xlsx_value_right_of_the_last_heading_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.xlsx"
    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.append(["Journal", "Amount"])
    sheet.append(["J-1", 5, None, "stray"])
    workbook.save(path)
    error = _error(path, TableLayout(columns={"journal_id": "Journal"}), ("journal_id",))
    assert str(error).startswith("ledger.xlsx sheet Sheet, row 2: (row): a value in column 4")


def test_missing_heading_names_it_and_the_headings_found() -> None:
    layout = TableLayout(columns={"journal_id": "Journal No.", "amount": "Betrag"})
    error = _error(TABLES / "qb_gl.csv", layout, ("journal_id", "amount"))
    assert (error.file, error.location, error.field) == ("qb_gl.csv", "line 1", "Betrag")
    assert "column heading not found (the mapping's amount)" in error.reason
    assert "'Line ID', 'Journal No.', 'Date', 'Account', 'Memo', 'Ref', 'Amount'" in error.reason


def test_an_optional_field_the_mapping_names_must_be_in_the_file_unless_it_may_be_absent(tmp_path: Path) -> None:
    path = tmp_path / "gl_lines.csv"
    path.write_text("journal_id,amount\nJ1,1.00\n", encoding="utf-8")
    columns = {"journal_id": "journal_id", "amount": "amount", "currency": "currency"}
    error = _error(path, TableLayout(columns=columns), ("journal_id",), ("currency",))
    assert error.field == "currency"
    lenient = TableLayout(columns=columns, may_be_absent=frozenset({"currency"}))
    rows = list(read_table(path, lenient, required=("journal_id",), optional=("currency",)))
    assert [row.values for row in rows] == [{"journal_id": "J1"}]


def test_an_unmapped_required_field_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFileError) as caught:
        read_table(TABLES / "qb_gl.csv", QB, required=("account",))
    assert str(caught.value) == "qb_gl.csv: account: not mapped: the mapping's `columns` needs a heading for it"


def test_a_row_with_another_number_of_fields_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "gl.csv"
    path.write_text("Journal;Amount;Text\nJ1;1,00;ok\nJ1;-1,00\n", encoding="utf-8")
    layout = TableLayout(columns={"journal_id": "Journal"}, delimiter=";")
    rows = read_table(path, layout, required=("journal_id",))
    assert next(rows).number == 2  # streamed: the good row comes before the bad one is read
    with pytest.raises(ImportFileError) as caught:
        next(rows)
    assert str(caught.value) == (
        "gl.csv line 3: (row): expected 3 fields like the header on line 1, found 2 (is the delimiter ';' right?)"
    )


def test_bad_encoding_names_the_line_and_the_byte(tmp_path: Path) -> None:
    error = _error(
        TABLES / "sap_gl_export.csv", TableLayout(columns=SAP.columns, delimiter=";", header_row=3), ("journal_id",)
    )
    assert (error.file, error.location, error.field) == ("sap_gl_export.csv", "line 4", "(encoding)")
    assert error.reason.startswith("not valid utf-8: byte 0xfc at offset ")  # the ü of Müller in cp1252
    raw = (TABLES / "sap_gl_export.csv").read_bytes()
    offset = raw.index("ü".encode("cp1252"))
    assert f"offset {offset} " in error.reason


def test_bad_cp1252_byte_deep_in_a_large_file_is_located(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    good = b"J1;1,00;Zahlung\n" * 20_000
    path.write_bytes(b"Journal;Amount;Text\n" + good + b"J2;2,00;bad \x81 byte\n")
    error = _error(
        path, TableLayout(columns={"journal_id": "Journal"}, delimiter=";", encoding="cp1252"), ("journal_id",)
    )
    assert error.location == "line 20002"
    assert f"byte 0x81 at offset {len(good) + 20 + 12}" in error.reason


def test_a_utf8_byte_order_mark_under_a_cp1252_mapping_is_refused() -> None:
    error = _error(TABLES / "qb_gl.csv", TableLayout(columns=QB.columns, encoding="cp1252"), ("journal_id",))
    assert (
        str(error) == "qb_gl.csv line 1: (encoding): starts with a UTF-8 byte order mark, but the mapping says cp1252"
    )


def test_malformed_quoting_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "gl.csv"
    path.write_text('Journal,Text\nJ1,ok\nJ2,"bad"quote\n', encoding="utf-8")
    error = _error(path, TableLayout(columns={"journal_id": "Journal"}), ("journal_id",))
    assert (error.location, error.field) == ("line 3", "(csv)")


def test_a_file_shorter_than_its_header_row_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gl.csv"
    path.write_text("Report\n", encoding="utf-8")
    error = _error(path, TableLayout(columns={"journal_id": "Journal"}, header_row=3), ("journal_id",))
    assert str(error) == "gl.csv: (header): no header row: expected the column headings on line 3"


def test_csv_is_streamed_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    with path.open("w", encoding="utf-8") as handle:
        handle.write("Journal,Date,Amount,Text\n")
        for number in range(60_000):
            handle.write(f"J{number // 2},2026-11-30,{'-' if number % 2 else ''}12.34,a line of text about it\n")
    layout = TableLayout(columns={"journal_id": "Journal", "amount": "Amount"})
    tracemalloc.start()
    count = sum(1 for _ in read_table(path, layout, required=("journal_id", "amount")))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 60_000
    assert path.stat().st_size > 2_500_000
    assert peak < 500_000  # a few rows at a time, not the 2.5 MB file


# --- cells as values ------------------------------------------------------------------------------------------------


def _row(**values: str | Decimal | date | None) -> TableRow:
    return TableRow(7, values, "line 7")


def test_cells_read_text_amounts_and_dates_the_layout_way() -> None:
    layout = TableLayout(
        columns={"amount": "Betrag", "date": "Datum", "account": "Konto"},
        date_format="%d.%m.%Y",
        decimal_separator=",",
        thousands_separator=" ",
    )
    cells = Cells("gl.csv", layout)
    row = _row(amount="1\u00a0234,56-", date="30.11.2026", account=Decimal("1000"))
    assert cells.amount(row, "amount") == Decimal("-1234.56")
    assert cells.date(row, "date") == date(2026, 11, 30)
    assert cells.text(row, "account") == "1000"
    assert cells.text(_row(account=Decimal("1000.5")), "account") == "1000.5"
    with pytest.raises(ImportFileError) as caught:
        cells.amount(_row(amount=Decimal("0.30000000000000004")), "amount")  # an XLSX float with binary noise
    assert str(caught.value).startswith("gl.csv line 7: Betrag: expected at most 2 decimal places")


def test_cell_errors_name_the_heading() -> None:
    cells = Cells("gl.csv", TableLayout(columns={"date": "Datum", "amount": "Betrag"}, date_format="%d.%m.%Y"))
    with pytest.raises(ImportFileError) as caught:
        cells.date(_row(date="2026-11-30"), "date")
    assert str(caught.value) == "gl.csv line 7: Datum: expected a date like 30.11.2026, found '2026-11-30'"
    with pytest.raises(ImportFileError) as caught:
        cells.date(_row(date=Decimal(46356)), "date")
    assert "expected a date, found the number 46356" in str(caught.value)
    with pytest.raises(ImportFileError) as caught:
        cells.amount(_row(amount=date(2026, 11, 30)), "amount")
    assert str(caught.value) == "gl.csv line 7: Betrag: expected an amount, found the date 2026-11-30"
    with pytest.raises(ImportFileError) as caught:
        cells.text(_row(date=None), "date", required=True)
    assert str(caught.value) == "gl.csv line 7: Datum: is empty: expected the date"


# --- amounts written every way a bank or an ERP writes them parse back exactly ----------------------------------


_SEPARATORS = [(".", ""), (".", ","), (".", " "), (".", "'"), (",", ""), (",", "."), (",", " "), (",", "\u00a0")]


def _written(cents: int, decimal_separator: str, thousands_separator: str, style: str) -> str:
    whole, fraction = divmod(abs(cents), 100)
    digits = f"{whole:,}".replace(",", thousands_separator)
    text = f"{digits}{decimal_separator}{fraction:02d}"
    if cents >= 0:
        return {"plus": f"+{text}"}.get(style, text)
    return {"minus": f"-{text}", "trailing": f"{text}-", "parentheses": f"({text})", "plus": f"-{text}"}[style]


@given(
    cents=st.integers(min_value=-(10**18) + 1, max_value=10**18 - 1),
    separators=st.sampled_from(_SEPARATORS),
    style=st.sampled_from(["minus", "trailing", "parentheses", "plus"]),
    padding=st.sampled_from(["", " ", "  "]),
)
def test_amounts_in_any_declared_style_parse_back_exactly(
    cents: int, separators: tuple[str, str], style: str, padding: str
) -> None:
    decimal_separator, thousands_separator = separators
    raw = padding + _written(cents, decimal_separator, thousands_separator, style) + padding
    expected = Decimal(cents).scaleb(-2)
    assert parse_amount(raw, decimal_separator=decimal_separator, thousands_separator=thousands_separator) == expected
    layout = TableLayout(
        columns={"amount": "Amount"},
        decimal_separator=decimal_separator,
        thousands_separator=(" " if thousands_separator == "\u00a0" else thousands_separator),
    )
    assert Cells("bank.csv", layout).amount(_row(amount=raw.strip()), "amount") == expected


@given(
    value=st.decimals(min_value=-(10**13) + 1, max_value=10**13 - 1, places=2, allow_nan=False, allow_infinity=False)
)
def test_xlsx_numbers_to_the_cent_are_read_exactly(value: Decimal) -> None:
    from countersign.importers.tabular import _xlsx_cell

    cell = _xlsx_cell(float(value))  # what openpyxl hands over for a numeric cell
    assert isinstance(cell, Decimal)
    assert Cells("gl.xlsx", TableLayout(columns={"amount": "Amount"})).amount(_row(amount=cell), "amount") == value


def test_an_xlsx_number_too_long_for_a_double_is_refused_not_rounded() -> None:
    from countersign.importers.tabular import _xlsx_cell

    cell = _xlsx_cell(80031758194659.68)  # 16 digits: the nearest double reads back as ...659.69
    with pytest.raises(ImportFileError) as caught:
        Cells("gl.xlsx", TableLayout(columns={"amount": "Amount"})).amount(_row(amount=cell), "amount")
    assert "expected at most 15 significant digits in a number cell" in str(caught.value)
    whole = _xlsx_cell(8003175819465968)  # an integer cell is exact at any length
    assert Cells("gl.xlsx", TableLayout(columns={"amount": "Amount"})).amount(_row(amount=whole), "amount") == Decimal(
        8003175819465968
    )


@pytest.mark.parametrize(
    ("raw", "decimal_separator", "thousands_separator", "expected"),
    [
        ("12,345,678.90", ".", ",", Decimal("12345678.90")),
        ("1 234 567,89", ",", " ", Decimal("1234567.89")),
        ("1\u202f234,50-", ",", " ", Decimal("-1234.50")),
        ("(1'234.00)", ".", "'", Decimal("-1234.00")),
        ("1234,56", ",", ".", Decimal("1234.56")),
        ("1,23.45", ".", ",", None),
        ("1234,567.00", ".", ",", None),
        ("1,234.5,6", ".", ",", None),
        ("980.00", ",", ".", None),
        ("12 34,00", ",", " ", None),
        ("-12.00-", ".", "", "sign"),
        ("(-12.00)", ".", "", "sign"),
        ("(12.00-)", ".", ",", "sign"),
        ("+12.00-", ".", ",", "sign"),
    ],
)
def test_thousands_separators_between_groups_of_three_and_one_sign(
    raw: str, decimal_separator: str, thousands_separator: str, expected: Decimal | str | None
) -> None:
    layout = TableLayout(
        columns={"amount": "Amount"}, decimal_separator=decimal_separator, thousands_separator=thousands_separator
    )
    cells = Cells("bank.csv", layout)
    if isinstance(expected, Decimal):
        assert cells.amount(_row(amount=raw), "amount") == expected
        return
    with pytest.raises(ImportFileError) as caught:
        cells.amount(_row(amount=raw), "amount")
    if expected == "sign":
        assert (
            str(caught.value)
            == f"bank.csv line 7: Amount: expected one sign (a leading -, a trailing - or parentheses), found {raw!r}"
        )
    else:
        assert str(caught.value).startswith("bank.csv line 7: Amount: expected the thousands separator ")
