"""Honest certificate histories built period by period, priced independently of the code under test.

`honest_history` takes what happened each period (cumulative quantities, the variations and materials on the
statement) and writes each certificate as a quantity surveyor would: lines to date at the rate in force (rounded per
period, or to date once under cumulative rounding), retention at the rate within its cap, no advance, previously
certified the last certificate's net. Tests then break one certificate and check what the domain says about it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from countersign.synthetic.clause_topics import TOPIC_KEYS
from tests.certificates.history import minor, money

RETENTION_RATE = Decimal("0.05")


def contract(**extra: Any) -> dict[str, Any]:
    """L01: 1,000.00 m3 at 150.00 (package P1); L02: 500.00 t at 33.33 (P2); R2 raises L01 to 160.00 from
    2025-06-01. Retention 5 % within a 1,000,000.00 cap; no advance; practical completion not certified."""
    data: dict[str, Any] = {
        "id": "CT-H",
        "form": "CSB",
        "title": "Honest works",
        "contractor": {"vendor_id": "V-9", "name": "Harrier Build Ltd"},
        "currency": "GBP",
        "start_period": "2025-01",
        "boq": [
            {
                "id": "L01",
                "package": "P1",
                "description": "Fill",
                "unit": "m3",
                "quantity": "1000.00",
                "rate": "150.00",
            },
            {"id": "L02", "package": "P2", "description": "Rebar", "unit": "t", "quantity": "500.00", "rate": "33.33"},
        ],
        "rate_versions": [
            {"version": "R1", "effective_from": "2025-01-01", "rates": {"L01": "150.00", "L02": "33.33"}},
            {"version": "R2", "effective_from": "2025-06-01", "rates": {"L01": "160.00"}},
        ],
        "retention": {
            "rate": str(RETENTION_RATE),
            "cap": "1000000.00",
            "release_at_practical_completion": "0.5",
            "defects_period_months": 12,
        },
        "advance": {"amount": "0.00", "start_pct": "0.10", "rate": "0.25", "repaid_by_pct": "0.80"},
        "packages": [
            {"id": "P1", "name": "Earthworks", "scope": {"L01": "hash-l01"}},
            {"id": "P2", "name": "Frame", "scope": {"L02": "hash-l02"}},
        ],
        "practical_completion": None,
        "clause_refs": {
            topic: f"CSB-{index // 10 + 1}.{index % 10 + 1}" for index, topic in enumerate(sorted(TOPIC_KEYS))
        },
    }
    data.update(extra)
    return data


@dataclass
class Period:
    """What a statement shows for one month: cumulative quantities (decimal strings), variations, materials."""

    quantities: dict[str, str]
    variations: list[dict[str, Any]] = field(default_factory=list)
    materials: list[dict[str, Any]] = field(default_factory=list)


def variation(
    variation_id: str,
    amount: str,
    *,
    instruction: str | None = "CAI-001",
    line: str | None = None,
    change: str | None = None,
    reverses: str | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": variation_id,
        "instruction_ref": instruction,
        "description": f"Variation {variation_id}",
        "amount": amount,
        "boq_line": line,
        "quantity_change": change,
    }
    if reverses is not None:
        data["reverses"] = reverses
    return data


def materials(item_id: str, line: str, quantity: str, amount: str, description: str = "Stock") -> dict[str, Any]:
    return {"id": item_id, "boq_line": line, "description": description, "quantity": quantity, "amount": amount}


def _rate(contract_data: dict[str, Any], line_id: str, on: date) -> int:
    rate = 0
    for version in contract_data["rate_versions"]:
        if date.fromisoformat(version["effective_from"]) <= on and line_id in version["rates"]:
            rate = minor(version["rates"][line_id])
    return rate


def _round(hundredths_of_minor: int) -> int:
    return int((Decimal(hundredths_of_minor) / 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def honest_history(contract_data: dict[str, Any], periods: list[Period]) -> list[dict[str, Any]]:
    cumulative = contract_data.get("conventions", {}).get("valuation_rounding") == "cumulative"
    package = {line["id"]: line["package"] for line in contract_data["boq"]}
    previous: dict[str, tuple[int, int, int]] = {}  # line -> (quantity, value, unrounded value in 1/100 minor)
    net_before = 0
    certificates = []
    for number, period in enumerate(periods, start=1):
        on = date(2025, number, 25)
        lines = []
        for line_id, quantity_text in sorted(period.quantities.items()):
            quantity = minor(quantity_text)
            before_q, before_v, before_exact = previous.get(line_id, (0, 0, 0))
            exact = before_exact + (quantity - before_q) * _rate(contract_data, line_id, on)
            value = (
                _round(exact)
                if cumulative
                else before_v + _round((quantity - before_q) * _rate(contract_data, line_id, on))
            )
            lines.append(
                {
                    "boq_line": line_id,
                    "package": package[line_id],
                    "scope_hash": f"hash-{line_id.lower()}",
                    "quantity_to_date": money(quantity),
                    "value_to_date": money(value),
                    "previous_quantity": money(before_q),
                    "previous_value": money(before_v),
                }
            )
            previous[line_id] = (quantity, value, exact)
        certificate: dict[str, Any] = {
            "id": f"C{number}",
            "contract": contract_data["id"],
            "number": number,
            "period": on.isoformat()[:7],
            "date": on.isoformat(),
            "invoice_number": f"HB/{number:04d}",
            "vendor": contract_data["contractor"]["name"],
            "description": f"Interim valuation {number}",
            "lines": lines,
            "packages": [],
            "variations": copy.deepcopy(period.variations),
            "materials_on_site": copy.deepcopy(period.materials),
            "retention_releases": [],
            "totals": {"previously_certified": money(net_before), "advance_repaid": "0.00"},
        }
        restate(certificate)
        net_before = minor(certificate["totals"]["net_to_date"])
        certificates.append(certificate)
    return certificates


def restate(certificate: dict[str, Any], *, retention_rate: Decimal = RETENTION_RATE) -> dict[str, Any]:
    """Every derived total from the parts, retention at `retention_rate` of the gross (well within the cap);
    previously certified and advance repaid as stated."""
    by_package: dict[str, int] = {}
    for line in certificate["lines"]:
        by_package[line["package"]] = by_package.get(line["package"], 0) + minor(line["value_to_date"])
    certificate["packages"] = [{"package": p, "value_to_date": money(v)} for p, v in sorted(by_package.items())]
    totals = certificate["totals"]
    work = sum(by_package.values())
    variations = sum(minor(v["amount"]) for v in certificate["variations"])
    on_site = sum(minor(m["amount"]) for m in certificate["materials_on_site"])
    gross = work + variations + on_site
    retention = int((Decimal(gross) * retention_rate).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    net = gross - retention - minor(totals["advance_repaid"])
    totals.update(
        work_to_date=money(work),
        variations_to_date=money(variations),
        materials_on_site=money(on_site),
        gross=money(gross),
        retention_deducted=money(retention),
        retention_released="0.00",
        retention_held=money(retention),
        net_to_date=money(net),
        amount_due=money(net - minor(totals["previously_certified"])),
    )
    return certificate
