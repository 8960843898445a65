"""Adjudication: the adjudication specialist explains the engine's findings, citing only the clauses retrieved for
them; it never sets an amount or a verdict. Every explanation it ships stamps the clauses it cites into the trace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event
from countersign.engine.workflows.base import Escalate, TaskContext, TaskHandler
from countersign.engine.workflows.certificates.evidence import stage_results
from countersign.engine.workflows.certificates.guards import check_answer
from countersign.engine.workflows.certificates.stages import CLAUSE_RETRIEVAL, DUPLICATE_CHECK, RECONSTRUCTION
from countersign.policy import EscalationReason
from countersign.retrieval.citations import citations_outside, cited_ids
from countersign.states import TraceKind


def adjudication_facts(reconstruction: Mapping[str, Any], duplicates: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "amount_to_certify": reconstruction["amount_to_certify"],
        "previously_certified": reconstruction["previously_certified"],
        "currency": reconstruction["currency"],
        "violations": [
            {key: violation[key] for key in ("invariant", "title", "amounts", "explanation", "clause_ids")}
            for violation in reconstruction["violations"]
        ],
        "holds": [{key: hold[key] for key in ("kind", "other", "overlap")} for hold in duplicates.get("holds", [])],
    }


class Adjudication(TaskHandler):
    halt_escalation = EscalationReason.BUDGET_EXHAUSTED

    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        results = await stage_results(conn, tc)
        reconstruction, retrieval = results[RECONSTRUCTION], results[CLAUSE_RETRIEVAL]
        return {
            "kind": "adjudication",
            "certificate_id": reconstruction["certificate_id"],
            "contract_id": reconstruction["contract_id"],
            "corpus_version": retrieval["corpus_version"],
            "facts": adjudication_facts(reconstruction, results.get(DUPLICATE_CHECK, {})),
            "clauses": retrieval["clauses"],
        }

    def check_result(self, tc: TaskContext, payload: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        """The guard ran in the specialist; the engine checks again, against the set it sent."""
        if result.get("halted"):
            return  # the engine escalates a halted result with the specialist's own reason
        check_answer(result, "adjudication")
        sent = {clause["id"] for clause in payload["clauses"]}
        cited = cited_ids(str(result.get("explanation", "")), [str(c) for c in result.get("citations") or []])
        outside = citations_outside(cited, sent)
        if outside:
            raise Escalate(
                EscalationReason.CONTRADICTORY_EVIDENCE,
                f"the explanation cites clauses outside the retrieval set: {', '.join(outside)}",
            )
        trace = result.get("citation_trace")
        if not isinstance(trace, Mapping) or trace.get("corpus_version") != payload["corpus_version"]:
            raise Escalate(
                EscalationReason.CONTRADICTORY_EVIDENCE,
                "the explanation's citation trace does not name the corpus version its clauses came from",
            )
        hashes = {clause["id"]: clause["sha256"] for clause in payload["clauses"]}
        stamped = {str(c.get("id")): c.get("sha256") for c in trace.get("clauses") or [] if isinstance(c, Mapping)}
        wrong = sorted(clause_id for clause_id, sha in stamped.items() if hashes.get(clause_id) != sha)
        if wrong:
            raise Escalate(
                EscalationReason.CONTRADICTORY_EVIDENCE,
                f"the citation trace stamps clause hashes that are not the retrieved clauses': {', '.join(wrong)}",
            )

    async def complete(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        trace = dict(result.get("citation_trace") or {})
        await append_event(
            conn,
            actor=tc.actor,
            close_id=tc.close.close_id,
            kind=TraceKind.CLAUSES_CITED,
            payload={
                "task": tc.task.id,
                "attempt": tc.attempt,
                "citations": list(result.get("citations", [])),
                **trace,
            },
        )
        return [f"{tc.task.id}: explanation cites {', '.join(result.get('citations', [])) or 'no clause'}"]
