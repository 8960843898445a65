"""A hand-priced contract and four certificates that pass every invariant, worked out in the comments.

Contract sum 2,000.00 (L01 100 m3 at 10.00 in package P1; L02 50 t at 20.00 in P2). Rate version R2 raises L01 to
12.00 from 2025-03-01. Retention 5 % capped at 80.00, half released at practical completion (2025-04-10).
Advance 200.00 repaid at 25 % of the value of work above 10 % of the contract sum (200.00), in full by 80 % (1,600.00).
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from countersign.synthetic.clause_topics import TOPIC_KEYS

CONTRACT: dict[str, Any] = {
    "id": "CT-T",
    "form": "CSB",
    "title": "Test works",
    "contractor": {"vendor_id": "V-1", "name": "Kestrel Construction Ltd"},
    "currency": "GBP",
    "start_period": "2025-01",
    "boq": [
        {
            "id": "L01",
            "package": "P1",
            "description": "Excavation",
            "unit": "m3",
            "quantity": "100.00",
            "rate": "10.00",
        },
        {"id": "L02", "package": "P2", "description": "Steelwork", "unit": "t", "quantity": "50.00", "rate": "20.00"},
    ],
    "rate_versions": [
        {"version": "R1", "effective_from": "2025-01-01", "rates": {"L01": "10.00", "L02": "20.00"}},
        {"version": "R2", "effective_from": "2025-03-01", "rates": {"L01": "12.00"}},
    ],
    "retention": {
        "rate": "0.05",
        "cap": "80.00",
        "release_at_practical_completion": "0.5",
        "defects_period_months": 12,
    },
    "advance": {"amount": "200.00", "start_pct": "0.10", "rate": "0.25", "repaid_by_pct": "0.80"},
    "packages": [
        {"id": "P1", "name": "Substructure", "scope": {"L01": "hash-l01"}},
        {"id": "P2", "name": "Frame", "scope": {"L02": "hash-l02"}},
    ],
    "practical_completion": "2025-04-10",
    "clause_refs": {topic: f"CSB-{index // 10 + 1}.{index % 10 + 1}" for index, topic in enumerate(sorted(TOPIC_KEYS))},
}


def _line(line_id: str, package: str, q: str, v: str, pq: str, pv: str) -> dict[str, Any]:
    return {
        "boq_line": line_id,
        "package": package,
        "scope_hash": f"hash-{line_id.lower()}",
        "quantity_to_date": q,
        "value_to_date": v,
        "previous_quantity": pq,
        "previous_value": pv,
    }


def _certificate(
    number: int, day: str, lines: list[dict[str, Any]], totals: dict[str, str], **extra: Any
) -> dict[str, Any]:
    certificate: dict[str, Any] = {
        "id": f"C{number}",
        "contract": "CT-T",
        "number": number,
        "period": day[:7],
        "date": day,
        "invoice_number": f"KC/2025/{number:04d}",
        "vendor": "Kestrel Construction Ltd",
        "description": f"Interim valuation {number}: Test works",
        "lines": lines,
        "packages": [],
        "variations": [],
        "materials_on_site": [],
        "retention_releases": [],
        "totals": totals,
    }
    certificate.update(extra)
    by_package: dict[str, int] = {}
    for line in lines:
        by_package[line["package"]] = by_package.get(line["package"], 0) + minor(line["value_to_date"])
    certificate["packages"] = [{"package": p, "value_to_date": money(v)} for p, v in sorted(by_package.items())]
    return certificate


def minor(text: str) -> int:
    return int(Decimal(text) * 100)


def money(value: int) -> str:
    sign = "-" if value < 0 else ""
    return f"{sign}{abs(value) // 100}.{abs(value) % 100:02d}"


def _totals(**values: str) -> dict[str, str]:
    return dict(values)


# 1: work 500.00; retention 25.00; advance (500 - 200) x 25 % = 75.00; net 400.00; due 400.00.
CERTIFICATE_1 = _certificate(
    1,
    "2025-01-25",
    [_line("L01", "P1", "30.00", "300.00", "0.00", "0.00"), _line("L02", "P2", "10.00", "200.00", "0.00", "0.00")],
    _totals(
        work_to_date="500.00",
        variations_to_date="0.00",
        materials_on_site="0.00",
        gross="500.00",
        retention_deducted="25.00",
        retention_released="0.00",
        retention_held="25.00",
        advance_repaid="75.00",
        net_to_date="400.00",
        previously_certified="0.00",
        amount_due="400.00",
    ),
)
# 2: work 1,000.00 + materials 100.00 (M1: 20 m3 for L01, listed at 60 m3); retention 55.00; advance
# (1,000 - 200) x 25 % = 200.00 (all of it); net 845.00; due 445.00.
CERTIFICATE_2 = _certificate(
    2,
    "2025-02-25",
    [
        _line("L01", "P1", "60.00", "600.00", "30.00", "300.00"),
        _line("L02", "P2", "20.00", "400.00", "10.00", "200.00"),
    ],
    _totals(
        work_to_date="1000.00",
        variations_to_date="0.00",
        materials_on_site="100.00",
        gross="1100.00",
        retention_deducted="55.00",
        retention_released="0.00",
        retention_held="55.00",
        advance_repaid="200.00",
        net_to_date="845.00",
        previously_certified="400.00",
        amount_due="445.00",
    ),
    materials_on_site=[
        {"id": "M1", "boq_line": "L01", "description": "Stone", "quantity": "20.00", "amount": "100.00"}
    ],
)
# 3: L01's 30 m3 this period at R2's 12.00 = 360.00; work 1,560.00 + variation 100.00; M1 incorporated (90 >= 80)
# and gone; retention 5 % of 1,660.00 = 83.00, capped at 80.00; advance 200.00; net 1,380.00; due 535.00.
CERTIFICATE_3 = _certificate(
    3,
    "2025-03-25",
    [
        _line("L01", "P1", "90.00", "960.00", "60.00", "600.00"),
        _line("L02", "P2", "30.00", "600.00", "20.00", "400.00"),
    ],
    _totals(
        work_to_date="1560.00",
        variations_to_date="100.00",
        materials_on_site="0.00",
        gross="1660.00",
        retention_deducted="80.00",
        retention_released="0.00",
        retention_held="80.00",
        advance_repaid="200.00",
        net_to_date="1380.00",
        previously_certified="845.00",
        amount_due="535.00",
    ),
    variations=[
        {
            "id": "V01",
            "instruction_ref": "CAI-001",
            "description": "Extra drainage",
            "amount": "100.00",
            "boq_line": None,
            "quantity_change": None,
        }
    ],
)
# 4 (after practical completion): work 2,080.00 + 100.00; retention 80.00 with half (40.00) released; net 1,940.00.
CERTIFICATE_4 = _certificate(
    4,
    "2025-04-25",
    [
        _line("L01", "P1", "100.00", "1080.00", "90.00", "960.00"),
        _line("L02", "P2", "50.00", "1000.00", "30.00", "600.00"),
    ],
    _totals(
        work_to_date="2080.00",
        variations_to_date="100.00",
        materials_on_site="0.00",
        gross="2180.00",
        retention_deducted="80.00",
        retention_released="40.00",
        retention_held="40.00",
        advance_repaid="200.00",
        net_to_date="1940.00",
        previously_certified="1380.00",
        amount_due="560.00",
    ),
    variations=copy.deepcopy(CERTIFICATE_3["variations"]),
    retention_releases=[{"event": "practical_completion", "amount": "40.00"}],
)
HISTORY = (CERTIFICATE_1, CERTIFICATE_2, CERTIFICATE_3, CERTIFICATE_4)


def history() -> list[dict[str, Any]]:
    return copy.deepcopy(list(HISTORY))


def refoot(certificate: dict[str, Any]) -> dict[str, Any]:
    """Recompute the derived totals from the parts, keeping retention deducted, advance and previous as stated."""
    by_package: dict[str, int] = {}
    for line in certificate["lines"]:
        by_package[line["package"]] = by_package.get(line["package"], 0) + minor(line["value_to_date"])
    certificate["packages"] = [{"package": p, "value_to_date": money(v)} for p, v in sorted(by_package.items())]
    totals = certificate["totals"]
    work = sum(by_package.values())
    variations = sum(minor(v["amount"]) for v in certificate["variations"])
    materials = sum(minor(m["amount"]) for m in certificate["materials_on_site"])
    released = sum(minor(r["amount"]) for r in certificate["retention_releases"])
    gross = work + variations + materials
    held = minor(totals["retention_deducted"]) - released
    net = gross - held - minor(totals["advance_repaid"])
    totals.update(
        work_to_date=money(work),
        variations_to_date=money(variations),
        materials_on_site=money(materials),
        gross=money(gross),
        retention_released=money(released),
        retention_held=money(held),
        net_to_date=money(net),
        amount_due=money(net - minor(totals["previously_certified"])),
    )
    return certificate
