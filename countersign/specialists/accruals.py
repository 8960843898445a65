"""Accruals specialist: one balanced GRNI accrual journal for the period end."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from countersign.specialists.errors import SpecialistInputError

_MONEY_PATTERN = re.compile(r"-?[0-9]+(?:\.[0-9]{1,2})?")
_DATE_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_CENT = Decimal("0.01")
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@dataclass(frozen=True)
class Receipt:
    receipt_id: str
    vendor: str
    po_number: str
    received_date: dt.date
    amount: Decimal
    expense_account: str
    description: str


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(payload, Mapping):
        raise SpecialistInputError("payload", f"expected an object, got {type(payload).__name__}")
    period_end = _date(payload, "period_end", "period_end")
    accrual_account = _text(payload, "accrual_account", "accrual_account")
    materiality_amount = _money(payload, "materiality_amount", "materiality_amount")
    if materiality_amount < 0:
        raise SpecialistInputError("materiality_amount", f"must not be negative, got {materiality_amount}")
    receipts = _receipts(payload, period_end)

    accrued = sorted(
        (receipt for receipt in receipts if receipt.amount > materiality_amount),
        key=lambda receipt: receipt.receipt_id,
    )
    total = sum((receipt.amount for receipt in accrued), Decimal("0.00"))
    if not accrued:
        return {"journal": None, "total": _format_money(total), "receipts": 0}

    lines = [
        {
            "account": receipt.expense_account,
            "amount": _format_money(receipt.amount),
            "description": f"GRNI accrual: {receipt.vendor} PO {receipt.po_number} ({receipt.receipt_id})",
        }
        for receipt in accrued
    ]
    lines.append(
        {
            "account": accrual_account,
            "amount": _format_money(-total),
            "description": "Accrued liabilities: GRNI",
        }
    )
    month = f"{_MONTH_NAMES[period_end.month - 1]} {period_end.year}"
    journal = {
        "date": period_end.isoformat(),
        "memo": f"Accrual for goods received not invoiced, {month}",
        "lines": lines,
    }
    return {"journal": journal, "total": _format_money(total), "receipts": len(accrued)}


def _receipts(payload: Mapping[str, Any], period_end: dt.date) -> list[Receipt]:
    raw_receipts = payload.get("grni")
    if not isinstance(raw_receipts, list):
        raise SpecialistInputError("grni", "expected a list of receipts")
    receipts: list[Receipt] = []
    seen_ids: set[str] = set()
    for index, raw in enumerate(raw_receipts):
        where = f"grni[{index}]"
        if not isinstance(raw, Mapping):
            raise SpecialistInputError(where, f"expected an object, got {type(raw).__name__}")
        receipt = Receipt(
            receipt_id=_text(raw, "receipt_id", f"{where}.receipt_id"),
            vendor=_text(raw, "vendor", f"{where}.vendor"),
            po_number=_text(raw, "po_number", f"{where}.po_number"),
            received_date=_date(raw, "received_date", f"{where}.received_date"),
            amount=_money(raw, "amount", f"{where}.amount"),
            expense_account=_text(raw, "expense_account", f"{where}.expense_account"),
            description=_optional_text(raw, "description", f"{where}.description"),
        )
        if receipt.receipt_id in seen_ids:
            raise SpecialistInputError(f"{where}.receipt_id", f"duplicate receipt id {receipt.receipt_id!r}")
        if receipt.received_date > period_end:
            raise SpecialistInputError(
                f"{where}.received_date",
                f"{receipt.received_date.isoformat()} is after period_end {period_end.isoformat()}",
            )
        seen_ids.add(receipt.receipt_id)
        receipts.append(receipt)
    return receipts


def _text(source: Mapping[str, Any], key: str, field: str) -> str:
    value = source.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SpecialistInputError(field, f"expected a non-empty string, got {value!r}")
    return value


def _optional_text(source: Mapping[str, Any], key: str, field: str) -> str:
    value = source.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpecialistInputError(field, f"expected a string, got {value!r}")
    return value


def _money(source: Mapping[str, Any], key: str, field: str) -> Decimal:
    value = source.get(key)
    if not isinstance(value, str) or not _MONEY_PATTERN.fullmatch(value):
        raise SpecialistInputError(field, f"expected a money string like '1234.50', got {value!r}")
    return Decimal(value)


def _date(source: Mapping[str, Any], key: str, field: str) -> dt.date:
    value = source.get(key)
    if not isinstance(value, str) or not _DATE_PATTERN.fullmatch(value):
        raise SpecialistInputError(field, f"expected a date string YYYY-MM-DD, got {value!r}")
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise SpecialistInputError(field, f"expected a date string YYYY-MM-DD, got {value!r}") from None


def _format_money(amount: Decimal) -> str:
    return f"{amount.quantize(_CENT):f}"
