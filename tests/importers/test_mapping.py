"""The mapping file: read strictly, every mistake one ImportFileError naming the file and the dotted key."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from countersign.importers.errors import ImportFileError
from countersign.importers.mapping import (
    ChartLayout,
    ImportMapping,
    Sign,
    TableLayout,
    default_mapping,
    load_mapping,
    normalised_bank_account,
)

TABLES = Path(__file__).resolve().parent / "data" / "tables"

GL_OK = """\
gl:
  columns: {journal_id: Journal, date: Date, account: Account, amount: Amount}
"""


def _write(tmp_path: Path, text: str, name: str = "mapping.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _refused(tmp_path: Path, text: str) -> ImportFileError:
    with pytest.raises(ImportFileError) as caught:
        load_mapping(_write(tmp_path, text))
    return caught.value


def test_sap_mapping_reads_every_key() -> None:
    mapping = load_mapping(TABLES / "sap_mapping.yaml")
    assert mapping.bank_accounts == {"DE89370400440532013000": "113100"}
    gl = mapping.gl
    assert (gl.encoding, gl.delimiter, gl.header_row, gl.date_format) == ("cp1252", ";", 3, "%d.%m.%Y")
    assert (gl.decimal_separator, gl.thousands_separator, gl.sign) == (",", ".", None)
    assert dict(gl.columns) == {
        "journal_id": "Belegnummer",
        "date": "Buchungsdatum",
        "account": "Sachkonto",
        "debit": "Soll",
        "credit": "Haben",
        "reference": "Referenz",
        "description": "Buchungstext",
    }
    assert mapping.chart.type_values["Aufwand"] == "expense"
    assert mapping.ap.sign is Sign.DEBIT_POSITIVE
    assert mapping.ap.columns["due_date"] == "Nettofälligkeit"
    assert mapping.bank_csv is None
    assert mapping.ar == default_mapping().ar  # absent: our own books format


def test_bank_csv_section_reads_account_currency_and_balances() -> None:
    layout = load_mapping(TABLES / "eu_bank_mapping.yaml").bank_csv
    assert layout is not None
    assert (layout.bank_account, layout.currency, layout.statement_id) == ("DE89370400440532013000", "EUR", "2026-11")
    assert (layout.opening_balance, layout.closing_balance) == (Decimal("10000.00"), Decimal("21507.50"))
    uk = load_mapping(TABLES / "uk_bank_mapping.yaml").bank_csv
    assert uk is not None and uk.bank_account == "GB33BUKB20201555555555"  # spaces removed
    assert (uk.opening_balance, uk.closing_balance, uk.statement_id) == (None, None, None)


def test_bank_accounts_match_with_spaces_and_case_ignored() -> None:
    mapping = load_mapping(TABLES / "sap_mapping.yaml")
    assert mapping.gl_account_of("de89 3704\u00a00044 0532 0130 00") == "113100"
    assert mapping.gl_account_of("GB33BUKB20201555555555") is None
    assert normalised_bank_account(" gb33 bukb ") == "GB33BUKB"


def test_absent_sections_are_our_books_format(tmp_path: Path) -> None:
    mapping = default_mapping()
    assert mapping == ImportMapping()
    assert isinstance(mapping.chart, ChartLayout)
    gl = mapping.gl
    assert (gl.encoding, gl.delimiter, gl.date_format, gl.decimal_separator, gl.thousands_separator) == (
        "utf-8",
        ",",
        "%Y-%m-%d",
        ".",
        "",
    )
    assert {k: v for k, v in gl.columns.items() if k == v} == dict(gl.columns)
    assert set(gl.columns) == {
        "line_id",
        "journal_id",
        "date",
        "account",
        "amount",
        "reference",
        "description",
        "currency",
        "currency_amount",
    }
    assert set(mapping.ap.columns) == {"invoice_id", "vendor", "invoice_date", "due_date", "amount"}
    assert "customer" in mapping.ar.columns
    assert dict(mapping.chart.type_values) == {t: t for t in ("asset", "liability", "equity", "revenue", "expense")}
    assert load_mapping(_write(tmp_path, "version: 1\n")) == mapping


def test_a_section_given_uses_its_columns_and_default_keys(tmp_path: Path) -> None:
    mapping = load_mapping(_write(tmp_path, "version: 1\n" + GL_OK))
    assert mapping.gl == TableLayout(
        columns={"journal_id": "Journal", "date": "Date", "account": "Account", "amount": "Amount"}
    )
    assert mapping.gl.may_be_absent == frozenset()  # a mapping's own columns must all be in the file


def test_layouts_are_immutable(tmp_path: Path) -> None:
    mapping = load_mapping(_write(tmp_path, "version: 1\n" + GL_OK))
    with pytest.raises(TypeError):
        mapping.gl.columns["amount"] = "Other"  # type: ignore[index]


REFUSED = [
    ("version: 2\n", "version", "expected 1"),
    ("bank_accounts: {}\n", "version", "missing"),
    ("version: true\n", "version", "boolean"),
    ("version: 1\nledger: {}\n", "ledger", "unknown key"),
    (
        "version: 1\ngl:\n  columns: {journal_id: J, date: D, account: A, amount: X}\n  sheets: GL\n",
        "gl.sheets",
        "unknown key",
    ),
    ("version: 1\ngl:\n  encoding: cp1252\n", "gl.columns", "missing"),
    (
        "version: 1\ngl:\n  columns: {journal_id: J, date: D, account: A, amount: X, memo: M}\n",
        "gl.columns.memo",
        "unknown key",
    ),
    (
        "version: 1\ngl:\n  columns: {journal_id: J, date: D, account: A, amount: X, debit: Dr, credit: Cr}\n",
        "gl.columns.amount",
        "expected one or the other",
    ),
    ("version: 1\ngl:\n  columns: {journal_id: J, date: D, account: A}\n", "gl.columns.amount", "either amount"),
    ("version: 1\ngl:\n  columns: {journal_id: J, date: D, account: A, debit: Dr}\n", "gl.columns.credit", "no credit"),
    ("version: 1\ngl:\n  columns: {journal_id: J, date: D, amount: X}\n", "gl.columns.account", "missing"),
    (
        "version: 1\ngl:\n  columns: {journal_id: J, date: D, account: A, amount: X, currency_amount: FX}\n",
        "gl.columns.currency_amount",
        "needs currency",
    ),
    (
        "version: 1\ngl:\n  columns: {journal_id: J, date: D, account: A, amount: D}\n",
        "gl.columns.amount",
        "also mapped",
    ),
    ("version: 1\ngl:\n  columns: {journal_id: J, date: D, account: 1000, amount: X}\n", "gl.columns.account", "quote"),
    ("version: 1\n" + GL_OK + "  encoding: utf-16\n", "gl.encoding", "expected one of utf-8"),
    ("version: 1\n" + GL_OK + "  delimiter: '||'\n", "gl.delimiter", "one character"),
    (
        "version: 1\n" + GL_OK + "  decimal_separator: ','\n  thousands_separator: ','\n",
        "gl.thousands_separator",
        "ambiguous",
    ),
    ("version: 1\n" + GL_OK + "  decimal_separator: ';'\n", "gl.decimal_separator", "expected one of"),
    ("version: 1\n" + GL_OK + "  header_row: '3'\n", "gl.header_row", "row number"),
    ("version: 1\n" + GL_OK + "  header_row: 0\n", "gl.header_row", "row number"),
    ("version: 1\n" + GL_OK + "  date_format: '%d.%m'\n", "gl.date_format", "day, month and year"),
    ("version: 1\n" + GL_OK + "  sign: credit\n", "gl.sign", "debit_positive or credit_positive"),
    ("version: 1\n" + GL_OK + "  skip_rows_starting_with: Total\n", "gl.skip_rows_starting_with", "a list"),
    (
        "version: 1\ngl:\n  sign: credit_positive\n"
        "  columns: {journal_id: J, date: D, account: A, debit: Dr, credit: Cr}\n",
        "gl.sign",
        "single amount column",
    ),
    (
        "version: 1\nchart:\n  columns: {account: A, name: N, type: T}\n  sign: debit_positive\n",
        "chart.sign",
        "unknown",
    ),
    (
        "version: 1\nchart:\n  columns: {account: A, name: N, type: T}\n  type_values: {Aktiva: assets}\n",
        "chart.type_values.Aktiva",
        "expected one of asset",
    ),
    (
        "version: 1\nchart:\n  columns: {account: A, name: N, type: T}\n  type_values: {Asset: asset, ASSET: equity}\n",
        "chart.type_values.ASSET",
        "differs only in case",
    ),
    ("version: 1\nbank_accounts: {GB33BUKB20201555555555: 1000}\n", "bank_accounts.GB33BUKB20201555555555", "quote"),
    (
        'version: 1\nbank_accounts: {"GB33 BUKB 2020 1555 5555 55": "1000", GB33BUKB20201555555555: "1010"}\n',
        "bank_accounts.GB33BUKB20201555555555",
        "listed twice",
    ),
    (
        "version: 1\nbank_csv:\n  bank_account: GB33BUKB20201555555555\n  columns: {date: Date, amount: Amount}\n",
        "bank_csv.currency",
        "missing",
    ),
    (
        "version: 1\nbank_csv:\n  bank_account: X\n  currency: pounds\n  columns: {date: Date, amount: Amount}\n",
        "bank_csv.currency",
        "ISO 4217",
    ),
    (
        "version: 1\nbank_csv:\n  bank_account: X\n  currency: GBP\n  opening_balance: 1000.10\n"
        "  columns: {date: Date, amount: Amount}\n",
        "bank_csv.opening_balance",
        "binary float",
    ),
    (
        "version: 1\nbank_csv:\n  bank_account: X\n  currency: GBP\n  closing_balance: '12.345'\n"
        "  columns: {date: Date, amount: Amount}\n",
        "bank_csv.closing_balance",
        "2 decimal places",
    ),
    (
        "version: 1\nbank_csv:\n  bank_account: X\n  currency: GBP\n  columns: {date: Date, debit: Out}\n",
        "bank_csv.columns.credit",
        "no credit",
    ),
    (
        "version: 1\nap:\n  columns: {invoice_id: I, vendor: V, invoice_date: D, amount: A}\n",
        "ap.columns.due_date",
        "missing",
    ),
    ("version: 1\nar:\n  columns: {invoice_id: I, vendor: V}\n", "ar.columns.vendor", "unknown key"),
]


@pytest.mark.parametrize(("text", "key", "reason"), REFUSED, ids=[case[1] + "-" + case[2] for case in REFUSED])
def test_a_mapping_mistake_names_the_file_and_the_key(tmp_path: Path, text: str, key: str, reason: str) -> None:
    error = _refused(tmp_path, text)
    assert error.file == "mapping.yaml"
    assert error.field == key
    assert reason in error.reason
    assert str(error).startswith(f"mapping.yaml: {key}: ")
    assert str(tmp_path) not in str(error)  # the file's name, never its directory


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    error = _refused(tmp_path, "version: 1\ngl:\n  columns: {journal_id: J, date: D\n  encoding: cp1252\n")
    assert error.location.startswith("line ")
    assert error.field == "(yaml)"
    assert str(error).startswith(f"mapping.yaml {error.location}: (yaml): not valid YAML")


def test_a_key_given_twice_names_its_line(tmp_path: Path) -> None:
    error = _refused(tmp_path, "version: 1\n" + GL_OK + "  delimiter: ';'\n  delimiter: ','\n")
    assert (error.location, error.field) == ("line 5", "(yaml)")
    assert "'delimiter' is given twice" in str(error)


def test_an_empty_mapping_file_is_refused(tmp_path: Path) -> None:
    error = _refused(tmp_path, "# nothing yet\n")
    assert (error.file, error.field) == ("mapping.yaml", "version")


def test_a_mapping_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "mapping.yaml"
    path.write_bytes(
        b"version: 1\ngl:\n  columns: {journal_id: Beleg, date: Datum, account: Konto, amount: Betrag}\n"
        + "  sheet: Übersicht\n".encode("cp1252")
    )
    with pytest.raises(ImportFileError) as caught:
        load_mapping(path)
    assert str(caught.value) == "mapping.yaml line 4: (encoding): expected UTF-8 text"


def test_a_missing_mapping_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ImportFileError) as caught:
        load_mapping(tmp_path / "absent.yaml")
    assert (caught.value.file, caught.value.field) == ("absent.yaml", "(file)")
