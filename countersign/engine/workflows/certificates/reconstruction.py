"""Reconstruction and invariants: the contract's position after everything actually certified before this certificate
(recorded certifications first, `certified_history`), the invariants checked against it, and the sum a quantity
surveyor would certify instead of the claim (the domain's arithmetic; no model)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.certificates import InvariantResult, check_certificate
from countersign.certificates.conventions import read_conventions
from countersign.certificates.correction import reconstructed_amount_due
from countersign.certificates.payment_notices import payment_dates
from countersign.engine.construction import contract_records, prior_certificates
from countersign.engine.workflows.base import TaskContext, TaskHandler
from countersign.engine.workflows.certificates.certified_history import certified_history, earlier_outcomes, received_on
from countersign.engine.workflows.certificates.evidence import decimal_text, money, run_evidence


def invariant_title(name: str) -> str:
    """`"retention_released_once"` -> `"Retention released once"`."""
    words = name.replace("_", " ")
    return words[:1].upper() + words[1:]


def violation_json(result: InvariantResult) -> dict[str, Any]:
    return {
        "invariant": result.name,
        "title": invariant_title(result.name),
        "verdict": result.verdict,
        "amounts": {name: decimal_text(amount) for name, amount in result.amounts.items()},
        "lines": list(result.lines),
        "explanation": result.explanation,
        "clause_ids": list(result.clause_ids),
    }


class Reconstruction(TaskHandler):
    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        evidence = await run_evidence(conn, tc)
        contract, certificate = evidence.contract, evidence.certificate
        contracts = {record.contract_id: record.parsed() for record in await contract_records(conn, evidence.set_id)}
        earlier = [record.parsed() for record in await prior_certificates(conn, evidence.set_id, certificate.id)]
        ours = [c.id for c in earlier if c.contract == contract.id]
        history = certified_history(contract, contracts, earlier, await earlier_outcomes(conn, evidence.set_id, ours))
        position = history.position
        results = check_certificate(contract, position, certificate)
        questions = read_conventions(contract, position, certificate).questions
        correction = reconstructed_amount_due(contract, position, certificate)
        dates = payment_dates(
            contract.payment_terms,
            valuation_date=certificate.date,
            received_on=await received_on(conn, evidence.set_id),
        )
        totals = certificate.totals
        return {
            "kind": "reconstruction",
            "certificate_id": certificate.id,
            "contract_id": contract.id,
            "contract_title": contract.title,
            "form": contract.form,
            "certificate_no": certificate.number,
            "period": certificate.period,
            "currency": contract.currency,
            "violations": [violation_json(result) for result in results if result.violated],
            "passed": [result.name for result in results if not result.violated],
            "notes": [note for result in results for note in result.notes],
            "questions": list(questions),
            "contractor": certificate.vendor,
            "amount_to_certify": money(totals.amount_due_minor),
            "claimed_amount": money(correction.claimed_minor),
            "reconstructed_amount": money(correction.reconstructed_minor),
            "corrections": [
                {
                    "invariant": item.invariant,
                    "description": item.description,
                    "amount": money(item.amount_minor),
                    "clause_ids": list(item.clause_ids),
                }
                for item in correction.items
            ],
            "previously_certified": money(position.net_to_date_minor),
            "previously_certified_reconstructed": money(history.documents_position.net_to_date_minor),
            "certified_history": [entry.as_json() for entry in history.entries],
            "not_certified_before": list(history.skipped),
            "stated_previously_certified": money(totals.previously_certified_minor),
            "payment_dates": dates.as_json(),
            "gross_to_date": money(totals.gross_minor),
            "retention_to_date": money(totals.retention_held_minor),
            "advance_repaid_to_date": money(totals.advance_repaid_minor),
            "certified_before": position.certified_count,
            "last_certified": position.last_certificate,
        }
