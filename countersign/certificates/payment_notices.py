"""When a certificate's payment falls due, when the payer's notices must be served, and the words of a pay-less notice.

Under the Housing Grants, Construction and Regeneration Act 1996 as amended (ss. 110A-111), the payer serves a payment
notice stating the sum it considers due and, to pay less than the notified sum, a pay-less notice before the final
date for payment stating the sum and the basis on which it is calculated; otherwise the notified sum is payable in
full. `payment_dates` computes the dates from the contract's `PaymentTerms`; `payment_notice` and `pay_less_notice`
write the two notices.

The due date runs from the later of the valuation date and the day the application was received (an application made
late makes the payment fall due later). The database computes the same dates from the frozen rows when it admits a
notice (migration 0018); a test holds the two together. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from countersign.certificates.model import PaymentTerms, amount_text


@dataclass(frozen=True)
class PaymentDates:
    valuation_date: date
    received_on: date
    due_date: date
    final_date: date
    payment_notice_by: date
    """The payer's payment notice (here: the certification) is served no later than this day."""
    pay_less_notice_by: date
    """A pay-less notice is served no later than this day, or the notified sum is payable in full."""

    def as_json(self) -> dict[str, str]:
        return {
            "valuation_date": self.valuation_date.isoformat(),
            "received_on": self.received_on.isoformat(),
            "due_date": self.due_date.isoformat(),
            "final_date": self.final_date.isoformat(),
            "payment_notice_by": self.payment_notice_by.isoformat(),
            "pay_less_notice_by": self.pay_less_notice_by.isoformat(),
        }


def payment_dates(terms: PaymentTerms, *, valuation_date: date, received_on: date) -> PaymentDates:
    due = max(valuation_date, received_on) + timedelta(days=terms.due_date_days)
    final = due + timedelta(days=terms.final_date_days)
    return PaymentDates(
        valuation_date=valuation_date,
        received_on=received_on,
        due_date=due,
        final_date=final,
        payment_notice_by=due + timedelta(days=terms.payment_notice_days),
        pay_less_notice_by=final - timedelta(days=terms.pay_less_notice_days),
    )


@dataclass(frozen=True)
class NoticeGround:
    """One ground on which less than the notified sum is paid: a finding, its amounts and the clauses it rests on."""

    title: str
    explanation: str
    amounts: Sequence[tuple[str, Decimal]]
    clauses: Sequence[str]


@dataclass(frozen=True)
class PayLessNotice:
    contract_id: str
    contract_title: str
    contractor: str
    certificate_id: str
    certificate_no: int
    period: str
    currency: str
    notified_sum: Decimal
    sum_to_pay: Decimal
    dates: PaymentDates
    served_on: date
    grounds: Sequence[NoticeGround]
    decided_by: str
    """Who decided, in words: "rejected at gate 1a2b3c4d by alice.cfo", "certified the reconstructed sum ..."."""

    @property
    def in_time(self) -> bool:
        return self.served_on <= self.dates.pay_less_notice_by


def _label(identifier: str) -> str:
    words = identifier.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def pay_less_notice(notice: PayLessNotice) -> str:
    """The notice as a document: plain text, every amount with its currency, every ground with its amounts and
    clauses, the dates it was served against."""
    money = notice.currency
    lines = [
        "PAY LESS NOTICE",
        "(Housing Grants, Construction and Regeneration Act 1996, s. 111, and the contract's payment provisions)",
        "",
        f"Contract: {notice.contract_id} {notice.contract_title}",
        f"Contractor: {notice.contractor}",
        f"Application: certificate {notice.certificate_no} ({notice.certificate_id}), period {notice.period}, "
        f"valuation date {notice.dates.valuation_date.isoformat()}, received {notice.dates.received_on.isoformat()}",
        "",
        f"Notified sum (the sum applied for): {amount_text(notice.notified_sum, money)}",
        f"Sum the payer considers due and will pay: {amount_text(notice.sum_to_pay, money)}",
        f"Less than the notified sum by: {amount_text(notice.notified_sum - notice.sum_to_pay, money)}",
        "",
        "Basis on which the sum is calculated:",
    ]
    if not notice.grounds:
        lines.append("  (no ground recorded)")
    for number, ground in enumerate(notice.grounds, start=1):
        lines.append(f"  {number}. {ground.title}: {ground.explanation}")
        if ground.amounts:
            amounts = "; ".join(f"{_label(name)} {amount_text(value, money)}" for name, value in ground.amounts)
            lines.append(f"     Amounts: {amounts}")
        lines.append(f"     Clauses: {', '.join(ground.clauses) if ground.clauses else 'none cited'}")
    lines += [
        "",
        f"Due date: {notice.dates.due_date.isoformat()}. "
        f"Final date for payment: {notice.dates.final_date.isoformat()}.",
        f"This notice is given on {notice.served_on.isoformat()}; it must be given no later than "
        f"{notice.dates.pay_less_notice_by.isoformat()}"
        + (
            "."
            if notice.in_time
            else ". IT IS LATE: the notified sum is payable in full on the final date for payment."
        ),
        f"Decision: {notice.decided_by}.",
    ]
    return "\n".join(lines) + "\n"


def payment_notice(notice: PayLessNotice) -> str:
    """The payment notice (s. 110A) as a document: the sum the payer considers due at the due date and the basis on
    which it is calculated (the sum applied for, less each ground with its amounts and clauses), the dates it was
    served against. Served on every decided certificate: what was certified, or nothing on a rejection."""
    money = notice.currency
    in_time = notice.served_on <= notice.dates.payment_notice_by
    lines = [
        "PAYMENT NOTICE",
        "(Housing Grants, Construction and Regeneration Act 1996, s. 110A, and the contract's payment provisions)",
        "",
        f"Contract: {notice.contract_id} {notice.contract_title}",
        f"Contractor: {notice.contractor}",
        f"Application: certificate {notice.certificate_no} ({notice.certificate_id}), period {notice.period}, "
        f"valuation date {notice.dates.valuation_date.isoformat()}, received {notice.dates.received_on.isoformat()}",
        "",
        f"Sum the payer considers due at the due date: {amount_text(notice.sum_to_pay, money)}",
        "",
        "Basis on which that sum is calculated:",
        f"  The sum applied for: {amount_text(notice.notified_sum, money)}",
    ]
    if not notice.grounds:
        lines.append(
            "  No deduction: the sum applied for is the sum due."
            if notice.sum_to_pay == notice.notified_sum
            else "  (no ground recorded)"
        )
    for number, ground in enumerate(notice.grounds, start=1):
        lines.append(f"  Less {number}. {ground.title}: {ground.explanation}")
        if ground.amounts:
            amounts = "; ".join(f"{_label(name)} {amount_text(value, money)}" for name, value in ground.amounts)
            lines.append(f"     Amounts: {amounts}")
        lines.append(f"     Clauses: {', '.join(ground.clauses) if ground.clauses else 'none cited'}")
    lines += [
        f"  Sum due: {amount_text(notice.sum_to_pay, money)}",
        "",
        f"Due date: {notice.dates.due_date.isoformat()}. "
        f"Final date for payment: {notice.dates.final_date.isoformat()}.",
        f"This notice is given on {notice.served_on.isoformat()}; it must be given no later than "
        f"{notice.dates.payment_notice_by.isoformat()}"
        + (
            "."
            if in_time
            else ". IT IS LATE: the payee may give a default notice (s. 110B) of the sum it considers due."
        ),
        f"Decision: {notice.decided_by}.",
    ]
    return "\n".join(lines) + "\n"
