"""Certified means certified: `advance_position` moves "previously certified" by the sum actually certified."""

from __future__ import annotations

from countersign.certificates import assess_contract, parse_certificate, parse_contract
from countersign.certificates import invariants as inv
from countersign.certificates.correction import reconstructed_amount_due
from countersign.certificates.reconstruction import advance_position
from tests.certificates.history import CONTRACT, history


def test_a_certificate_certified_at_a_corrected_sum_moves_previously_certified_by_that_sum() -> None:
    contract = parse_contract(CONTRACT)
    certificates = [parse_certificate(c) for c in history()]
    opening = assess_contract(contract, certificates[:1])[0].position
    position = advance_position(opening, contract, certificates[0], certified_amount_minor=30_000)
    assert position.net_to_date_minor == 30_000  # 300.00 certified, not the 400.00 claimed
    assert position.last_certificate == "C1"
    assert position.certified_count == 1
    carried = inv.previously_certified_carried_forward(contract, position, certificates[1])
    assert carried.violated  # certificate 2 states the 400.00 claimed as previously certified
    assert carried.amounts["reconstructed"] == 300
    assert carried.compared_with == ("C1",)
    correction = reconstructed_amount_due(contract, position, certificates[1])
    assert correction.reconstructed_minor == certificates[1].totals.net_to_date_minor - 30_000


def test_by_default_the_certificate_s_own_amount_due_is_what_was_certified() -> None:
    contract = parse_contract(CONTRACT)
    certificates = [parse_certificate(c) for c in history()]
    assessments = assess_contract(contract, certificates)
    for assessment in assessments:
        after = advance_position(assessment.position, contract, assessment.certificate)
        assert after.net_to_date_minor == assessment.certificate.totals.net_to_date_minor
        assert after == advance_position(
            assessment.position,
            contract,
            assessment.certificate,
            certified_amount_minor=assessment.certificate.totals.amount_due_minor,
        )
