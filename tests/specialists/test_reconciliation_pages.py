"""The reconciliation specialist's paged kinds (docs/adr/0041): a page is matched as a whole account would be, and a
closing `bank_pages` message is refused when its control sums do not hold; its explanation cites only figures it
received, naming the first listed lines and how many more."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.grounding import UngroundedFigureError, ground_figures
from countersign.specialists.reconciliation import (
    EXPLANATION_TOLERANCE,
    LISTED_LINES,
    _unmatched_bank_lines,
    draft_explanation,
    explanation_inputs,
    handle,
)
from countersign.specialists.wire import pack_rows


def _line(line_id: str, amount: str, reference: str, day: int = 10) -> dict[str, str]:
    return {"id": line_id, "date": f"2026-10-{day:02d}", "amount": amount, "reference": reference}


def _closing(listed: int = 2, **changes: Any) -> dict[str, Any]:
    """One account of 10 bank and 12 GL lines: 6 matched in the database, 1 bank and 3 GL unmatched there, 3 bank and
    3 GL lines on one page of which 1 matched; 3 bank lines unmatched in all, `listed` of them listed."""
    account = {
        "account": "1000",
        "bank_lines": 10,
        "gl_lines": 12,
        "matched_in_database": 6,
        "unmatched_bank_in_database": 1,
        "unmatched_gl_in_database": 3,
        "unmatched_bank_amount_in_database": "-10.00",
        "pages": 1,
        "paged_bank_lines": 3,
        "paged_gl_lines": 3,
        "paged_matched": 1,
        "paged_unmatched_bank_amount": "-25.50",
        "unmatched_bank_lines": [
            {**_line(f"B{n}", "-12.75", f"REF-{n}", 10 + n), "ledger_has_equal_amount": n == 0} for n in range(listed)
        ],
        "unmatched_gl": ["G1", "G2"],
        **changes,
    }
    return {"kind": "bank_pages", "date_window_days": 3, "unmatched_tolerance": "0.2", "accounts": [account]}


def test_a_page_is_matched_as_the_whole_account_would_be() -> None:
    bank = [_line("B1", "-5.00", "dup"), _line("B2", "-5.00", "DUP ", 12)]
    gl = [_line("G1", "-5.00", "Dup", 11)]
    page = handle({"kind": "bank_page", "account": "1000", "page": 3, "date_window_days": 3,
                   "bank_rows": pack_rows(bank), "gl_rows": pack_rows(gl)})  # fmt: skip
    whole = handle(
        {"kind": "bank", "date_window_days": 3, "unmatched_tolerance": "1",
         "accounts": [{"account": "1000", "bank_lines": bank, "gl_lines": gl}]}
    )  # fmt: skip
    assert page["matches"] == whole["matches"] == [["B1", "G1"]]
    assert page["unmatched_bank"] == whole["accounts"][0]["unmatched_bank"] == ["B2"]
    assert (page["page"], page["bank_lines"], page["gl_lines"], page["matched"]) == (3, 2, 1, 1)
    assert page["unmatched_bank_amount"] == whole["accounts"][0]["unmatched_bank_amount"] == "-5.00"


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        ([{"id": "B1"}], "expected a JSON text of rows, got list"),
        ("[[", "Expecting value"),
        ('[["B1", "2026-10-10"]]', "expected a list of [id, date, amount, reference] rows"),
        ('[["B1", "2026-10-10", 5, "R"]]', "expected a decimal string"),
    ],
)
def test_a_page_whose_rows_are_malformed_is_refused_naming_the_field(rows: Any, reason: str) -> None:
    payload = {"kind": "bank_page", "account": "1000", "page": 1, "date_window_days": 3, "bank_rows": rows,
               "gl_rows": "[]"}  # fmt: skip
    with pytest.raises(SpecialistInputError) as refused:
        handle(payload)
    assert refused.value.field.startswith("bank_rows") and reason in refused.value.reason


def test_the_closing_message_adds_the_database_and_the_pages() -> None:
    result = handle(_closing())
    (account,) = result["accounts"]
    assert (account["matched"], account["matched_in_database"], account["unmatched_gl_lines"]) == (7, 6, 5)
    assert account["unmatched_bank_amount"] == "-35.50"
    assert account["unmatched_share"] == "0.3000" and account["halt"] is True
    assert result["halt_reason"] == "account 1000: 3 of 10 bank lines unmatched (tolerance 20%)"
    assert account["unmatched_bank"] == ["B0", "B1"] and "matches" not in result


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"paged_bank_lines": 4}, "accounts[0].bank_lines"),  # a bank line counted twice
        ({"unmatched_gl_in_database": 2}, "accounts[0].gl_lines"),  # a GL line nobody decided
        ({"paged_matched": 4}, "accounts[0].paged_matched"),
        ({"unmatched_gl": [f"G{n}" for n in range(6)]}, "accounts[0].unmatched_gl"),
        ({"pages": -1}, "accounts[0].pages"),
    ],
)
def test_a_closing_message_whose_sums_do_not_hold_is_refused_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(SpecialistInputError) as refused:
        handle(_closing(**changes))
    assert refused.value.field == field


def test_more_unmatched_lines_listed_than_unmatched_is_refused() -> None:
    payload = _closing(listed=4)
    with pytest.raises(SpecialistInputError, match="lists more than the 3 unmatched"):
        handle(payload)


def test_the_explanation_names_the_listed_lines_and_how_many_more_all_grounded() -> None:
    payload = _closing()
    result = handle(payload)
    unmatched = _unmatched_bank_lines(payload, result)
    assert [(line.line.id, line.gl_has_equal_amount) for line in unmatched] == [("B0", True), ("B1", False)]
    text = draft_explanation(result, unmatched)
    assert text.startswith("Account 1000: 3 of 10 bank lines found no ledger line")
    assert text.endswith("; and 1 more.")
    _, _, allowed = explanation_inputs(payload, result, unmatched)
    ground_figures(text, allowed, EXPLANATION_TOLERANCE)
    with pytest.raises(UngroundedFigureError):  # negative control: a figure it was not given
        ground_figures(text.replace("and 1 more", "and 4 more"), allowed, EXPLANATION_TOLERANCE)
    assert Decimal(1) in allowed and LISTED_LINES >= 2
