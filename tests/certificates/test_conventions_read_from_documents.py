"""Conventions a contract does not declare are read from its documents; where they cannot be, the gate asks in words
(issue 35: 17 legitimate certificates held for conventions real contracts do not declare).

A firm valuing in whole pounds rounds each line's value to date, retention and the advance to the pound; a firm whose
invoice numbers restart per contract writes `INV-001` on every contract. Each case has its control: the same figures
under a declared convention are held, or the same number in one series is one invoice.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from countersign.certificates import assess_contract, detect, parse_certificate, parse_contract
from countersign.certificates import invariants as inv
from countersign.certificates.assessment import CertificateAssessment
from countersign.certificates.conventions import read_application_numbering
from countersign.certificates.model import ApplicationNumbering
from tests.certificates.history import minor, money
from tests.certificates.statements import Period, contract, honest_history, restate

THREE = [
    Period({"L01": "100.00", "L02": "10.00"}),
    Period({"L01": "250.00", "L02": "25.50"}),
    Period({"L01": "400.00", "L02": "40.25"}),
]


def _pounds(minor_units: int) -> int:
    return int((Decimal(minor_units) / 100).quantize(Decimal(1), rounding=ROUND_HALF_UP)) * 100


def in_whole_pounds(certificates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The honest history as a firm valuing in whole pounds writes it: each line's value to date rounded to the
    pound, retention 5 % of the gross rounded to the pound, previously certified the last net."""
    previous: dict[str, int] = {}
    net_before = 0
    for certificate in certificates:
        for line in certificate["lines"]:
            line["previous_value"] = money(previous.get(line["boq_line"], 0))
            line["value_to_date"] = money(_pounds(minor(line["value_to_date"])))
            previous[line["boq_line"]] = minor(line["value_to_date"])
        certificate["totals"]["previously_certified"] = money(net_before)
        restate(certificate)
        totals = certificate["totals"]
        exact = (Decimal(minor(totals["gross"])) * Decimal("0.05")).quantize(Decimal(1), rounding=ROUND_HALF_UP)
        retention = _pounds(int(exact))
        net = minor(totals["gross"]) - retention
        totals.update(
            retention_deducted=money(retention),
            retention_held=money(retention),
            net_to_date=money(net),
            amount_due=money(net - net_before),
        )
        net_before = net
    return certificates


def assess(certificates: list[dict[str, Any]], **extra: Any) -> tuple[CertificateAssessment, ...]:
    return assess_contract(parse_contract(contract(**extra)), [parse_certificate(c) for c in certificates])


def violated(assessment: CertificateAssessment) -> list[str]:
    return [result.name for result in assessment.violations]


def test_a_history_in_whole_pounds_is_read_as_valued_in_whole_pounds_and_certified() -> None:
    whole = in_whole_pounds(honest_history(contract(), THREE))
    assert whole[0]["lines"][1]["value_to_date"] == "333.00"  # 10.00 t x 33.33 = 333.30, to the pound
    assessments = assess(whole)
    assert [violated(a) for a in assessments] == [[], [], []]
    assert [a.questions for a in assessments] == [(), (), ()]


def test_the_same_figures_under_a_declared_valuation_to_the_penny_are_held() -> None:
    whole = in_whole_pounds(honest_history(contract(), THREE))
    first = assess(whole, conventions={"valuation_rounding": "per_period"})[0]
    assert inv.PERIOD_WORK_AT_RATE_IN_FORCE in violated(first)


def test_one_figure_in_pence_means_the_contract_is_valued_to_the_penny() -> None:
    whole = in_whole_pounds(honest_history(contract(), THREE))
    whole[0]["lines"][0]["value_to_date"] = "15000.01"  # L01 100.00 m3 at 150.00 is 15,000.00
    restate(whole[0])
    assert inv.PERIOD_WORK_AT_RATE_IN_FORCE in violated(assess(whole)[0])


def test_a_single_whole_pound_figure_is_too_few_to_tell_and_the_gate_asks_in_words() -> None:
    unretained = {"rate": "0.0", "cap": "0.00", "release_at_practical_completion": "0.5", "defects_period_months": 12}
    one_line = honest_history(contract(retention=unretained), [Period({"L02": "10.00"})])
    one_line[0]["lines"][0]["value_to_date"] = "333.00"
    restate(one_line[0], retention_rate=Decimal("0"))
    (assessment,) = assess(one_line, retention=unretained)
    assert assessment.questions == (
        "Contract CT-H has shown one figure so far, in whole pounds: too few to tell whether it is valued in whole "
        "pounds. Is it? Until that is recorded, its figures are checked to the penny.",
    )
    assert inv.PERIOD_WORK_AT_RATE_IN_FORCE in violated(assessment)  # checked to the penny meanwhile


def test_retention_a_pound_off_is_held_under_whole_pound_valuation() -> None:
    whole = in_whole_pounds(honest_history(contract(), THREE))
    totals = whole[1]["totals"]
    totals["retention_deducted"] = money(minor(totals["retention_deducted"]) + 100)  # a pound more than due
    totals["retention_held"] = totals["retention_deducted"]
    net = minor(totals["gross"]) - minor(totals["retention_held"])
    totals.update(net_to_date=money(net), amount_due=money(net - minor(totals["previously_certified"])))
    assert inv.RETENTION_AT_RATE_WITHIN_CAP in violated(assess(whole)[1])


# --- invoice numbering --------------------------------------------------------------------------------------------


def _two_contracts(first_invoice: str, second_invoice: str) -> list[Any]:
    ours = parse_certificate(honest_history(contract(), THREE)[0])
    ours = dataclasses.replace(ours, invoice_number=first_invoice)
    sister = dataclasses.replace(
        ours,
        id="S1",
        contract="CT-S",
        invoice_number=second_invoice,
        description="First valuation, sister works",
        date=ours.date + timedelta(days=3),
        lines=tuple(dataclasses.replace(line, scope_hash=f"sister-{line.scope_hash}") for line in ours.lines),
    )
    return [ours, sister]


def test_an_invoice_number_that_counts_the_contracts_applications_reads_as_numbered_per_contract() -> None:
    ours, _ = _two_contracts("INV-001", "INV-001")
    assert read_application_numbering(None, ours) is ApplicationNumbering.CONTRACT
    assert read_application_numbering(None, dataclasses.replace(ours, invoice_number="HAR/0412")) is (
        ApplicationNumbering.VENDOR
    )
    assert read_application_numbering(None, dataclasses.replace(ours, invoice_number="April valuation")) is None


def test_two_contracts_each_with_invoice_inv_001_are_not_one_invoice() -> None:
    assert detect(_two_contracts("INV-001", "INV-001")) == ()


def test_the_same_number_in_one_series_on_two_contracts_is_still_held() -> None:
    (hold,) = detect(_two_contracts("HAR/0412", "HAR/0412"))
    assert (hold.certificate, hold.other_certificate) == ("S1", "C1")
    assert hold.features.same_invoice


def test_per_contract_numbers_still_hold_the_same_work_sent_to_another_contract() -> None:
    ours, sister = _two_contracts("INV-001", "INV-001")
    resent = dataclasses.replace(sister, lines=ours.lines)  # the same scope claimed again
    (hold,) = detect([ours, resent])
    assert hold.other_certificate == "C1" and not hold.features.same_invoice


def test_the_same_number_twice_on_one_contract_is_held_whatever_the_numbering() -> None:
    first, second = (parse_certificate(c) for c in honest_history(contract(), THREE)[:2])
    again = dataclasses.replace(second, invoice_number="INV-001")
    (hold,) = detect([dataclasses.replace(first, invoice_number="INV-001"), again])
    assert hold.certificate == "C2" and hold.features.same_invoice


def test_a_number_without_digits_asks_at_the_gate_in_words() -> None:
    certificates = honest_history(contract(), THREE)[:1]
    certificates[0]["invoice_number"] = "April valuation"
    (assessment,) = assess(certificates)
    assert assessment.questions == (
        "Certificate C1: invoice April valuation carries no number, so it cannot be told whether the contractor's "
        "invoice numbers restart on each contract. Do they? Until that is recorded, the same number on another "
        "contract is not taken for the same invoice; the same work claimed twice still is.",
    )
