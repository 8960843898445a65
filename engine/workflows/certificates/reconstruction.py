"""Reconstruction and invariants: the contract's position rebuilt from every earlier certificate in the set, and the
fourteen invariants checked for this certificate against it (the domain's arithmetic; no model)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from certificates import (
    Certificate,
    Contract,
    InvariantResult,
    Position,
    advance_position,
    check_certificate,
    opening_position,
)
from certificates.pipeline import run_pipeline
from engine.construction import contract_records, prior_certificates
from engine.workflows.base import TaskContext, TaskHandler
from engine.workflows.certificates.evidence import decimal_text, money, run_evidence


def invariant_title(name: str) -> str:
    """`"retention_released_once"` -> `"Retention released once"`."""
    words = name.replace("_", " ")
    return words[:1].upper() + words[1:]


def position_before(contract: Contract, contracts: dict[str, Contract], earlier: list[Certificate]) -> Position:
    """The contract's position after every earlier submission the domain's pipeline certifies (a duplicate or a
    certificate with a violation is held and never moves it)."""
    run = run_pipeline(contracts, earlier)
    position = opening_position(contract)
    for assessment in run.assessments:
        if assessment.certificate.contract == contract.id and assessment.certified:
            position = advance_position(assessment.position, contract, assessment.certificate)
    return position


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
        position = position_before(contract, contracts, earlier)
        results = check_certificate(contract, position, certificate)
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
            "amount_to_certify": money(totals.amount_due_minor),
            "previously_certified": money(position.net_to_date_minor),
            "stated_previously_certified": money(totals.previously_certified_minor),
            "gross_to_date": money(totals.gross_minor),
            "retention_to_date": money(totals.retention_held_minor),
            "advance_repaid_to_date": money(totals.advance_repaid_minor),
            "certified_before": position.certified_count,
            "last_certified": position.last_certificate,
        }
