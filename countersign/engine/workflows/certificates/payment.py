"""Payment: the card's certificate summary, a gate tiered by the amount to certify and by the findings, and, once
identified people approve it, the certification (which the database admits only through that gate)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from enum import StrEnum
from functools import partial
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event
from countersign.certificates.amendment import from_minor
from countersign.certificates.payment_notices import NoticeGround
from countersign.engine.workflows.base import TaskContext, TaskHandler
from countersign.engine.workflows.certificates.evidence import decimal_text, run_escalation, run_evidence, stage_results
from countersign.engine.workflows.certificates.pay_less import (
    grounds_from_corrections,
    grounds_from_findings,
    serve_notice,
    serve_pay_less_notice,
    served_line,
)
from countersign.engine.workflows.certificates.queries import approval_gate_id, insert_certification
from countersign.engine.workflows.certificates.stages import (
    ADJUDICATION,
    CLAUSE_RETRIEVAL,
    DUPLICATE_CHECK,
    RECONSTRUCTION,
)
from countersign.money.formatting import format_money
from countersign.states import NoticeKind, TraceKind
from countersign.store.amendments import GateAmendment, read_gate_amendment

CERTIFICATE_KEY = "certificate"
ESCALATE_BEFORE_DEADLINE = timedelta(days=2)
# The deadlines a decision on the payment gate serves a notice against (`PaymentDates.as_json`'s names); a
# reconstruction recorded before the payment notice proper (migration 0025) has only the pay-less one.
NOTICE_DEADLINES = ("payment_notice_by", "pay_less_notice_by")


class Basis(StrEnum):
    """Which sum a payment gate's approval certifies (recorded in `payment_certification.basis`)."""

    CLAIMED = "claimed"
    """The contractor's claim: the checks found nothing to correct."""
    RECONSTRUCTED = "reconstructed"
    """The sum the checks rebuilt from everything certified before, each correction itemised on the card."""
    AMENDED = "amended"
    """Another sum than proposed, certified by a quantity surveyor line by line with their reason (approve with
    edits: the database stamps it from the gate's amended approvals)."""


def amendment_grounds(amended: GateAmendment) -> list[NoticeGround]:
    """The approver's basis, line by line: each adjusted line with its proposed and certified sums and the reason."""
    a = amended.amendment
    return [
        NoticeGround(
            title=f"Line {item.line} amended by the quantity surveyor",
            explanation=item.reason,
            amounts=[
                ("proposed", from_minor(item.proposed_minor, a.currency)),
                ("certified", from_minor(item.certified_minor, a.currency)),
            ],
            clauses=[],
        )
        for item in a.adjustments
    ]


def amended_by(amended: GateAmendment, gate_id: str, money: Callable[[Decimal], str]) -> str:
    a = amended.amendment
    return (
        f"{amended.display_name} (quantity surveyor) certified {money(a.certified)} instead of the proposed"
        f" {money(a.proposed)} at payment gate {gate_id}, on this basis: {amended.reason}"
    )


def amendment_facts(amended: GateAmendment, proposed: Decimal) -> dict[str, Any]:
    """The amendment in the certification's trace event: who, why, both sums and each line."""
    a = amended.amendment
    return {
        "proposed_amount": f"{proposed:.2f}",
        "amended_by": amended.principal_id,
        "amendment_reason": amended.reason,
        "adjustments": [
            {
                "line": item.line,
                "proposed": str(from_minor(item.proposed_minor, a.currency)),
                "certified": str(from_minor(item.certified_minor, a.currency)),
                "reason": item.reason,
            }
            for item in a.adjustments
        ],
    }


class NoPaymentGate(RuntimeError):
    """A certification was asked for without the approval gate that must stand behind it."""


def certificate_summary(
    reconstruction: Mapping[str, Any],
    duplicates: Mapping[str, Any],
    retrieval: Mapping[str, Any],
    adjudication: Mapping[str, Any],
    escalation: str | None,
) -> dict[str, Any]:
    """`summary["certificate"]` as `countersign/cards/certificates.py` reads it: amounts as decimal strings, text as
    given."""
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
    claimed = Decimal(reconstruction.get("claimed_amount", reconstruction["amount_to_certify"]))
    reconstructed = Decimal(reconstruction.get("reconstructed_amount", claimed))
    corrected = bool(reconstruction["violations"])
    # With violations, approval certifies the sum the checks rebuilt, never below nothing (a recovery from the
    # contractor is not this gate's to make); without, the claim as stated.
    to_certify = max(reconstructed, Decimal(0)) if corrected else claimed
    previously = Decimal(reconstruction["previously_certified"])
    from_documents = Decimal(reconstruction.get("previously_certified_reconstructed", previously))
    return {
        "contract_id": reconstruction["contract_id"],
        "contract_title": reconstruction["contract_title"],
        "certificate_no": reconstruction["certificate_no"],
        "period": reconstruction["period"],
        "currency": reconstruction["currency"],
        "amount_to_certify": decimal_text(to_certify),
        "claimed_amount": decimal_text(claimed),
        "basis": Basis.RECONSTRUCTED.value if corrected else Basis.CLAIMED.value,
        "corrections": [
            {key: item[key] for key in ("invariant", "description", "amount")}
            for item in reconstruction.get("corrections", [])
        ]
        if corrected and to_certify != claimed
        else [],
        "previously_certified": reconstruction["previously_certified"],
        "previously_certified_reconstructed": None if from_documents == previously else decimal_text(from_documents),
        "payment_dates": reconstruction.get("payment_dates"),
        "gross_to_date": reconstruction["gross_to_date"],
        "retention_to_date": reconstruction["retention_to_date"],
        "advance_repaid_to_date": reconstruction["advance_repaid_to_date"],
        "violations": violations,
        "notes": list(reconstruction.get("notes", [])),
        "questions": list(reconstruction.get("questions", [])),
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

    def gate_due_by(self, result: Mapping[str, Any]) -> datetime | None:
        """Two days before the first notice deadline (midday UTC): the gate is escalated as that deadline nears.

        Deciding the gate serves the payment notice (s. 110A), so its deadline counts as much as the pay-less notice's
        (s. 111). Under the Scheme's terms it is the nearer one: 5 days after the due date against 10."""
        dates = result.get(CERTIFICATE_KEY, {}).get("payment_dates")
        if not dates:
            return None
        deadline = min(date.fromisoformat(str(dates[key])) for key in NOTICE_DEADLINES if key in dates)
        return datetime.combine(deadline - ESCALATE_BEFORE_DEADLINE, time(12), tzinfo=UTC)

    async def complete(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        """Certify the certificate through the gate the approvers decided (the database checks gate and amount); a
        certification below the claim serves the pay-less notice with it."""
        certificate = result[CERTIFICATE_KEY]
        gate_id = await approval_gate_id(conn, tc.close.close_id, tc.task.id, tc.attempt)
        if gate_id is None:
            raise NoPaymentGate(f"{result['certificate_id']}: no approval gate for attempt {tc.attempt}")
        proposed = Decimal(certificate["amount_to_certify"])
        claimed = Decimal(certificate.get("claimed_amount", certificate["amount_to_certify"]))
        amended = await read_gate_amendment(conn, gate_id)
        amount = proposed if amended is None else amended.amendment.certified
        await insert_certification(
            conn,
            certificate_id=result["certificate_id"],
            close_id=tc.close.close_id,
            gate_id=gate_id,
            amount=amount,
            currency=certificate["currency"],
        )
        await append_event(
            conn,
            actor=tc.actor,
            close_id=tc.close.close_id,
            kind=TraceKind.CERTIFICATE_CERTIFIED,
            payload={
                "certificate_id": result["certificate_id"],
                "contract_id": certificate["contract_id"],
                "amount": certificate["amount_to_certify"] if amended is None else f"{amount:.2f}",
                "claimed_amount": f"{claimed:.2f}",
                "basis": Basis.AMENDED.value if amended else certificate.get("basis", Basis.CLAIMED.value),
                **(amendment_facts(amended, proposed) if amended is not None else {}),
                "difference": f"{claimed - amount:.2f}",
                "currency": certificate["currency"],
                "gate_id": gate_id,
                "violations": [v["invariant"] for v in certificate["violations"]],
                "holds": [h["other"] for h in certificate["holds"]],
                "citation_trace": dict(result.get("citation_trace") or {}),
            },
        )
        money = partial(format_money, currency=certificate["currency"], locale=tc.locale)
        lines = [
            f"{tc.task.id}: certificate {result['certificate_id']} certified for {money(amount)}"
            + (f" (claimed {money(claimed)}, the reconstructed sum)" if amount != claimed and not amended else "")
            + (f" (proposed {money(proposed)}, amended by {amended.display_name})" if amended else "")
        ]
        evidence = await run_evidence(conn, tc)
        reconstruction = (await stage_results(conn, tc))[RECONSTRUCTION]
        corrections = grounds_from_corrections(certificate, reconstruction) if proposed < claimed else []
        if amended is not None:
            grounds = [*corrections, *amendment_grounds(amended)]
            decided_by = amended_by(amended, gate_id, money)
        else:
            grounds = corrections
            decided_by = (
                f"approvers certified {'the reconstructed sum' if amount < claimed else 'the sum applied for'}"
                f" at payment gate {gate_id}"
            )
        payment = await serve_notice(  # s. 110A, on every certification: the sum certified and its basis
            conn,
            tc,
            NoticeKind.PAYMENT,
            evidence=evidence,
            gate_id=gate_id,
            certificate=certificate,
            reconstruction=reconstruction,
            sum_to_pay=amount,
            grounds=grounds if amount < claimed or amended else [],
            decided_by=decided_by,
        )
        lines.append(
            served_line(tc, result["certificate_id"], payment, amount, certificate["currency"], NoticeKind.PAYMENT)
        )
        if amount < claimed:
            served = await serve_pay_less_notice(
                conn,
                tc,
                evidence=evidence,
                gate_id=gate_id,
                certificate=certificate,
                reconstruction=reconstruction,
                sum_to_pay=amount,
                grounds=grounds,
                decided_by=decided_by,
            )
            lines.append(served_line(tc, result["certificate_id"], served, amount, certificate["currency"]))
        return lines

    async def rejected(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        """A rejected certificate pays nothing: unless nothing was claimed, the pay-less notice says so and why."""
        certificate = result.get(CERTIFICATE_KEY)
        if certificate is None:
            return []
        claimed = Decimal(certificate.get("claimed_amount", certificate["amount_to_certify"]))
        gate_id = await approval_gate_id(conn, tc.close.close_id, tc.task.id, tc.attempt)
        if gate_id is None:
            return []
        evidence = await run_evidence(conn, tc)
        reconstruction = (await stage_results(conn, tc))[RECONSTRUCTION]
        grounds = grounds_from_findings(certificate, reconstruction)
        decided_by = f"approvers rejected the certificate at payment gate {gate_id}"
        payment = await serve_notice(  # s. 110A: nothing is due, and why
            conn,
            tc,
            NoticeKind.PAYMENT,
            evidence=evidence,
            gate_id=gate_id,
            certificate=certificate,
            reconstruction=reconstruction,
            sum_to_pay=Decimal(0),
            grounds=grounds,
            decided_by=decided_by,
        )
        lines = [
            served_line(tc, result["certificate_id"], payment, Decimal(0), certificate["currency"], NoticeKind.PAYMENT)
        ]
        if claimed <= 0:
            return lines
        served = await serve_pay_less_notice(
            conn,
            tc,
            evidence=evidence,
            gate_id=gate_id,
            certificate=certificate,
            reconstruction=reconstruction,
            sum_to_pay=Decimal(0),
            grounds=grounds,
            decided_by=decided_by,
        )
        return [*lines, served_line(tc, result["certificate_id"], served, Decimal(0), certificate["currency"])]
