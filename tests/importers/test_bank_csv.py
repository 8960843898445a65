"""Bank statements exported as CSV: balances from a running balance column or the mapping, always cross-checked."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from countersign.importers.bank_csv import read_bank_csv
from countersign.importers.errors import ImportFileError
from countersign.importers.mapping import BankCsvLayout, Sign, load_mapping
from countersign.importers.statement import StatementFormat

TABLES = Path(__file__).resolve().parent / "data" / "tables"


def _layout(name: str) -> BankCsvLayout:
    layout = load_mapping(TABLES / name).bank_csv
    assert layout is not None
    return layout


UK = _layout("uk_bank_mapping.yaml")
EU = _layout("eu_bank_mapping.yaml")


def _copy(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (TABLES / name).read_text(encoding="utf-8")
    assert old in text, old
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _refused(path: Path, layout: BankCsvLayout) -> ImportFileError:
    with pytest.raises(ImportFileError) as caught:
        read_bank_csv(path, layout)
    return caught.value


def test_uk_statement_with_paid_out_paid_in_and_a_running_balance() -> None:
    (statement,) = read_bank_csv(TABLES / "uk_bank.csv", UK)
    assert (statement.statement_id, statement.bank_account, statement.currency) == (
        "uk_bank",
        "GB33BUKB20201555555555",
        "GBP",
    )
    assert (statement.opening_balance, statement.closing_balance) == (Decimal("5000.00"), Decimal("3733.45"))
    assert statement.opening_stated is False  # derived from the first balance, not stated
    assert (statement.from_date, statement.to_date) == (date(2026, 11, 1), date(2026, 11, 28))
    assert [entry.amount for entry in statement.entries] == [
        Decimal("-23.45"),
        Decimal("1250.00"),
        Decimal("-88.10"),
        Decimal("-2400.00"),
        Decimal("-5.00"),
    ]
    assert [entry.entry_id for entry in statement.entries] == [f"uk_bank-{n}" for n in range(1, 6)]
    assert statement.entries[1].description == "FASTER PAYMENT NORTHWIND TRADERS INV-0042"
    assert (statement.source, statement.format) == ("uk_bank.csv", StatementFormat.CSV)
    assert statement.opening_balance + statement.movements == statement.closing_balance


def test_eu_statement_with_signed_comma_amounts_and_balances_from_the_mapping() -> None:
    (statement,) = read_bank_csv(TABLES / "eu_bank.csv", EU)
    assert statement.statement_id == "2026-11"
    assert (statement.opening_balance, statement.closing_balance, statement.opening_stated) == (
        Decimal("10000.00"),
        Decimal("21507.50"),
        True,
    )
    assert [(e.entry_id, e.amount, e.reference) for e in statement.entries] == [
        ("2026-11-1", Decimal("12500.00"), "NOTPROVIDED"),
        ("2026-11-2", Decimal("-980.00"), "E2E-0815"),
        ("2026-11-3", Decimal("-12.50"), ""),
    ]
    assert statement.entries[2].value_date == date(2026, 12, 1)
    assert statement.entries[1].description == "ZA-0815 Rechnung RE-4711"


def test_debit_positive_amounts_are_negated(tmp_path: Path) -> None:
    path = _copy(tmp_path, "eu_bank.csv", "-980,00", "980,00")
    path.write_text(path.read_text(encoding="utf-8").replace("-12,50", "12,50").replace("12.500,00", "-12.500,00"))
    (statement,) = read_bank_csv(path, replace(EU, sign=Sign.DEBIT_POSITIVE))
    assert [e.amount for e in statement.entries] == [Decimal("12500.00"), Decimal("-980.00"), Decimal("-12.50")]


def test_bank_references_become_entry_ids_when_unique(tmp_path: Path) -> None:
    columns = {**{k: v for k, v in EU.columns.items() if k != "reference"}, "bank_reference": "Kundenreferenz"}
    layout = replace(EU, columns=columns)
    path = _copy(tmp_path, "eu_bank.csv", "Kontoführung November;;", "Kontoführung November;FEE-11;")
    (statement,) = read_bank_csv(path, layout)
    assert [e.entry_id for e in statement.entries] == ["NOTPROVIDED", "E2E-0815", "FEE-11"]
    (fallback,) = read_bank_csv(TABLES / "eu_bank.csv", layout)
    assert [e.entry_id for e in fallback.entries] == ["2026-11-1", "2026-11-2", "2026-11-3"]  # one is empty


def test_balance_column_broken_at_a_row_names_it(tmp_path: Path) -> None:
    path = _copy(tmp_path, "uk_bank.csv", '"3,738.45"', '"3,738.54"')
    error = _refused(path, UK)
    assert str(error) == (
        "uk_bank.csv line 6: Balance: expected 3738.45 (the balance before, 6138.45, plus this line's -2400.00), found"
        " 3738.54; lines are read in the file's order, oldest first"
    )


def test_newest_first_export_is_refused_with_a_hint(tmp_path: Path) -> None:
    lines = (TABLES / "uk_bank.csv").read_text(encoding="utf-8").splitlines()
    data = [line for line in lines[1:] if line]
    path = tmp_path / "uk_bank.csv"
    path.write_text("\n".join([lines[0], *reversed(data)]) + "\n", encoding="utf-8")
    error = _refused(path, UK)
    assert error.location == "line 3"
    assert error.reason.endswith("(this file seems to list the newest first)")


def test_blank_balance_cells_are_allowed_between_given_ones(tmp_path: Path) -> None:
    path = _copy(tmp_path, "uk_bank.csv", ',"6,138.45"', ",")
    (statement,) = read_bank_csv(path, UK)
    assert (statement.opening_balance, statement.closing_balance) == (Decimal("5000.00"), Decimal("3733.45"))


def test_neither_a_balance_column_nor_balances_in_the_mapping(tmp_path: Path) -> None:
    layout = replace(EU, opening_balance=None)
    error = _refused(TABLES / "eu_bank.csv", layout)
    assert (error.file, error.field) == ("eu_bank.csv", "opening_balance")
    assert "needs opening_balance and closing_balance, or a balance column" in error.reason


def test_movements_that_do_not_reach_the_closing_balance(tmp_path: Path) -> None:
    error = _refused(TABLES / "eu_bank.csv", replace(EU, closing_balance=Decimal("21507.05")))
    assert str(error) == (
        "eu_bank.csv statement 2026-11: closing_balance: opening 10000.00 + movements 11507.50 = 21507.50, but the"
        " closing balance is 21507.05 (a difference of -0.45)"
    )


def test_mapping_balance_disagreeing_with_the_balance_column(tmp_path: Path) -> None:
    error = _refused(TABLES / "uk_bank.csv", replace(UK, opening_balance=Decimal("5000.01")))
    assert str(error) == (
        "uk_bank.csv statement uk_bank: opening_balance: the mapping says 5000.01, the balance column gives 5000.00"
    )
    (agreeing,) = read_bank_csv(TABLES / "uk_bank.csv", replace(UK, opening_balance=Decimal("5000.00")))
    assert agreeing.opening_stated is True


def test_bad_date_names_the_line_and_heading(tmp_path: Path) -> None:
    path = _copy(tmp_path, "uk_bank.csv", "28/11/2026", "2026-11-28")
    assert str(_refused(path, UK)) == "uk_bank.csv line 7: Date: expected a date like 30/11/2026, found '2026-11-28'"


def test_bad_amount_names_the_line_and_heading(tmp_path: Path) -> None:
    path = _copy(tmp_path, "uk_bank.csv", ",88.10,", ",88.1O,")
    assert str(_refused(path, UK)) == "uk_bank.csv line 4: Paid out: expected an amount like 1234.56, found '88.1O'"


def test_paid_in_and_paid_out_on_one_line_is_refused(tmp_path: Path) -> None:
    path = _copy(tmp_path, "uk_bank.csv", "BANK CHARGES,5.00,,", "BANK CHARGES,5.00,1.00,")
    assert str(_refused(path, UK)) == (
        "uk_bank.csv line 7: Paid out / Paid in: both hold an amount (5.00 out, 1.00 in): expected money out or"
        " money in"
    )


def test_a_missing_heading_is_named(tmp_path: Path) -> None:
    path = _copy(tmp_path, "uk_bank.csv", "Paid in", "Money in")
    error = _refused(path, UK)
    assert (error.location, error.field) == ("line 1", "Paid in")


def test_a_statement_without_lines_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("Date,Description,Paid out,Paid in,Balance\n", encoding="utf-8")
    assert str(_refused(path, UK)) == "empty.csv: (file): no statement lines: a statement's dates come from its lines"
