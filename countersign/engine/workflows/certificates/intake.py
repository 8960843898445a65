"""Intake: the certificate and its contract are in the run's construction set, with every parameter the checks need."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.certificates import Contract
from countersign.certificates.invariants import CLAUSE_TOPICS
from countersign.engine.workflows.base import Escalate, TaskContext, TaskHandler
from countersign.engine.workflows.certificates.evidence import run_evidence
from countersign.policy import EscalationReason


def missing_parameters(contract: Contract) -> list[str]:
    """Contract parameters an invariant needs and the contract does not give."""
    missing = [
        f"clause_refs.{topic}"
        for topic in sorted({topic for topics in CLAUSE_TOPICS.values() for topic in topics})
        if topic not in contract.clause_refs
    ]
    if not contract.rate_versions:
        missing.append("rate_versions")
    return missing


class Intake(TaskHandler):
    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        evidence = await run_evidence(conn, tc)
        missing = missing_parameters(evidence.contract)
        if missing and tc.escalation != EscalationReason.MISSING_PARAMETER:
            raise Escalate(
                EscalationReason.MISSING_PARAMETER,
                f"contract {evidence.contract.id} lacks {', '.join(missing)}, which the invariants need",
            )
        return {
            "kind": "intake",
            "construction_set_id": evidence.set_id,
            "certificate_id": evidence.certificate.id,
            "certificate_sha256": evidence.certificate_record.sha256,
            "contract_id": evidence.contract.id,
            "contract_sha256": evidence.contract_record.sha256,
            "form": evidence.contract.form,
            "number": evidence.certificate.number,
            "period": evidence.certificate.period,
            "missing_parameters": missing,
        }
