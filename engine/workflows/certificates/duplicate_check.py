"""Duplicate check: the certificate against every earlier submission in its set, across all contracts (no model)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from certificates import Certificate
from certificates.duplicates import DuplicateHold, Thresholds, features, is_duplicate, submission_of
from engine.construction import prior_certificates
from engine.workflows.base import TaskContext, TaskHandler
from engine.workflows.certificates.evidence import decimal_text, run_evidence

HOLD_KIND = "duplicate_submission"


class DuplicateCheck(TaskHandler):
    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()

    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        evidence = await run_evidence(conn, tc)
        earlier = await prior_certificates(conn, evidence.set_id, evidence.certificate.id)
        hold = best_hold(evidence.certificate, [record.parsed() for record in earlier], self.thresholds)
        holds = []
        if hold is not None:
            holds.append(
                {
                    "kind": HOLD_KIND,
                    "other": f"{hold.other_certificate} line {hold.other_line}",
                    "other_certificate": hold.other_certificate,
                    "other_line": hold.other_line,
                    "overlap": decimal_text(hold.overlap),
                    "explanation": hold.explanation(evidence.contract.currency),
                }
            )
        return {
            "kind": "duplicate_check",
            "certificate_id": evidence.certificate.id,
            "compared": len(earlier),
            "thresholds": {
                "amount_tolerance": str(self.thresholds.amount_tolerance),
                "date_window_days": self.thresholds.date_window_days,
                "similarity": str(self.thresholds.similarity),
            },
            "holds": holds,
        }


def best_hold(candidate: Certificate, earlier: list[Certificate], thresholds: Thresholds) -> DuplicateHold | None:
    """The hold against the best-matching earlier submission from the same vendor within the date window, or None
    (the ranking of `certificates.duplicates.DuplicateIndex.check`, over every earlier submission)."""
    submission = submission_of(candidate)
    if submission.amount_due_minor <= 0:
        return None  # nothing would be paid twice
    best: DuplicateHold | None = None
    best_rank: Decimal | None = None
    for other in earlier:
        previous = submission_of(other)
        if previous.vendor_key != submission.vendor_key:
            continue
        if not 0 <= (submission.date - previous.date).days <= thresholds.date_window_days:
            continue
        found = features(submission, previous)
        if not is_duplicate(found, thresholds):
            continue
        rank = Decimal(1) + found.similarity if found.same_invoice else found.similarity
        if best_rank is None or rank > best_rank:
            best_rank = rank
            best = DuplicateHold(
                submission.certificate, previous.certificate, found.other_line, found.overlap_minor, found
            )
    return best
