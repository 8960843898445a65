"""Charts, general ledgers and open items as ERPs export them, read into the books' terms; each mistake one error."""

from __future__ import annotations

import csv
from dataclasses import replace
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from openpyxl import Workbook

from countersign.importers.errors import ImportFileError
from countersign.importers.ledger import AccountType, Chart, GlLine, read_chart, read_gl, read_open_items
from countersign.importers.mapping import ImportMapping, Sign, TableLayout, default_mapping, load_mapping
from countersign.synthetic import generate_books, load_profile

TABLES = Path(__file__).resolve().parent / "data" / "tables"
DEFAULT_PROFILE = Path(__file__).resolve().parents[2] / "config" / "profiles" / "default.yaml"


@pytest.fixture(scope="module")
def sap() -> ImportMapping:
    return load_mapping(TABLES / "sap_mapping.yaml")


@pytest.fixture(scope="module")
def sap_chart(sap: ImportMapping) -> Chart:
    return read_chart(TABLES / "sap_chart.csv", sap.chart)


@pytest.fixture(scope="module")
def qb() -> ImportMapping:
    return load_mapping(TABLES / "qb_mapping.yaml")


@pytest.fixture(scope="module")
def qb_chart(qb: ImportMapping) -> Chart:
    return read_chart(TABLES / "qb_chart.csv", qb.chart)


def _copy(tmp_path: Path, name: str, old: str, new: str, encoding: str = "utf-8") -> Path:
    """The test file `name` with one piece of text replaced, written under tmp_path with the same name."""
    source = TABLES / name
    raw = source.read_bytes()
    assert old.encode(encoding) in raw, old
    path = tmp_path / name
    path.write_bytes(raw.replace(old.encode(encoding), new.encode(encoding), 1))
    return path


def _refused_gl(path: Path, layout: TableLayout, chart: Chart) -> ImportFileError:
    with pytest.raises(ImportFileError) as caught:
        list(read_gl(path, layout, chart))
    return caught.value


# --- charts -----------------------------------------------------------------------------------------------------


def test_sap_chart_maps_its_types_and_keeps_subtypes(sap_chart: Chart) -> None:
    assert list(sap_chart.accounts) == ["113100", "140000", "160000", "175000", "300000", "400000", "620000", "800000"]
    assert sap_chart.accounts["160000"].type is AccountType.LIABILITY
    assert sap_chart.accounts["160000"].subtype == "payable_control"
    assert sap_chart.accounts["620000"].name == "Büromaterial"
    assert sap_chart.accounts["800000"].type is AccountType.REVENUE
    assert sap_chart.accounts["175000"].subtype == ""
    assert "999999" not in sap_chart


def test_qb_chart_with_bom_crlf_and_many_names_for_a_type(qb_chart: Chart) -> None:
    assert {code: account.type.value for code, account in qb_chart.accounts.items()} == {
        "1000": "asset",
        "1200": "asset",
        "2000": "liability",
        "3000": "equity",
        "4000": "revenue",
        "6100": "expense",
    }


def test_chart_duplicate_account_names_both_rows(tmp_path: Path, sap: ImportMapping) -> None:
    path = _copy(tmp_path, "sap_chart.csv", "175000;Umsatzsteuer", "160000;Umsatzsteuer", "cp1252")
    with pytest.raises(ImportFileError) as caught:
        read_chart(path, sap.chart)
    assert (
        str(caught.value) == "sap_chart.csv line 5: Sachkonto: the account '160000' is listed twice (first at line 4)"
    )


def test_chart_unknown_type_lists_the_mapped_values(tmp_path: Path, sap: ImportMapping) -> None:
    path = _copy(tmp_path, "sap_chart.csv", "Büromaterial;Aufwand", "Büromaterial;Kosten", "cp1252")
    with pytest.raises(ImportFileError) as caught:
        read_chart(path, sap.chart)
    assert str(caught.value) == (
        "sap_chart.csv line 8: Kontoart: expected one of 'Aktiva', 'Passiva', 'Eigenkapital', 'Ertrag', 'Aufwand'"
        " (the mapping's type_values), found 'Kosten'"
    )


def test_chart_currency_column_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "accounts.csv"
    path.write_text("account,name,type,subtype,currency\n1000,Bank,asset,bank,usd\n1100,Bank,asset,bank,\n")
    chart = read_chart(path, default_mapping().chart)
    assert (chart.accounts["1000"].currency, chart.accounts["1100"].currency) == ("USD", None)
    path.write_text("account,name,type,subtype,currency\n1000,Bank,asset,bank,dollars\n")
    with pytest.raises(ImportFileError) as caught:
        read_chart(path, default_mapping().chart)
    assert str(caught.value).startswith("accounts.csv line 2: currency: expected an ISO 4217 currency code")


# --- general ledgers --------------------------------------------------------------------------------------------


def test_sap_gl_export_reads_debits_credits_reversals_and_cp1252(sap: ImportMapping, sap_chart: Chart) -> None:
    lines = list(read_gl(TABLES / "sap_gl_export.csv", sap.gl, sap_chart))
    assert len(lines) == 9  # the title rows and the Total row are not lines
    assert lines[0] == GlLine(
        "sap_gl_export-4",
        "1900000101",
        date(2026, 11, 3),
        "400000",
        Decimal("1234.56"),
        "RE-4711",
        "Müller GmbH Rohstoffe",
        None,
        None,
    )
    assert [line.amount for line in lines] == [
        Decimal(text)
        for text in ("1234.56", "-1234.56", "-980.00", "980.00", "12500.00", "-10504.20", "-1995.80", "-45.00", "45.00")
    ]
    assert lines[7].description == "Storno Büromaterial 45 € (Gutschrift; Beleg 17)"  # cp1252's euro sign, a ;
    assert [line.line_id for line in lines][-1] == "sap_gl_export-12"
    assert sum(line.amount for line in lines) == 0


def test_qb_gl_reads_parentheses_us_dates_and_mapped_line_ids(qb: ImportMapping, qb_chart: Chart) -> None:
    lines = list(read_gl(TABLES / "qb_gl.csv", qb.gl, qb_chart))
    assert [line.line_id for line in lines[:2]] == ["JE-1001-1", "JE-1001-2"]
    assert [(line.line_date, line.amount) for line in lines[:4]] == [
        (date(2026, 11, 2), Decimal("1250.00")),
        (date(2026, 11, 2), Decimal("-1250.00")),
        (date(2026, 11, 15), Decimal("2400.00")),
        (date(2026, 11, 15), Decimal("-2400.00")),
    ]
    assert lines[2].description == "Office rent, November"
    assert lines[4].description == 'Customer payment - Northwind "early"'
    assert (lines[6].reference, lines[7].amount) == ("", Decimal("-0.35"))


def test_credit_positive_amounts_are_negated(tmp_path: Path, qb: ImportMapping, qb_chart: Chart) -> None:
    layout = replace(qb.gl, sign=Sign.CREDIT_POSITIVE)
    lines = list(read_gl(TABLES / "qb_gl.csv", layout, qb_chart))
    assert [line.amount for line in lines[:2]] == [Decimal("-1250.00"), Decimal("1250.00")]


def _xlsx_ledger(path: Path) -> None:
    workbook = Workbook()
    cover = workbook.active
    assert cover is not None
    cover.title = "Cover"
    cover.append(["Trial balance and journal, November 2026"])
    sheet = workbook.create_sheet("Journal")
    sheet.append(["Journal report", None, None, None, None])
    sheet.append(["Entry", "Date", "Account", "Debit", "Credit", "Memo", "Currency", "Foreign amount"])
    sheet.append(["JE-1", date(2026, 11, 2), 1200, 1250, None, "Invoice INV-0042", "USD", 1587.5])
    sheet.append(["JE-1", date(2026, 11, 2), 4000, None, 1250, "Invoice INV-0042", "USD", -1587.5])
    sheet.append(["JE-2", date(2026, 11, 30), 6100, 0.35, 0, "Bank fee", None, None])
    sheet.append(["JE-2", date(2026, 11, 30), 1000, 0, 0.35, "Bank fee", None, None])
    sheet.append([None, None, "Total", 1250.35, 1250.35])
    workbook.save(path)


XLSX_GL = TableLayout(
    columns={
        "journal_id": "Entry",
        "date": "Date",
        "account": "Account",
        "debit": "Debit",
        "credit": "Credit",
        "description": "Memo",
        "currency": "Currency",
        "currency_amount": "Foreign amount",
    },
    sheet="Journal",
    header_row=2,
    date_format="%d/%m/%Y",
)


def test_xlsx_ledger_reads_date_and_number_cells_and_currencies(tmp_path: Path, qb_chart: Chart) -> None:
    path = tmp_path / "journal.xlsx"
    _xlsx_ledger(path)
    lines = list(read_gl(path, XLSX_GL, qb_chart))
    assert [(line.line_id, line.account, line.amount) for line in lines] == [
        ("journal-3", "1200", Decimal("1250")),
        ("journal-4", "4000", Decimal("-1250")),
        ("journal-5", "6100", Decimal("0.35")),
        ("journal-6", "1000", Decimal("-0.35")),
    ]
    assert lines[0].line_date == date(2026, 11, 2)
    assert (lines[0].currency, lines[0].currency_amount) == ("USD", Decimal("1587.5"))
    assert (lines[1].currency, lines[1].currency_amount) == ("USD", Decimal("-1587.5"))
    assert (lines[2].currency, lines[2].currency_amount) == (None, None)


def test_our_own_books_format_imports_as_it_is(tmp_path: Path) -> None:
    books = tmp_path / "books"
    generate_books(load_profile(DEFAULT_PROFILE), 7, books)
    mapping = default_mapping()
    chart = read_chart(books / "accounts.csv", mapping.chart)
    with (books / "accounts.csv").open(newline="", encoding="utf-8") as handle:
        accounts = list(csv.DictReader(handle))
    assert [(a.account, a.name, a.type.value, a.subtype) for a in chart.accounts.values()] == [
        (row["account"], row["name"], row["type"], row["subtype"]) for row in accounts
    ]
    with (books / "gl_lines.csv").open(newline="", encoding="utf-8") as handle:
        expected = list(csv.DictReader(handle))
    lines = list(read_gl(books / "gl_lines.csv", mapping.gl, chart))
    assert len(lines) == len(expected) == 2000
    assert [
        (x.line_id, x.journal_id, x.line_date.isoformat(), x.account, str(x.amount), x.reference, x.description)
        for x in lines
    ] == [tuple(row.values()) for row in expected]
    for name, party in (("ap_subledger.csv", "vendor"), ("ar_subledger.csv", "customer")):
        layout = mapping.ap if party == "vendor" else mapping.ar
        items = list(read_open_items(books / name, layout, party))  # type: ignore[arg-type]
        with (books / name).open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        assert [
            (i.invoice_id, i.party, i.invoice_date.isoformat(), i.due_date.isoformat(), str(i.amount)) for i in items
        ] == [tuple(row.values()) for row in rows]


def test_an_unbalanced_journal_is_raised_at_the_end_after_every_line(
    tmp_path: Path, sap: ImportMapping, sap_chart: Chart
) -> None:
    path = _copy(tmp_path, "sap_gl_export.csv", ";;1.995,80;", ";;1.995,70;", "cp1252")
    lines: list[GlLine] = []
    with pytest.raises(ImportFileError) as caught:
        for line in read_gl(path, sap.gl, sap_chart):
            lines.append(line)
    assert len(lines) == 9  # streamed: every line came out before the journals could be checked
    assert str(caught.value) == (
        "sap_gl_export.csv journal 1900000103 (line 8): Soll / Haben: the journal's debits exceed its credits by 0.10"
        " (expected them equal)"
    )


def test_a_journal_split_across_the_file_balances(tmp_path: Path, qb_chart: Chart) -> None:
    path = tmp_path / "gl.csv"
    path.write_text(
        "journal,date,account,amount\nA,2026-11-01,1000,5.00\nB,2026-11-01,1000,7.00\nA,2026-11-02,4000,-5.00\n"
        "B,2026-11-01,4000,-3.00\nC,2026-11-01,6100,0.00\nB,2026-11-03,4000,-4.00\n"
    )
    layout = TableLayout(columns={"journal_id": "journal", "date": "date", "account": "account", "amount": "amount"})
    assert len(list(read_gl(path, layout, qb_chart))) == 6
    path.write_text(path.read_text().replace("B,2026-11-03,4000,-4.00", "B,2026-11-03,4000,-4.01"))
    assert _refused_gl(path, layout, qb_chart).location == "journal B (line 3)"  # the control: one cent out


def _sap_gl_error(tmp_path: Path, sap: ImportMapping, chart: Chart, old: str, new: str) -> ImportFileError:
    return _refused_gl(_copy(tmp_path, "sap_gl_export.csv", old, new, "cp1252"), sap.gl, chart)


def test_unknown_account_names_row_heading_and_account(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    error = _sap_gl_error(tmp_path, sap, sap_chart, "03.11.2026;400000", "03.11.2026;400099")
    assert str(error) == "sap_gl_export.csv line 4: Sachkonto: the account '400099' is not in the chart of accounts"


def test_bad_date_names_row_heading_and_format(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    error = _sap_gl_error(tmp_path, sap, sap_chart, "05.11.2026;113100", "2026-11-05;113100")
    assert str(error) == "sap_gl_export.csv line 6: Buchungsdatum: expected a date like 30.11.2026, found '2026-11-05'"


def test_impossible_date_is_refused(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    error = _sap_gl_error(tmp_path, sap, sap_chart, "10.11.2026;800000", "31.11.2026;800000")
    assert (error.location, error.field) == ("line 9", "Buchungsdatum")


def test_bad_amount_names_row_and_heading(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    error = _sap_gl_error(tmp_path, sap, sap_chart, ";980,00;;ZA", ";980.00;;ZA")
    assert str(error) == (
        "sap_gl_export.csv line 7: Soll: expected the thousands separator '.' only between groups of three digits"
        " before the decimal separator ',', like 1.234,56, found '980.00'"
    )  # not 98000.00: the point is not taken for a thousands separator


def test_thousands_separators_are_checked_not_stripped(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    plain = _copy(tmp_path, "sap_gl_export.csv", ";980,00;;ZA", ";980;;ZA", "cp1252")
    assert list(read_gl(plain, sap.gl, sap_chart))[3].amount == Decimal("980.00")  # no decimals is fine
    error = _sap_gl_error(tmp_path, sap, sap_chart, ";;1.234,56;RE", ";;1.234.56;RE")
    assert str(error).startswith("sap_gl_export.csv line 5: Haben: expected the thousands separator '.'")


def test_three_decimals_are_refused(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    error = _sap_gl_error(tmp_path, sap, sap_chart, ";;10.504,20;", ";;10.504,205;")
    assert str(error) == "sap_gl_export.csv line 9: Haben: expected at most 2 decimal places, found '10.504,205'"


def test_debit_and_credit_both_filled_are_refused(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    error = _sap_gl_error(tmp_path, sap, sap_chart, ";;980,00;ZA", ";5,00;980,00;ZA")
    assert str(error) == (
        "sap_gl_export.csv line 6: Soll / Haben: both hold an amount (5.00 and 980.00): expected a debit or a credit"
    )


def test_missing_heading_names_the_heading_and_the_header_line(
    tmp_path: Path, sap: ImportMapping, sap_chart: Chart
) -> None:
    error = _sap_gl_error(tmp_path, sap, sap_chart, ";Buchungstext", ";Text")
    assert (error.file, error.location, error.field) == ("sap_gl_export.csv", "line 3", "Buchungstext")
    assert "'Belegnummer', 'Position', 'Buchungsdatum'" in error.reason


def test_empty_journal_cell_is_refused(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    error = _sap_gl_error(tmp_path, sap, sap_chart, "1900000102;2;", ";2;")
    assert str(error) == "sap_gl_export.csv line 7: Belegnummer: is empty: expected the journal id"


def test_bad_encoding_names_the_line(tmp_path: Path, sap: ImportMapping, sap_chart: Chart) -> None:
    layout = replace(sap.gl, encoding="utf-8")
    error = _refused_gl(TABLES / "sap_gl_export.csv", layout, sap_chart)
    assert (error.file, error.location, error.field) == ("sap_gl_export.csv", "line 4", "(encoding)")
    assert "not valid utf-8: byte 0xfc" in error.reason


def test_duplicate_line_id_names_the_second_row(tmp_path: Path, qb: ImportMapping, qb_chart: Chart) -> None:
    path = _copy(tmp_path, "qb_gl.csv", "JE-1002-2,", "JE-1002-1,")
    error = _refused_gl(path, qb.gl, qb_chart)
    assert str(error) == "qb_gl.csv line 5: Line ID: the line id 'JE-1002-1' is used twice (ids must be unique)"


def test_currency_amount_without_a_currency_is_refused(tmp_path: Path, qb_chart: Chart) -> None:
    path = tmp_path / "journal.xlsx"
    _xlsx_ledger(path)
    from openpyxl import load_workbook

    workbook = load_workbook(path)
    workbook["Journal"]["G4"] = None
    workbook.save(path)
    error = _refused_gl(path, XLSX_GL, qb_chart)
    assert str(error) == (
        "journal.xlsx sheet Journal, row 4: Currency: is empty, but the line has an amount in a transaction currency"
    )


def test_currency_amount_of_the_opposite_sign_is_refused(tmp_path: Path, qb_chart: Chart) -> None:
    path = tmp_path / "journal.xlsx"
    _xlsx_ledger(path)
    from openpyxl import load_workbook

    workbook = load_workbook(path)
    workbook["Journal"]["H3"] = -1587.5
    workbook.save(path)
    error = _refused_gl(path, XLSX_GL, qb_chart)
    assert str(error).startswith(
        "journal.xlsx sheet Journal, row 3: Foreign amount: -1587.50 USD has the opposite sign"
    )


# --- open items ---------------------------------------------------------------------------------------------------


def test_sap_vendor_items_signed_debit_positive_become_what_we_owe(sap: ImportMapping) -> None:
    items = list(read_open_items(TABLES / "sap_ap_open_items.csv", sap.ap, "vendor"))
    assert [(i.invoice_id, i.party, i.amount) for i in items] == [
        ("5100000201", "Müller GmbH", Decimal("2380.00")),
        ("5100000202", "Schäfer & Söhne KG", Decimal("1190.50")),
        ("5100000203", "Müller GmbH", Decimal("-95.20")),  # a credit note
    ]
    assert (items[0].invoice_date, items[0].due_date) == (date(2026, 10, 28), date(2026, 11, 27))
    unsigned = replace(sap.ap, sign=None)
    assert next(i.amount for i in read_open_items(TABLES / "sap_ap_open_items.csv", unsigned, "vendor")) == Decimal(
        "-2380.00"
    )  # the control: without the mapping's sign the file's own sign stands


def test_customer_items_credit_positive_are_negated(tmp_path: Path) -> None:
    path = tmp_path / "ar.csv"
    path.write_text("Invoice,Customer,Date,Due,Open\nSI-1,Northwind,2026-11-02,2026-12-02,-100.00\n")
    layout = TableLayout(
        columns={
            "invoice_id": "Invoice",
            "customer": "Customer",
            "invoice_date": "Date",
            "due_date": "Due",
            "amount": "Open",
        },
        sign=Sign.CREDIT_POSITIVE,
    )
    assert [i.amount for i in read_open_items(path, layout, "customer")] == [Decimal("100.00")]


def test_open_item_listed_twice_is_refused(tmp_path: Path, sap: ImportMapping) -> None:
    path = _copy(tmp_path, "sap_ap_open_items.csv", "5100000203", "5100000201", "cp1252")
    with pytest.raises(ImportFileError) as caught:
        list(read_open_items(path, sap.ap, "vendor"))
    assert str(caught.value) == "sap_ap_open_items.csv line 4: Belegnummer: the invoice '5100000201' is listed twice"


def test_open_item_bad_due_date_is_refused(tmp_path: Path, sap: ImportMapping) -> None:
    path = _copy(tmp_path, "sap_ap_open_items.csv", "02.12.2026", "2.12.26", "cp1252")
    with pytest.raises(ImportFileError) as caught:
        list(read_open_items(path, sap.ap, "vendor"))
    assert (
        str(caught.value)
        == "sap_ap_open_items.csv line 3: Nettofälligkeit: expected a date like 30.11.2026, found '2.12.26'"
    )
