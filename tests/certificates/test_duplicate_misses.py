"""The duplicate detector on real vendor data: each miss and false positive found on independently generated
certificates, pinned with its negative control (issue 22).

Built on the hand-priced history (tests/certificates/history.py): certificate C2 claims L01 30 -> 60 m3 (300.00) and
L02 10 -> 20 t (200.00), amount due 445.00, dated 2025-02-25, from "Kestrel Construction Ltd".
"""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta

import pytest

from countersign.certificates import Certificate, Contract, parse_certificate, parse_contract
from countersign.certificates.duplicates import Thresholds, detect, normalise_vendor, vendor_identity, window_days
from countersign.certificates.model import (
    ApplicationNumbering,
    CertificateTotals,
    Conventions,
    PaymentTerms,
    RetentionRelease,
)
from countersign.certificates.pipeline import run_pipeline
from tests.certificates.history import CONTRACT, history


def _contract(**changes: object) -> Contract:
    return dataclasses.replace(parse_contract(CONTRACT), **changes)  # type: ignore[arg-type]


def _c2() -> Certificate:
    return parse_certificate(history()[1])


def _resent(original: Certificate, **changes: object) -> Certificate:
    """`original` sent again under a new id and invoice number, `changes` applied."""
    return dataclasses.replace(original, **{"id": "C2-again", "invoice_number": "KC/2025/0099", **changes})  # type: ignore[arg-type]


def _held(certificates: list[Certificate], contracts: list[Contract] | None = None) -> dict[str, str]:
    mapping = None if contracts is None else {c.id: c for c in contracts}
    return {hold.certificate: hold.other_certificate for hold in detect(certificates, contracts=mapping)}


# --- vendor identity: a registry's legal-form equivalences ----------------------------------------------------------


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Acme Construction Ltd", "Acme Construction"),
        ("Acme Construction Limited", "ACME CONSTRUCTION LTD."),
        ("Acme Construction Company", "Acme Construction Co"),
        ("Acme Construction Co. Ltd", "Acme Construction"),
        ("Acme & Sons Ltd", "Acme and Sons Limited"),
        ("Acme Construction PLC", "Acme Construction Public Limited Company"),
        ("Acme Partners LLP", "Acme Partners Limited Liability Partnership"),
        ("Acme Partners L.L.P.", "acme partners"),
        ("Smith & Co", "Smith and Company Limited"),
        ("The Acme Construction Ltd", "Acme  Construction,  Ltd"),
        ("Adeiladu Cymru Cyf", "Adeiladu Cymru Cyfyngedig"),
    ],
)
def test_vendor_names_a_registry_treats_as_one_are_one_identity(one: str, other: str) -> None:
    assert vendor_identity(one) == vendor_identity(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Acme Construction Ltd", "Acme Groundworks Ltd"),
        ("Acme Construction Ltd", "Acme Construction Services Ltd"),
        ("Co-operative Builders Ltd", "Builders Ltd"),
        ("Solent Co Ltd", "Solent Ltd Partners"),
    ],
)
def test_different_names_stay_different_identities(one: str, other: str) -> None:
    assert vendor_identity(one) != vendor_identity(other)


def test_a_name_that_is_only_a_legal_form_is_kept() -> None:
    assert vendor_identity("Company Ltd") == "co"
    assert normalise_vendor("Acme Construction Ltd") == "acme construction ltd"  # the display form keeps it


@pytest.mark.parametrize(
    "spelling", ["Kestrel Construction", "KESTREL CONSTRUCTION CO. LIMITED", "Kestrel Constructions"]
)
def test_a_resubmission_under_a_legal_form_dropped_or_respelled_is_held(spelling: str) -> None:
    original = _c2()
    assert _held([original, _resent(original, vendor=spelling, date=original.date + timedelta(days=9))]) == {
        "C2-again": "C2"
    }


def test_a_resubmission_from_another_vendor_is_not_compared() -> None:
    original = _c2()
    other = _resent(original, vendor="Kestrel Groundworks Ltd", date=original.date + timedelta(days=9))
    assert _held([original, other]) == {}


# --- full scope overlap holds whatever the amount -------------------------------------------------------------------


def _inflated(original: Certificate, percent: int, *, lines: int | None = None) -> Certificate:
    """Every (or the first `lines`) period value raised by `percent` %, the amount due with it."""
    raised = []
    extra = 0
    for index, line in enumerate(original.lines):
        if lines is None or index < lines:
            more = line.period_value_minor * percent // 100
            extra += more
            line = dataclasses.replace(line, value_to_date_minor=line.value_to_date_minor + more)
        raised.append(line)
    totals = dataclasses.replace(original.totals, amount_due_minor=original.totals.amount_due_minor + extra)
    return _resent(original, lines=tuple(raised), totals=totals, date=original.date + timedelta(days=12))


@pytest.mark.parametrize("percent", [6, 7, 8, 25])
def test_a_full_scope_overlap_is_held_whatever_the_amount(percent: int) -> None:
    original = _c2()
    inflated = _inflated(original, percent)
    assert inflated.totals.amount_due_minor > original.totals.amount_due_minor * 105 // 100  # outside the tolerance
    (hold,) = detect([original, inflated])
    assert (hold.certificate, hold.other_certificate) == ("C2-again", "C2")
    assert hold.features.full_overlap and "scope overlap 100%" in hold.explanation("GBP")


def test_a_partial_overlap_outside_the_amount_tolerance_is_not_held() -> None:
    original = _c2()
    further = dataclasses.replace(original.lines[1], quantity_to_date_centi=4000, value_to_date_minor=80000)
    partial = _inflated(dataclasses.replace(original, lines=(original.lines[0], further)), 7)
    assert detect([original, partial]) == ()  # L02 20 -> 40 t is new work: only the ordinary rule applies


# --- windows in the contract's own terms ----------------------------------------------------------------------------


def test_the_window_is_the_declared_one_else_the_payment_cycle() -> None:
    assert window_days(PaymentTerms()) == 7 + 17 + 2 * 31
    assert window_days(PaymentTerms(due_date_days=14, final_date_days=28)) == 14 + 28 + 62
    assert window_days(PaymentTerms(duplicate_window_days=30)) == 30


@pytest.mark.parametrize("days", [47, 53, 59, 86])
def test_a_resubmission_weeks_later_is_held_within_the_payment_cycle(days: int) -> None:
    original = _c2()
    later = _resent(original, date=original.date + timedelta(days=days))
    assert _held([original, later], [_contract()]) == {"C2-again": "C2"}


def test_a_resubmission_after_the_payment_cycle_is_not_held() -> None:
    original = _c2()
    later = _resent(original, date=original.date + timedelta(days=87))
    assert _held([original, later], [_contract()]) == {}


def test_a_declared_window_is_the_contracts_own() -> None:
    original = _c2()
    later = _resent(original, date=original.date + timedelta(days=47))
    short = _contract(payment_terms=PaymentTerms(duplicate_window_days=30))
    long = _contract(payment_terms=PaymentTerms(duplicate_window_days=120))
    assert _held([original, later], [short]) == {}
    assert _held([original, _resent(original, date=original.date + timedelta(days=110))], [long]) == {"C2-again": "C2"}


# --- every earlier submission, whatever its id ----------------------------------------------------------------------


def test_a_same_day_resend_is_held_whatever_its_id_sorts_against_the_original() -> None:
    original = _c2()
    # The re-send comes later in submission order (it is numbered as the next application) but its id sorts first.
    resend = _resent(original, id="A-resend", number=3)
    assert resend.id < original.id and resend.date == original.date
    assert _held([original, resend]) == {"A-resend": "C2"}
    contracts = {"CT-T": _contract()}
    earlier = [parse_certificate(c) for c in history()[:2]]
    run = run_pipeline(contracts, [*earlier, resend])
    assert [(h.certificate, h.other_certificate) for h in run.holds] == [("A-resend", "C2")]


def test_of_a_same_day_pair_the_later_in_submission_order_is_the_resend() -> None:
    original = _c2()
    resend = _resent(original, id="Z-resend", number=3)
    assert _held([resend, original]) == {"Z-resend": "C2"}


# --- a correction that names the certificate it supersedes ------------------------------------------------------------


def test_a_correction_naming_the_certificate_it_supersedes_is_not_its_duplicate() -> None:
    original = _c2()
    correction = _resent(original, id="C2-corrected", supersedes="C2", date=original.date + timedelta(days=5))
    assert _held([original, correction]) == {}
    unnamed = _resent(original, id="C2-corrected", date=original.date + timedelta(days=5))
    assert _held([original, unnamed]) == {"C2-corrected": "C2"}  # the same certificate without the link is held


def test_a_correction_of_a_correction_supersedes_the_whole_chain() -> None:
    original = _c2()
    first = _resent(original, id="C2-b", invoice_number="KC/2025/0098", supersedes="C2", date=original.date)
    second = _resent(original, id="C2-c", supersedes="C2-b", date=original.date + timedelta(days=3))
    assert _held([original, first, second]) == {}


def test_a_correction_is_still_compared_with_every_other_certificate() -> None:
    first, original = (parse_certificate(c) for c in history()[:2])
    # Names C2 as superseded, but claims exactly C1's work again.
    mislabelled = _resent(first, id="C2-corrected", supersedes="C2", date=original.date + timedelta(days=2))
    assert _held([first, original, mislabelled]) == {"C2-corrected": "C1"}


# --- different contracts ----------------------------------------------------------------------------------------------


def _release(certificate_id: str, contract: str) -> Certificate:
    """A retention-release certificate: no bill-line progress, only the release at practical completion."""
    base = parse_certificate(history()[3])
    lines = tuple(
        dataclasses.replace(
            line, previous_quantity_centi=line.quantity_to_date_centi, previous_value_minor=line.value_to_date_minor
        )
        for line in base.lines
    )
    totals: CertificateTotals = dataclasses.replace(base.totals, amount_due_minor=4000)
    return dataclasses.replace(
        base,
        id=certificate_id,
        contract=contract,
        invoice_number=f"KC/{certificate_id}",
        description="Release of retention on practical completion, valuation 5",
        lines=lines,
        retention_releases=(RetentionRelease("practical_completion", 4000),),
        totals=totals,
    )


def test_a_sister_contracts_release_with_no_common_scope_is_not_a_duplicate() -> None:
    ours, sisters = _release("R-T", "CT-T"), _release("R-S", "CT-S")
    sisters = dataclasses.replace(sisters, date=ours.date + timedelta(days=2))
    assert _held([ours, sisters]) == {}
    same_contract = dataclasses.replace(sisters, contract="CT-T")
    assert _held([ours, same_contract]) == {"R-S": "R-T"}  # the same release twice on one contract is held


def test_the_same_work_billed_to_a_sister_contract_is_still_held() -> None:
    original = _c2()
    elsewhere = _resent(original, contract="CT-S", date=original.date + timedelta(days=4))
    assert _held([original, elsewhere]) == {"C2-again": "C2"}


def _numbered(numbering: ApplicationNumbering) -> list[Contract]:
    conventions = Conventions.declaring(application_numbering=numbering)
    return [_contract(conventions=conventions), _contract(id="CT-S", conventions=conventions)]


def test_an_invoice_number_restarting_per_contract_is_not_the_same_invoice() -> None:
    ours = parse_certificate(history()[0])  # C1 on CT-T, invoice KC/2025/0001
    sisters = dataclasses.replace(
        _c2(), id="S1", contract="CT-S", invoice_number=ours.invoice_number, description="First valuation, sister"
    )
    sisters = dataclasses.replace(sisters, date=ours.date + timedelta(days=3))
    assert _held([ours, sisters], _numbered(ApplicationNumbering.CONTRACT)) == {}
    assert _held([ours, sisters], _numbered(ApplicationNumbering.VENDOR)) == {"S1": "C1"}


def test_per_contract_numbering_still_holds_the_same_number_twice_on_one_contract() -> None:
    first, second = (parse_certificate(c) for c in history()[:2])
    again = dataclasses.replace(second, invoice_number=first.invoice_number)
    assert _held([first, again], _numbered(ApplicationNumbering.CONTRACT)) == {"C2": "C1"}


def test_thresholds_may_still_fix_one_window_for_every_contract() -> None:
    original = _c2()
    later = _resent(original, date=original.date + timedelta(days=47))
    fixed = {h.certificate for h in detect([original, later], Thresholds(date_window_days=45))}
    assert fixed == set()


# --- work climbing back after a re-measured omission ------------------------------------------------------------------


def _restated(base: Certificate, number: int, day: str, l01_from: int, l01_to: int) -> Certificate:
    """Certificate `number` of the history's contract: L01 stated from `l01_from` to `l01_to` m3 (hundredths) at
    10.00, L02 unchanged at 20 t."""
    l01, l02 = base.lines
    lines = (
        dataclasses.replace(
            l01,
            previous_quantity_centi=l01_from,
            quantity_to_date_centi=l01_to,
            previous_value_minor=l01_from * 10,
            value_to_date_minor=l01_to * 10,
        ),
        dataclasses.replace(l02, previous_quantity_centi=2000, previous_value_minor=40000),
    )
    totals = dataclasses.replace(base.totals, amount_due_minor=max(1, (l01_to - l01_from) * 10))
    return dataclasses.replace(
        base,
        id=f"C{number}",
        number=number,
        date=date.fromisoformat(day),
        period=day[:7],
        invoice_number=f"KC/2025/{number:04d}",
        description=f"Interim valuation {number}: Test works",
        lines=lines,
        totals=totals,
    )


def test_work_climbing_back_after_a_remeasured_omission_is_not_a_reclaim() -> None:
    first, second = (parse_certificate(c) for c in history()[:2])  # L01 0 -> 30, 30 -> 60 m3
    remeasured = _restated(second, 3, "2025-03-25", 6000, 4000)  # L01 re-measured down to 40 m3
    climbing = _restated(second, 4, "2025-04-20", 4000, 5500)  # 40 -> 55 m3: within what C2 claimed
    assert _held([first, second, remeasured, climbing]) == {}


def test_the_same_claim_without_the_remeasurement_is_held_as_a_reclaim() -> None:
    first, second = (parse_certificate(c) for c in history()[:2])
    unchanged = _restated(second, 3, "2025-03-25", 6000, 6000)
    climbing = _restated(second, 4, "2025-04-20", 4000, 5500)
    assert _held([first, second, unchanged, climbing]) == {"C4": "C2"}


def test_a_resent_older_certificate_does_not_lower_what_later_ones_claimed() -> None:
    first, second = (parse_certificate(c) for c in history()[:2])
    first_again = _resent(first, id="C1-again", invoice_number="KC/2025/0098", date=second.date + timedelta(days=1))
    second_again = _resent(second, date=second.date + timedelta(days=6))
    assert _held([first, second, first_again, second_again]) == {"C1-again": "C1", "C2-again": "C2"}


def test_a_copy_resent_after_a_remeasurement_is_still_held() -> None:
    first, second = (parse_certificate(c) for c in history()[:2])
    remeasured = _restated(second, 3, "2025-03-25", 6000, 4000)
    copy = _resent(second, date=date.fromisoformat("2025-04-10"))  # C2 again: L01 30 -> 60, above the 40 standing
    assert _held([first, second, remeasured, copy]) == {"C2-again": "C2"}


# --- a statement without line work restated to the penny --------------------------------------------------------------


def test_a_release_restated_to_the_penny_is_held_however_it_is_worded() -> None:
    ours = _release("R-1", "CT-T")
    again = dataclasses.replace(
        ours,
        id="R-1-again",
        invoice_number="KC/R-again",
        description="Valuation no. 5 - retention released at practical completion",
        date=ours.date + timedelta(days=9),
    )
    assert _held([ours, again]) == {"R-1-again": "R-1"}
    nudged = dataclasses.replace(again, totals=dataclasses.replace(again.totals, amount_due_minor=4001))
    assert _held([ours, nudged]) == {}  # a penny apart, differently worded: the description must carry it
