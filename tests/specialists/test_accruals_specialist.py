from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from countersign.specialists.accruals import handle
from countersign.specialists.errors import SpecialistInputError


def _receipt(receipt_id: str, amount: str, expense_account: str = "6400") -> dict[str, Any]:
    return {
        "receipt_id": receipt_id,
        "vendor": "Northwind Supplies",
        "po_number": f"PO-{receipt_id[-3:]}",
        "received_date": "2026-10-20",
        "amount": amount,
        "expense_account": expense_account,
        "description": "office chairs",
    }


def _payload(receipts: list[dict[str, Any]], materiality_amount: str = "0.00") -> dict[str, Any]:
    return {
        "period_end": "2026-10-31",
        "accrual_account": "2100",
        "materiality_amount": materiality_amount,
        "grni": receipts,
    }


def test_journal_has_one_debit_per_receipt_sorted_and_one_credit_for_the_total() -> None:
    result = handle(_payload([_receipt("GRN-002", "300.50", "6500"), _receipt("GRN-001", "1200.00")]))

    journal = result["journal"]
    assert journal["date"] == "2026-10-31"
    assert journal["memo"] == "Accrual for goods received not invoiced, October 2026"
    assert journal["lines"] == [
        {
            "account": "6400",
            "amount": "1200.00",
            "description": "GRNI accrual: Northwind Supplies PO PO-001 (GRN-001)",
        },
        {
            "account": "6500",
            "amount": "300.50",
            "description": "GRNI accrual: Northwind Supplies PO PO-002 (GRN-002)",
        },
        {"account": "2100", "amount": "-1500.50", "description": "Accrued liabilities: GRNI"},
    ]
    assert result["total"] == "1500.50"
    assert result["receipts"] == 2


@given(
    amounts=st.lists(
        st.decimals(min_value=Decimal("0.01"), max_value=Decimal("9999999.99"), places=2),
        min_size=1,
        max_size=30,
    )
)
def test_journal_lines_sum_to_exactly_zero(amounts: list[Decimal]) -> None:
    receipts = [_receipt(f"GRN-{index:03d}", f"{amount:.2f}") for index, amount in enumerate(amounts)]

    result = handle(_payload(receipts))

    lines = result["journal"]["lines"]
    assert sum(Decimal(line["amount"]) for line in lines) == 0
    assert len(lines) == len(amounts) + 1
    assert Decimal(result["total"]) == sum(amounts)


def test_receipts_at_or_below_materiality_are_skipped() -> None:
    receipts = [_receipt("GRN-001", "100.00"), _receipt("GRN-002", "100.01"), _receipt("GRN-003", "40.00")]

    result = handle(_payload(receipts, materiality_amount="100.00"))

    assert [line["description"][-8:-1] for line in result["journal"]["lines"][:-1]] == ["GRN-002"]
    assert result["total"] == "100.01"
    assert result["receipts"] == 1


def test_no_receipts_gives_no_journal() -> None:
    assert handle(_payload([])) == {"journal": None, "total": "0.00", "receipts": 0}


def test_all_receipts_below_materiality_gives_no_journal() -> None:
    result = handle(_payload([_receipt("GRN-001", "5.00")], materiality_amount="10.00"))

    assert result == {"journal": None, "total": "0.00", "receipts": 0}


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p.pop("grni"), "grni"),
        (lambda p: p.update(period_end="31/10/2026"), "period_end"),
        (lambda p: p.update(materiality_amount=0.0), "materiality_amount"),
        (lambda p: p.update(materiality_amount="-1.00"), "materiality_amount"),
        (lambda p: p.pop("accrual_account"), "accrual_account"),
        (lambda p: p["grni"][1].update(amount=12.5), "grni[1].amount"),
        (lambda p: p["grni"][1].update(amount="12.345"), "grni[1].amount"),
        (lambda p: p["grni"][0].pop("vendor"), "grni[0].vendor"),
        (lambda p: p["grni"][0].update(received_date="2026-11-01"), "grni[0].received_date"),
        (lambda p: p["grni"][1].update(receipt_id="GRN-001"), "grni[1].receipt_id"),
        (lambda p: p["grni"].append("GRN-009"), "grni[2]"),
    ],
)
def test_malformed_payload_names_the_field(mutate: Any, field: str) -> None:
    payload = _payload([_receipt("GRN-001", "10.00"), _receipt("GRN-002", "20.00")])
    mutate(payload)

    with pytest.raises(SpecialistInputError) as caught:
        handle(payload)

    assert caught.value.field == field
    assert str(caught.value).startswith(f"invalid specialist input: {field}: ")
