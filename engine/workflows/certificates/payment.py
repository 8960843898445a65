"""Payment: the card's certificate summary, a gate tiered by the amount to certify and by the findings, and, once
identified people approve it, the certification (which the database admits only through that gate)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from audit.trace import append_event
from engine.workflows.base import TaskContext, TaskHandler
from engine.workflows.certificates.evidence import run_escalation, stage_results
from engine.workflows.certificates.queries import approval_gate_id, insert_certification
from engine.workflows.certificates.stages import ADJUDICATION, CLAUSE_RETRIEVAL, DUPLICATE_CHECK, RECONSTRUCTION
from money.formatting import format_money

CERTIFICATE_KEY = "certificate"


class NoPaymentGate(RuntimeError):
    """A certification was asked for without the approval gate that must stand behind it."""


def certificate_summary(
    reconstruction: Mapping[str, Any],
    duplicates: Mapping[str, Any],
    retrieval: Mapping[str, Any],
    adjudication: Mapping[str, Any],
    escalation: str | None,
) -> dict[str, Any]:
    """`summary["certificate"]` as `cards/certificates.py` reads it: amounts as decimal strings, text as given."""
    titles = {clause["id"]: clause["title"] for clause in retrieval.get("clauses", [])}
    cited = set(adjudication.get("citations", []))
    retrieved = {v["invariant"]: v["retrieved"] for v in retrieval.get("violations", [])}
    violations = []
    for violation in reconstruction["violations"]:
        clause_ids = [c for c in violation["clause_ids"] if c in titles]
        clause_ids += [c for c in retrieved.get(violation["invariant"], []) if c in cited and c not in clause_ids]
        violations.append(
            {
                "invariant": violation["invariant"],
                "title": violation["title"],
                "explanation": violation["explanation"],
                "amounts": violation["amounts"],
                "lines": violation["lines"],
                "clauses": [{"id": clause_id, "title": titles[clause_id]} for clause_id in clause_ids],
            }
        )
    return {
        "contract_id": reconstruction["contract_id"],
        "contract_title": reconstruction["contract_title"],
        "certificate_no": reconstruction["certificate_no"],
        "period": reconstruction["period"],
        "currency": reconstruction["currency"],
        "amount_to_certify": reconstruction["amount_to_certify"],
        "previously_certified": reconstruction["previously_certified"],
        "gross_to_date": reconstruction["gross_to_date"],
        "retention_to_date": reconstruction["retention_to_date"],
        "advance_repaid_to_date": reconstruction["advance_repaid_to_date"],
        "violations": violations,
        "holds": [{key: hold[key] for key in ("kind", "other", "overlap")} for hold in duplicates.get("holds", [])],
        "escalation": escalation,
        "explanation_source": adjudication.get("source", "fallback"),
        "explanation": adjudication.get("explanation", ""),
        "citations": list(adjudication.get("citations", [])),
    }


class Payment(TaskHandler):
    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        results = await stage_results(conn, tc)
        reconstruction, adjudication = results[RECONSTRUCTION], results[ADJUDICATION]
        summary = certificate_summary(
            reconstruction,
            results.get(DUPLICATE_CHECK, {}),
            results.get(CLAUSE_RETRIEVAL, {}),
            adjudication,
            await run_escalation(conn, tc),
        )
        return {
            "kind": "payment",
            "certificate_id": reconstruction["certificate_id"],
            CERTIFICATE_KEY: summary,
            "citation_trace": adjudication.get("citation_trace", {}),
        }

    def gate_amount(self, result: Mapping[str, Any]) -> Decimal | None:
        return Decimal(result[CERTIFICATE_KEY]["amount_to_certify"])

    def gate_findings(self, result: Mapping[str, Any]) -> int:
        certificate = result[CERTIFICATE_KEY]
        return len(certificate["violations"]) + len(certificate["holds"])

    def gate_summary(self, result: Mapping[str, Any]) -> dict[str, Any]:
        if CERTIFICATE_KEY not in result:
            return {}
        return {"kind": "payment", CERTIFICATE_KEY: result[CERTIFICATE_KEY]}

    async def complete(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        """Certify the certificate through the gate the approvers decided (the database checks gate and amount)."""
        certificate = result[CERTIFICATE_KEY]
        gate_id = await approval_gate_id(conn, tc.close.close_id, tc.task.id, tc.attempt)
        if gate_id is None:
            raise NoPaymentGate(f"{result['certificate_id']}: no approval gate for attempt {tc.attempt}")
        await insert_certification(
            conn,
            certificate_id=result["certificate_id"],
            close_id=tc.close.close_id,
            gate_id=gate_id,
            amount=Decimal(certificate["amount_to_certify"]),
            currency=certificate["currency"],
        )
        await append_event(
            conn,
            actor=tc.actor,
            close_id=tc.close.close_id,
            kind="certificate_certified",
            payload={
                "certificate_id": result["certificate_id"],
                "contract_id": certificate["contract_id"],
                "amount": certificate["amount_to_certify"],
                "currency": certificate["currency"],
                "gate_id": gate_id,
                "violations": [v["invariant"] for v in certificate["violations"]],
                "holds": [h["other"] for h in certificate["holds"]],
                "citation_trace": dict(result.get("citation_trace") or {}),
            },
        )
        return [
            f"{tc.task.id}: certificate {result['certificate_id']} certified for "
            + format_money(Decimal(certificate["amount_to_certify"]), certificate["currency"], locale=tc.locale)
        ]
