"""Accruals specialist: one balanced accrual journal for the period end: goods received not invoiced, and the sums
certified on construction contracts for the period and not yet invoiced (ADR 0050)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from countersign.money.formatting import format_money
from countersign.specialists.errors import SpecialistInputError

_MONEY_PATTERN = re.compile(r"-?[0-9]+(?:\.[0-9]{1,2})?")
_CURRENCY_PATTERN = re.compile(r"[A-Z]{3}")
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
class Certified:
    """A sum certified on a construction contract for the period, not yet invoiced: a liability to accrue."""

    certificate_id: str
    contract_title: str
    certificate_no: int
    amount: Decimal
    currency: str
    cost_account: str
    accrual_account: str

    @property
    def words(self) -> str:
        return (
            f"Accrue {format_money(self.amount, self.currency)} certified on {self.contract_title}, certificate"
            f" {self.certificate_no}, not yet invoiced ({self.certificate_id})"
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
    certified = [item for item in _certified(payload) if item.amount > 0]  # a certified sum is accrued whole

    accrued = sorted(
        (receipt for receipt in receipts if receipt.amount > materiality_amount),
        key=lambda receipt: receipt.receipt_id,
    )
    grni_total = sum((receipt.amount for receipt in accrued), Decimal("0.00"))
    certified_total = sum((item.amount for item in certified), Decimal("0.00"))
    total = grni_total + certified_total
    counts: dict[str, Any] = {"receipts": len(accrued)}
    if certified:
        counts["certified"] = len(certified)
    if not accrued and not certified:
        return {"journal": None, "total": _format_money(total), **counts}

    lines = [
        {
            "account": receipt.expense_account,
            "amount": _format_money(receipt.amount),
            "description": f"GRNI accrual: {receipt.vendor} PO {receipt.po_number} ({receipt.receipt_id})",
        }
        for receipt in accrued
    ]
    if accrued:
        lines.append(
            {
                "account": accrual_account,
                "amount": _format_money(-grni_total),
                "description": "Accrued liabilities: GRNI",
            }
        )
    for item in certified:
        lines.append({"account": item.cost_account, "amount": _format_money(item.amount), "description": item.words})
    for credited in sorted({item.accrual_account for item in certified}):
        owed = sum((item.amount for item in certified if item.accrual_account == credited), Decimal("0.00"))
        lines.append(
            {
                "account": credited,
                "amount": _format_money(-owed),
                "description": "Accrued liabilities: payments certified, not yet invoiced",
            }
        )
    month = f"{_MONTH_NAMES[period_end.month - 1]} {period_end.year}"
    what = {
        (True, False): "goods received not invoiced",
        (False, True): "payments certified not yet invoiced",
        (True, True): "goods received and payments certified, not yet invoiced",
    }[(bool(accrued), bool(certified))]
    journal = {
        "date": period_end.isoformat(),
        "memo": f"Accrual for {what}, {month}",
        "lines": lines,
    }
    return {"journal": journal, "total": _format_money(total), **counts}


def _certified(payload: Mapping[str, Any]) -> list[Certified]:
    """`certified`: optional; when present, each item in the books' `functional_currency` (nothing is converted)."""
    raw_items = payload.get("certified")
    if raw_items is None:
        return []
    if not isinstance(raw_items, list):
        raise SpecialistInputError("certified", "expected a list of certified sums")
    functional = _text(payload, "functional_currency", "functional_currency") if raw_items else ""
    items: list[Certified] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_items):
        where = f"certified[{index}]"
        if not isinstance(raw, Mapping):
            raise SpecialistInputError(where, f"expected an object, got {type(raw).__name__}")
        number = raw.get("certificate_no")
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise SpecialistInputError(f"{where}.certificate_no", f"expected a whole number from 1, got {number!r}")
        currency = _text(raw, "currency", f"{where}.currency")
        if not _CURRENCY_PATTERN.fullmatch(currency):
            raise SpecialistInputError(f"{where}.currency", f"expected an ISO 4217 code like GBP, got {currency!r}")
        item = Certified(
            certificate_id=_text(raw, "certificate_id", f"{where}.certificate_id"),
            contract_title=_text(raw, "contract_title", f"{where}.contract_title"),
            certificate_no=number,
            amount=_money(raw, "amount", f"{where}.amount"),
            currency=currency,
            cost_account=_text(raw, "cost_account", f"{where}.cost_account"),
            accrual_account=_text(raw, "accrual_account", f"{where}.accrual_account"),
        )
        if currency != functional:
            raise SpecialistInputError(
                f"{where}.currency",
                f"{format_money(item.amount, currency)} certified on {item.contract_title} is not in the books'"
                f" {functional}: it is not converted here",
            )
        if item.certificate_id in seen:
            raise SpecialistInputError(f"{where}.certificate_id", f"duplicate certificate id {item.certificate_id!r}")
        seen.add(item.certificate_id)
        items.append(item)
    return items


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
