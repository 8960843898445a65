"""The payer's notices on a decided certificate, as documents: recorded (`payment_notice`, admitted by the database
only against the payment gate's outcome, with the deadline computed from the frozen rows), traced and posted in the
close's channels, in the same transaction as the decision's effect.

- The payment notice (s. 110A), on every decided certificate: the sum considered due (what was certified, or
  nothing on a rejection) and its basis, due 5 days after the due date (migration 0025).
- The pay-less notice (s. 111), when a payment gate is rejected or certifies less than the claim (migration 0018).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event
from countersign.certificates.payment_notices import (
    NoticeGround,
    PayLessNotice,
    PaymentDates,
    pay_less_notice,
    payment_notice,
)
from countersign.engine.outbox import enqueue_notices
from countersign.engine.workflows.base import TaskContext
from countersign.engine.workflows.certificates.evidence import RunEvidence
from countersign.money.formatting import format_money
from countersign.states import NoticeKind, TraceKind
from countersign.store.payment_notices import NewPaymentNotice, ServedNotice, record_payment_notice

PAY_LESS = NoticeKind.PAY_LESS
NOTICE_TEMPLATE = "pay_less_notice"
# Each kind's document, the day it must be served by, its outbox template and its trace event.
_DOCUMENT = {NoticeKind.PAY_LESS: pay_less_notice, NoticeKind.PAYMENT: payment_notice}
_TEMPLATE = {NoticeKind.PAY_LESS: NOTICE_TEMPLATE, NoticeKind.PAYMENT: "payment_notice"}
_WORDS = {NoticeKind.PAY_LESS: "pay-less", NoticeKind.PAYMENT: "payment"}
_SERVED = {NoticeKind.PAY_LESS: TraceKind.PAY_LESS_NOTICE_SERVED, NoticeKind.PAYMENT: TraceKind.PAYMENT_NOTICE_SERVED}


def deadline_of(kind: NoticeKind, dates: PaymentDates) -> date:
    return dates.payment_notice_by if kind is NoticeKind.PAYMENT else dates.pay_less_notice_by


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
    return await serve_notice(
        conn,
        tc,
        NoticeKind.PAY_LESS,
        evidence=evidence,
        gate_id=gate_id,
        certificate=certificate,
        reconstruction=reconstruction,
        sum_to_pay=sum_to_pay,
        grounds=grounds,
        decided_by=decided_by,
    )


async def serve_notice(
    conn: AsyncConnection[Any],
    tc: TaskContext,
    kind: NoticeKind,
    *,
    evidence: RunEvidence,
    gate_id: str,
    certificate: Mapping[str, Any],
    reconstruction: Mapping[str, Any],
    sum_to_pay: Decimal,
    grounds: list[NoticeGround],
    decided_by: str,
) -> ServedNotice:
    """Record, trace and post the certificate's notice of `kind` once; a second call returns the first."""
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
    document = _DOCUMENT[kind](notice)
    deadline = deadline_of(kind, dates)
    basis = [
        {"title": g.title, "explanation": g.explanation, "amounts": {n: f"{v:.2f}" for n, v in g.amounts}}
        | {"clauses": list(g.clauses)}
        for g in grounds
    ]
    row = await record_payment_notice(
        conn,
        NewPaymentNotice(
            kind=kind,
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
            deadline=deadline,
        ),
    )
    if not row.recorded_now:  # served already: the first notice stands
        return row
    if row.deadline != deadline:
        raise NoticeDeadlineDisagrees(
            f"certificate {evidence.certificate.id}: the database's {_WORDS[kind]} deadline {row.deadline} is not the"
            f" engine's {deadline}"
        )
    await append_event(
        conn,
        actor=tc.actor,
        close_id=tc.close.close_id,
        kind=_SERVED[kind],
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
        key=f"{_TEMPLATE[kind]}:{row.notice_id}",
        template=_TEMPLATE[kind],
        close_id=tc.close.close_id,
        channels=tc.channels,
        gate_id=gate_id,
        args={"notice_id": row.notice_id},
    )
    return row


def served_line(
    tc: TaskContext,
    certificate_id: str,
    served: ServedNotice,
    sum_to_pay: Decimal,
    currency: str,
    kind: NoticeKind = NoticeKind.PAY_LESS,
) -> str:
    late = {
        NoticeKind.PAY_LESS: "LATE: the notified sum is payable in full",
        NoticeKind.PAYMENT: "LATE: the payee may serve a default notice",
    }[kind]
    when = "in time" if served.served_in_time else late
    return (
        f"{tc.task.id}: {_WORDS[kind]} notice {served.notice_id} for certificate {certificate_id}: pays "
        f"{format_money(sum_to_pay, currency, locale=tc.locale)}, deadline {served.deadline.isoformat()} ({when})"
    )
