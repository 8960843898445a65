"""A certified variation revalued as the work proceeds is not an error; dropping it, reversing it or going past its
instruction's limit still is (issue 35: 72 revalued variations held on outside data).

Under JCT and NEC an interim valuation may restate an instructed variation at a new sum without a new instruction
(provisional to agreed, more of it done). The check notes the revaluation with both sums, for the card, and holds it
only where the instruction itself is departed from.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from countersign.certificates import assess_contract, parse_certificate, parse_contract
from countersign.certificates import invariants as inv
from countersign.certificates.assessment import CertificateAssessment
from tests.certificates.statements import Period, contract, honest_history, restate, variation


def quoted(amount: str, *, limit: str | None = "15000.00", instruction: str = "CAI-007") -> dict[str, Any]:
    data = variation("V-07", amount, instruction=instruction)
    if limit is not None:
        data["limit"] = limit
    return data


def history(*amounts: dict[str, Any]) -> list[dict[str, Any]]:
    """Fill on L01 each month; V-07 on the statement from month 2 at the figures given, one per month."""
    periods = [Period({"L01": "100.00"})]
    periods += [Period({"L01": f"{100 * (n + 2)}.00"}, variations=[v]) for n, v in enumerate(amounts)]
    return honest_history(contract(), periods)


def assess(certificates: list[dict[str, Any]]) -> tuple[CertificateAssessment, ...]:
    return assess_contract(parse_contract(contract()), [parse_certificate(c) for c in certificates])


def carried(assessment: CertificateAssessment) -> inv.InvariantResult:
    return next(r for r in assessment.results if r.name == inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD)


def test_a_provisional_sum_agreed_higher_within_the_quotation_is_certified_and_noted_with_both_sums() -> None:
    assessments = assess(history(quoted("12000.00"), quoted("14500.00")))
    assert [a.certified for a in assessments] == [True, True, True]
    found = carried(assessments[2])
    assert found.verdict == "pass"
    assert found.notes == ("Variation V-07 revalued from GBP 12,000.00 to GBP 14,500.00 (certified on certificate C2)",)
    assert assessments[2].notes == found.notes


def test_the_revalued_sum_is_what_later_statements_carry_forward() -> None:
    assessments = assess(history(quoted("12000.00"), quoted("14500.00"), quoted("14500.00")))
    assert [a.certified for a in assessments] == [True] * 4
    assert carried(assessments[3]).notes == ()  # nothing changed since C3
    assert assessments[3].position.certified_variations["V-07"].amount_minor == 1_450_000
    assert assessments[3].position.certified_variations["V-07"].certificate == "C3"


def test_a_revaluation_beyond_the_instructions_limit_is_held_naming_the_limit() -> None:
    found = carried(assess(history(quoted("12000.00"), quoted("16200.00")))[2])
    assert found.violated
    assert "exceeds the instruction's limit of GBP 15,000.00" in found.explanation
    assert found.amounts["changed"] == Decimal("4200.00")
    assert found.compared_with == ("C2",)


def test_a_restatement_cannot_raise_its_own_limit() -> None:
    found = carried(assess(history(quoted("12000.00"), quoted("16200.00", limit="20000.00")))[2])
    assert found.violated
    assert "limit of GBP 15,000.00" in found.explanation


def test_a_revaluation_that_reverses_the_sign_is_held() -> None:
    found = carried(assess(history(quoted("12000.00"), quoted("-12000.00")))[2])
    assert found.violated
    assert "restated at GBP -12,000.00, which reverses its sign, without a new instruction" in found.explanation


def test_a_revaluation_to_nil_is_held_as_a_drop_in_disguise() -> None:
    found = carried(assess(history(quoted("12000.00"), quoted("0.00")))[2])
    assert found.violated
    assert "changes it to or from nil" in found.explanation


def test_a_variation_without_a_limit_may_grow_as_the_work_proceeds() -> None:
    assessments = assess(history(quoted("800.00", limit=None), quoted("1600.00", limit=None)))
    assert assessments[2].certified
    assert carried(assessments[2]).notes == (
        "Variation V-07 revalued from GBP 800.00 to GBP 1,600.00 (certified on certificate C2)",
    )


def test_a_dropped_variation_is_still_held_after_a_revaluation() -> None:
    certificates = history(quoted("12000.00"), quoted("14500.00"), quoted("14500.00"))
    certificates[3]["variations"] = []
    restate(certificates[3])
    found = carried(assess(certificates)[3])
    assert found.violated
    assert "variation V-07 (GBP 14,500.00) certified on certificate C3 is missing from the statement" in (
        found.explanation
    )


def test_a_changed_instructed_quantity_still_needs_a_new_instruction() -> None:
    omit = variation("V-2", "0.00", instruction="CAI-002", line="L01", change="-100.00")
    less = variation("V-2", "0.00", instruction="CAI-002", line="L01", change="-10.00")
    certificates = honest_history(
        contract(),
        [Period({"L01": "100.00"}), Period({"L01": "200.00"}, variations=[omit]), Period({"L01": "300.00"}, [less])],
    )
    found = carried(assess(certificates)[2])
    assert found.violated
    assert "changes the quantity its instruction adds or omits" in found.explanation
