"""Pay-less notices: when a payment gate is rejected, or approves the reconstructed sum below the claim, the notice
the law requires is written as a document, recorded (`payment_notice`, admitted by the database only against that
gate's outcome, with the deadline computed from the frozen rows), traced and posted in the close's channels, in the
same transaction as the decision's effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event
from countersign.certificates.payment_notices import NoticeGround, PayLessNotice, PaymentDates, pay_less_notice
from countersign.engine.outbox import enqueue_notices
from countersign.engine.workflows.base import TaskContext
from countersign.engine.workflows.certificates.evidence import RunEvidence
from countersign.money.formatting import format_money
from countersign.states import NoticeKind, TraceKind
from countersign.store.payment_notices import NewPaymentNotice, ServedNotice, record_payment_notice

PAY_LESS = NoticeKind.PAY_LESS
NOTICE_TEMPLATE = "pay_less_notice"


class NoticeDeadlineDisagrees(RuntimeError):
    """The database computed another deadline than the engine wrote into the notice: one of them is wrong."""


def dates_of(reconstruction: Mapping[str, Any]) -> PaymentDates:
    raw = reconstruction["payment_dates"]
    return PaymentDates(**{key: date.fromisoformat(str(raw[key])) for key in PaymentDates.__dataclass_fields__})


def grounds_from_findings(certificate: Mapping[str, Any], reconstruction: Mapping[str, Any]) -> list[NoticeGround]:
    """The basis of a rejection: every violated invariant with its amounts and clauses, every duplicate hold."""
    grounds = [
        NoticeGround(
            title=str(v["title"]),
            explanation=str(v["explanation"]),
            amounts=[(str(name), Decimal(str(value))) for name, value in v["amounts"].items()],
            clauses=[str(c["id"]) for c in v.get("clauses", [])] or [str(c) for c in v.get("clause_ids", [])],
        )
        for v in certificate["violations"]
    ]
    grounds += [
        NoticeGround(
            title="Duplicate submission",
            explanation=f"the work is already claimed by {h['other']}",
            amounts=[("overlap", Decimal(str(h["overlap"])))],
            clauses=[],
        )
        for h in certificate["holds"]
    ]
    return grounds


def grounds_from_corrections(certificate: Mapping[str, Any], reconstruction: Mapping[str, Any]) -> list[NoticeGround]:
    """The basis of a reduced certification: each correction the reconstruction made, with the clauses it rests on."""
    return [
        NoticeGround(
            title=str(item["invariant"]).replace("_", " ").capitalize(),
            explanation=str(item["description"]),
            amounts=[("reduction", Decimal(str(item["amount"])))],
            clauses=[str(c) for c in item.get("clause_ids", [])],
        )
        for item in reconstruction.get("corrections", [])
    ]


async def serve_pay_less_notice(
    conn: AsyncConnection[Any],
    tc: TaskContext,
    *,
    evidence: RunEvidence,
    gate_id: str,
    certificate: Mapping[str, Any],
    reconstruction: Mapping[str, Any],
    sum_to_pay: Decimal,
    grounds: list[NoticeGround],
    decided_by: str,
) -> ServedNotice:
    """Record, trace and post the certificate's pay-less notice once; a second call returns the first."""
    dates = dates_of(reconstruction)
    notice = PayLessNotice(
        contract_id=str(certificate["contract_id"]),
        contract_title=str(certificate["contract_title"]),
        contractor=evidence.certificate.vendor,
        certificate_id=evidence.certificate.id,
        certificate_no=int(certificate["certificate_no"]),
        period=str(certificate["period"]),
        currency=str(certificate["currency"]),
        notified_sum=Decimal(str(certificate.get("claimed_amount", certificate["amount_to_certify"]))),
        sum_to_pay=sum_to_pay,
        dates=dates,
        served_on=datetime.now(UTC).date(),
        grounds=grounds,
        decided_by=decided_by,
    )
    document = pay_less_notice(notice)
    basis = [
        {"title": g.title, "explanation": g.explanation, "amounts": {n: f"{v:.2f}" for n, v in g.amounts}}
        | {"clauses": list(g.clauses)}
        for g in grounds
    ]
    row = await record_payment_notice(
        conn,
        NewPaymentNotice(
            kind=NoticeKind.PAY_LESS,
            set_id=evidence.set_id,
            certificate_id=evidence.certificate.id,
            close_id=tc.close.close_id,
            gate_id=gate_id,
            currency=notice.currency,
            notified_sum=notice.notified_sum,
            sum_to_pay=sum_to_pay,
            basis=basis,
            document=document,
            due_date=dates.due_date,
            final_date=dates.final_date,
            deadline=dates.pay_less_notice_by,
        ),
    )
    if not row.recorded_now:  # served already: the first notice stands
        return row
    if row.deadline != dates.pay_less_notice_by:
        raise NoticeDeadlineDisagrees(
            f"certificate {evidence.certificate.id}: the database's pay-less deadline {row.deadline} is not the"
            f" engine's {dates.pay_less_notice_by}"
        )
    await append_event(
        conn,
        actor=tc.actor,
        close_id=tc.close.close_id,
        kind=TraceKind.PAY_LESS_NOTICE_SERVED,
        payload={
            "certificate_id": evidence.certificate.id,
            "contract_id": notice.contract_id,
            "gate_id": gate_id,
            "notice_id": row.notice_id,
            "sha256": row.sha256,
            "currency": notice.currency,
            "notified_sum": f"{notice.notified_sum:.2f}",
            "sum_to_pay": f"{sum_to_pay:.2f}",
            "deadline": row.deadline.isoformat(),
            "served_in_time": row.served_in_time,
            "grounds": len(grounds),
            "channels": [f"{t.platform}:{t.channel}" for t in tc.channels],
        },
    )
    await enqueue_notices(
        conn,
        key=f"{NOTICE_TEMPLATE}:{row.notice_id}",
        template=NOTICE_TEMPLATE,
        close_id=tc.close.close_id,
        channels=tc.channels,
        gate_id=gate_id,
        args={"notice_id": row.notice_id},
    )
    return row


def served_line(tc: TaskContext, certificate_id: str, served: ServedNotice, sum_to_pay: Decimal, currency: str) -> str:
    when = "in time" if served.served_in_time else "LATE: the notified sum is payable in full"
    return (
        f"{tc.task.id}: pay-less notice {served.notice_id} for certificate {certificate_id}: pays "
        f"{format_money(sum_to_pay, currency, locale=tc.locale)}, deadline {served.deadline.isoformat()} ({when})"
    )
