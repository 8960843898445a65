"""Extraction: the certificate's prose goes to the extraction specialist, which may summarise it and flag hostile
text, and never returns an amount, a verdict or a gate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.workflows.base import Escalate, TaskContext, TaskHandler
from countersign.engine.workflows.certificates.evidence import run_evidence
from countersign.engine.workflows.certificates.guards import check_answer
from countersign.policy import EscalationReason


class Extraction(TaskHandler):
    halt_escalation = EscalationReason.BUDGET_EXHAUSTED

    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        certificate = (await run_evidence(conn, tc)).certificate
        texts = [{"field": "description", "text": certificate.description}]
        texts += [{"field": f"variation:{v.id}", "text": v.description} for v in certificate.variations]
        return {
            "kind": "extraction",
            "certificate_id": certificate.id,
            "contract_id": certificate.contract,
            "texts": texts,
        }

    def check_result(self, tc: TaskContext, payload: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        if result.get("halted"):
            return  # the engine escalates a halted result with the specialist's own reason
        check_answer(result, "extraction")
        sent = {text["field"] for text in payload["texts"]}
        fields = [str(field) for field in result.get("injection_fields") or []]
        if result.get("suspected_injection") is True and tc.escalation != EscalationReason.SUSPECTED_INJECTION:
            named = ", ".join(field for field in fields if field in sent) or "the certificate's text"
            raise Escalate(
                EscalationReason.SUSPECTED_INJECTION,
                f"certificate {payload['certificate_id']}: text in {named} reads as instructions to the system",
            )
