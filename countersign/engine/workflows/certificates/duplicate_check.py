"""Duplicate check: the certificate against every earlier submission in its set, across all contracts (no model).

Compared as `countersign.certificates.pipeline.run_pipeline` compares (one `DuplicateIndex`, in submission order), with
one
difference of source: the pipeline leaves out a certificate it held, this stage one whose payment gate people
rejected (never certified, so never paid: re-submitting its work is not a double payment). Every earlier certificate
is still noted, so a correction that supersedes a rejected one which itself corrected another is known as such.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection

from countersign.certificates import Certificate, Contract
from countersign.certificates.duplicates import DuplicateHold, DuplicateIndex, Thresholds, submission_of
from countersign.engine.construction import contract_records, prior_certificates
from countersign.engine.workflows.base import TaskContext, TaskHandler
from countersign.engine.workflows.certificates.evidence import decimal_text, run_evidence
from countersign.engine.workflows.certificates.stages import PAYMENT, WORKFLOW
from countersign.store.certificate_runs import never_paid

HOLD_KIND = "duplicate_submission"


async def rejected_at_payment_gate(conn: AsyncConnection[Any], set_id: int) -> frozenset[str]:
    """Certificates of the set whose payment run's latest payment gate was rejected and which nothing certified."""
    return await never_paid(conn, set_id, payment=PAYMENT, workflow=WORKFLOW)


class DuplicateCheck(TaskHandler):
    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()

    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        evidence = await run_evidence(conn, tc)
        earlier = [
            record.parsed() for record in await prior_certificates(conn, evidence.set_id, evidence.certificate.id)
        ]
        contracts = {record.contract_id: record.parsed() for record in await contract_records(conn, evidence.set_id)}
        never_paid = await rejected_at_payment_gate(conn, evidence.set_id)
        hold = best_hold(evidence.certificate, earlier, contracts, self.thresholds, never_paid=never_paid)
        holds = []
        if hold is not None:
            holds.append(
                {
                    "kind": HOLD_KIND,
                    "other": f"{hold.other_certificate} line {hold.other_line}",
                    "other_certificate": hold.other_certificate,
                    "other_line": hold.other_line,
                    "overlap": decimal_text(hold.overlap),
                    "window_days": hold.features.window_days,
                    "explanation": hold.explanation(evidence.contract.currency),
                }
            )
        return {
            "kind": "duplicate_check",
            "certificate_id": evidence.certificate.id,
            "compared": len(earlier) - len(never_paid & {c.id for c in earlier}),
            "not_compared_never_paid": sorted(never_paid & {c.id for c in earlier}),
            "thresholds": {
                "amount_tolerance": str(self.thresholds.amount_tolerance),
                "date_window_days": self.thresholds.date_window_days,  # null: each contract's payment terms
                "similarity": str(self.thresholds.similarity),
            },
            "holds": holds,
        }


def best_hold(
    candidate: Certificate,
    earlier: Sequence[Certificate],
    contracts: Mapping[str, Contract],
    thresholds: Thresholds,
    *,
    never_paid: Container[str] = frozenset(),
) -> DuplicateHold | None:
    """The hold against the best-matching earlier submission, or None: `earlier` in submission order, each compared
    unless it is in `never_paid` (the ranking and rules of
    `countersign.certificates.duplicates.DuplicateIndex.check`)."""
    index = DuplicateIndex(thresholds)
    for other in earlier:
        submission = submission_of(other, contracts.get(other.contract))
        if other.id in never_paid:
            index.note(submission)
        else:
            index.add(submission)
    return index.check(submission_of(candidate, contracts.get(candidate.contract)))
