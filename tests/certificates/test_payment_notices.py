"""Payment terms and pay-less notices: the dates the law's periods give, and the notice as a document."""

from __future__ import annotations

import copy
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from countersign.certificates import CertificateDataError, parse_contract
from countersign.certificates.model import PaymentTerms
from countersign.certificates.payment_notices import NoticeGround, PayLessNotice, pay_less_notice, payment_dates
from tests.certificates.history import CONTRACT


def test_the_schemes_periods_apply_where_a_contract_is_silent() -> None:
    dates = payment_dates(PaymentTerms(), valuation_date=date(2026, 11, 24), received_on=date(2026, 11, 20))
    assert dates.due_date == date(2026, 12, 1)  # 7 days after the valuation
    assert dates.final_date == date(2026, 12, 18)  # 17 days after the due date
    assert dates.payment_notice_by == date(2026, 12, 6)  # 5 days after the due date
    assert dates.pay_less_notice_by == date(2026, 12, 11)  # 7 days before the final date


def test_an_application_received_late_makes_payment_fall_due_later() -> None:
    dates = payment_dates(PaymentTerms(), valuation_date=date(2026, 1, 25), received_on=date(2026, 12, 2))
    assert dates.due_date == date(2026, 12, 9)
    assert dates.pay_less_notice_by == date(2026, 12, 19)


def test_a_contracts_own_terms_set_the_dates() -> None:
    terms = PaymentTerms(due_date_days=14, final_date_days=28, payment_notice_days=5, pay_less_notice_days=3)
    dates = payment_dates(terms, valuation_date=date(2026, 3, 31), received_on=date(2026, 3, 31))
    assert (dates.due_date, dates.final_date, dates.pay_less_notice_by) == (
        date(2026, 4, 14),
        date(2026, 5, 12),
        date(2026, 5, 9),
    )


def _contract(**extra: Any) -> dict[str, Any]:
    doc = copy.deepcopy(CONTRACT)
    doc.update(extra)
    return doc


def test_payment_terms_and_conventions_are_optional_with_documented_defaults() -> None:
    contract = parse_contract(_contract())
    assert contract.payment_terms == PaymentTerms()
    assert contract.conventions.valuation_rounding == "per_period"
    declared = parse_contract(
        _contract(
            payment_terms={"due_date_days": 14, "pay_less_notice_days": 5},
            conventions={"valuation_rounding": "cumulative", "application_numbering": "contract"},
        )
    )
    assert (declared.payment_terms.due_date_days, declared.payment_terms.final_date_days) == (14, 17)
    assert declared.conventions.valuation_rounding == "cumulative"
    assert declared.conventions.materials_consumption == "materials_first"


@pytest.mark.parametrize(
    ("extra", "field", "reason"),
    [
        ({"payment_terms": {"due_days": 7}}, "payment_terms.due_days", "not a known payment term"),
        ({"payment_terms": {"final_date_days": "17"}}, "payment_terms.final_date_days", "non-negative integer"),
        ({"payment_terms": {"final_date_days": 400}}, "payment_terms.final_date_days", "at most 366"),
        (
            {"payment_terms": {"final_date_days": 5, "pay_less_notice_days": 7}},
            "payment_terms.pay_less_notice_days",
            "before the due date",
        ),
        ({"conventions": {"valuation_rounding": "banker"}}, "conventions.valuation_rounding", "per_period"),
        ({"conventions": {"rounding": "cumulative"}}, "conventions.rounding", "not a known convention"),
        ({"conventions": ["cumulative"]}, "conventions", "expected a mapping"),
    ],
)
def test_a_bad_term_or_convention_is_refused_naming_the_field(extra: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(CertificateDataError) as refused:
        parse_contract(_contract(**extra))
    assert refused.value.field == field
    assert reason in refused.value.reason


def _notice(served_on: date) -> PayLessNotice:
    dates = payment_dates(PaymentTerms(), valuation_date=date(2026, 11, 24), received_on=date(2026, 11, 24))
    return PayLessNotice(
        contract_id="CT-0001",
        contract_title="Harbour Road bridge",
        contractor="Kestrel Civil Engineering Ltd",
        certificate_id="IPC-0001-07",
        certificate_no=7,
        period="2026-11",
        currency="GBP",
        notified_sum=Decimal("120000.00"),
        sum_to_pay=Decimal("105676.39"),
        dates=dates,
        served_on=served_on,
        grounds=[
            NoticeGround(
                title="Quantity within bill",
                explanation="line B-12 is certified 40.00 m3 beyond the 300.00 m3 billed",
                amounts=[("excess_value", Decimal("14323.61"))],
                clauses=["CSB-4.2"],
            )
        ],
        decided_by="approvers certified the reconstructed sum at payment gate 1a2b",
    )


def test_a_pay_less_notice_states_the_sum_its_basis_and_its_deadline_with_currency() -> None:
    text = pay_less_notice(_notice(date(2026, 12, 2)))
    assert "Notified sum (the sum applied for): GBP 120,000.00" in text
    assert "Sum the payer considers due and will pay: GBP 105,676.39" in text
    assert "Less than the notified sum by: GBP 14,323.61" in text
    assert "Quantity within bill: line B-12" in text and "Excess value GBP 14,323.61" in text
    assert "Clauses: CSB-4.2" in text
    assert "no later than 2026-12-11." in text
    assert "LATE" not in text


def test_a_notice_given_after_its_deadline_says_the_notified_sum_is_payable() -> None:
    notice = _notice(date(2026, 12, 12))
    assert not notice.in_time
    assert "IT IS LATE: the notified sum is payable in full" in pay_less_notice(notice)
