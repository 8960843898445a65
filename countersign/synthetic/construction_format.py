"""The construction files' certificate record: the one writer of a `certificates.jsonl` line, shared by both generator
styles so they write the same documented format (docs/schemas/construction-certificate.schema.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from countersign.synthetic.money import format_minor


def certificate_record(certificate: Mapping[str, Any]) -> dict[str, Any]:
    """A certificate in memory (integer minor units and hundredths) as its `certificates.jsonl` record (decimal
    strings). `reverses` and `supersedes` appear only when set, so a history without them writes what it always did."""
    record: dict[str, Any] = {
        "id": certificate["id"],
        "contract": certificate["contract"],
        "number": certificate["number"],
        "period": certificate["period"],
        "date": certificate["date"],
        "invoice_number": certificate["invoice_number"],
        "vendor": certificate["vendor"],
        "description": certificate["description"],
        "lines": [
            {
                "boq_line": line["boq_line"],
                "package": line["package"],
                "scope_hash": line["scope_hash"],
                "quantity_to_date": format_minor(line["quantity_to_date"]),
                "value_to_date": format_minor(line["value_to_date"]),
                "previous_quantity": format_minor(line["previous_quantity"]),
                "previous_value": format_minor(line["previous_value"]),
            }
            for line in certificate["lines"]
        ],
        "packages": [
            {"package": p["package"], "value_to_date": format_minor(p["value_to_date"])}
            for p in certificate["packages"]
        ],
        "variations": [
            {
                "id": v["id"],
                "instruction_ref": v["instruction_ref"],
                "description": v["description"],
                "amount": format_minor(v["amount"]),
                "boq_line": v["boq_line"],
                "quantity_change": None if v["quantity_change"] is None else format_minor(v["quantity_change"]),
                **({} if v.get("reverses") is None else {"reverses": v["reverses"]}),
            }
            for v in certificate["variations"]
        ],
        "materials_on_site": [
            {
                "id": m["id"],
                "boq_line": m["boq_line"],
                "description": m["description"],
                "quantity": format_minor(m["quantity"]),
                "amount": format_minor(m["amount"]),
            }
            for m in certificate["materials_on_site"]
        ],
        "retention_releases": [
            {"event": r["event"], "amount": format_minor(r["amount"])} for r in certificate["retention_releases"]
        ],
        "totals": {key: format_minor(value) for key, value in certificate["totals"].items()},
    }
    if certificate.get("supersedes"):
        record["supersedes"] = certificate["supersedes"]
    return record
