"""A variation certified earlier stays on every later statement unless an instruction reverses it.

The issue's miss: an omission credit of -14,323.61 certified on certificate 7 was left off certificate 8, 13,607.43
more fell due, and every invariant passed. Each case here has its honest twin as the negative control.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from countersign.certificates import assess_contract, parse_certificate, parse_contract
from countersign.certificates import invariants as inv
from countersign.certificates.assessment import CertificateAssessment
from tests.certificates.history import minor
from tests.certificates.statements import Period, contract, honest_history, restate, variation

CREDIT = variation("V-7", "-14323.61", instruction="CAI-007")


def assess(certificates: list[dict[str, Any]], **contract_extra: Any) -> tuple[CertificateAssessment, ...]:
    return assess_contract(parse_contract(contract(**contract_extra)), [parse_certificate(c) for c in certificates])


def result(assessment: CertificateAssessment, name: str) -> inv.InvariantResult:
    return next(r for r in assessment.results if r.name == name)


def credit_history() -> list[dict[str, Any]]:
    """Eight months of fill on L01; the omission credit V-7 is certified on certificate 7 and carried on 8."""
    periods = [Period({"L01": f"{100 * month}.00"}, variations=[CREDIT] if month >= 7 else []) for month in range(1, 9)]
    return honest_history(contract(), periods)


def drop_credit(history: list[dict[str, Any]]) -> dict[str, Any]:
    certificate = history[7]
    certificate["variations"] = []
    return restate(certificate)


def test_the_honest_credit_history_is_certified_throughout() -> None:
    assessments = assess(credit_history())
    assert [a.certified for a in assessments] == [True] * 8
    assert [v.explanation for a in assessments for v in a.violations] == []


def test_a_certified_credit_left_off_the_next_statement_is_caught_naming_certificate_and_amount() -> None:
    honest = credit_history()
    dropped = credit_history()
    drop_credit(dropped)
    more_due = minor(dropped[7]["totals"]["amount_due"]) - minor(honest[7]["totals"]["amount_due"])
    assert more_due == 1_360_743  # 14,323.61 less its 5 % retention: the 13,607.43

    assessment = assess(dropped)[7]
    found = result(assessment, inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD)
    assert found.violated
    assert "variation V-7 (GBP -14,323.61) certified on certificate C7 is missing from the statement" in (
        found.explanation
    )
    assert found.amounts["dropped"] == Decimal("-14323.61")
    assert found.amounts["overstated"] == Decimal("14323.61")
    assert found.lines == ("V-7",)
    assert found.compared_with == ("C7",)
    # the miss: before this invariant, every other check passed the statement
    others = [r.name for r in assessment.violations if r.name != inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD]
    assert others == []


def test_a_credit_reversed_by_an_instructed_variation_may_leave_the_statement() -> None:
    history = credit_history()
    drop_credit(history)
    history[7]["variations"] = [variation("V-8", "0.00", instruction="CAI-008", reverses="V-7")]
    restate(history[7])
    assert result(assess(history)[7], inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD).verdict == "pass"


def test_a_reversal_without_an_instruction_does_not_excuse_the_drop() -> None:
    history = credit_history()
    drop_credit(history)
    history[7]["variations"] = [variation("V-8", "0.00", instruction=None, reverses="V-7")]
    restate(history[7])
    assert result(assess(history)[7], inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD).violated


def test_a_certified_variation_restated_at_another_amount_is_a_revaluation_shown_with_both_sums() -> None:
    history = credit_history()
    history[7]["variations"] = [variation("V-7", "-4323.61", instruction="CAI-007")]  # re-measured, same instruction
    restate(history[7])
    found = result(assess(history)[7], inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD)
    assert found.verdict == "pass"
    assert found.notes == ("Variation V-7 revalued from GBP -14,323.61 to GBP -4,323.61 (certified on certificate C7)",)

    history[7]["variations"] = [variation("V-7", "-4323.61", instruction="CAI-012")]  # re-valued by a new instruction
    restate(history[7])
    assert result(assess(history)[7], inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD).verdict == "pass"


def test_a_certified_credit_restated_as_an_addition_is_held_as_a_reversed_sign() -> None:
    history = credit_history()
    history[7]["variations"] = [variation("V-7", "14323.61", instruction="CAI-007")]
    restate(history[7])
    found = result(assess(history)[7], inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD)
    assert found.violated
    assert found.amounts["changed"] == Decimal("28647.22")
    assert "restated at GBP 14,323.61, which reverses its sign, without a new instruction" in found.explanation


def test_a_variation_on_a_held_certificate_was_never_certified() -> None:
    history = credit_history()
    history[6]["totals"]["amount_due"] = "1.00"  # certificate 7 does not foot: held, so V-7 is not certified
    drop_credit(history)
    history[7]["totals"]["previously_certified"] = history[5]["totals"]["net_to_date"]
    restate(history[7])
    assessments = assess(history)
    assert not assessments[6].certified
    assert result(assessments[7], inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD).verdict == "pass"


# --- an omission reversed: the quantity invariants honour the reversal ---------------------------------------------

OMIT = variation("V-2", "0.00", instruction="CAI-002", line="L02", change="-100.00")  # L02 allows 400.00 from month 2


def omission_history(month_three: list[dict[str, Any]]) -> list[dict[str, Any]]:
    periods = [
        Period({"L02": "100.00"}),
        Period({"L02": "300.00"}, variations=[OMIT]),
        Period({"L02": "500.00"}, variations=month_three),
    ]
    return honest_history(contract(), periods)


def test_line_beyond_a_certified_omission_is_over_the_bill() -> None:
    assessment = assess(omission_history([OMIT]))[2]
    assert result(assessment, inv.QUANTITY_WITHIN_BILL).violated
    assert result(assessment, inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD).verdict == "pass"


def test_dropping_a_certified_omission_does_not_restore_the_quantity() -> None:
    assessment = assess(omission_history([]))[2]
    assert result(assessment, inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD).violated
    within = result(assessment, inv.QUANTITY_WITHIN_BILL)
    assert within.violated  # the omission still stands until an instruction reverses it
    assert "100.00 beyond the 400.00 billed and instructed" in within.explanation


def test_an_omission_reversed_by_instruction_restores_the_quantity() -> None:
    reversal = variation("V-3", "0.00", instruction="CAI-003", reverses="V-2")
    assessment = assess(omission_history([reversal]))[2]
    assert result(assessment, inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD).verdict == "pass"
    assert result(assessment, inv.QUANTITY_WITHIN_BILL).verdict == "pass"
    assert assessment.certified, [v.explanation for v in assessment.violations]


def test_an_omission_kept_beside_a_reversal_that_adds_it_back_restores_the_quantity() -> None:
    reversal = variation("V-3", "0.00", instruction="CAI-003", line="L02", change="100.00", reverses="V-2")
    assessment = assess(omission_history([OMIT, reversal]))[2]
    assert assessment.certified, [v.explanation for v in assessment.violations]


ADD = variation("V-2", "0.00", instruction="CAI-002", line="L02", change="100.00")  # L02 allows 600.00 from month 2


def addition_history(month_three: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An instructed addition to L02 is certified; on remeasurement the next month L02 falls back by 50.00."""
    periods = [
        Period({"L02": "100.00"}),
        Period({"L02": "300.00"}, variations=[ADD]),
        Period({"L02": "250.00"}, variations=month_three),
    ]
    return honest_history(contract(), periods)


def test_a_fall_after_an_addition_reversed_by_instruction_is_not_a_decrease_without_variation() -> None:
    reversal = variation("V-3", "0.00", instruction="CAI-003", reverses="V-2")
    assessment = assess(addition_history([reversal]))[2]
    assert assessment.certified, [v.explanation for v in assessment.violations]


def test_a_fall_with_the_addition_still_standing_is_a_decrease_without_variation() -> None:
    for month_three in ([ADD], []):
        found = result(assess(addition_history(month_three))[2], inv.QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION)
        assert found.violated
        assert found.compared_with == ("C2",)


def omission_restated(instruction: str) -> CertificateAssessment:
    """Month three restates the certified omission V-2 (-100.00 on L02) as -10.00 and takes L02 to 490.00."""
    smaller = variation("V-2", "0.00", instruction=instruction, line="L02", change="-10.00")
    periods = [
        Period({"L02": "100.00"}),
        Period({"L02": "300.00"}, variations=[OMIT]),
        Period({"L02": "490.00"}, variations=[smaller]),
    ]
    return assess(honest_history(contract(), periods))[2]


def test_a_certified_omission_restated_smaller_under_its_old_instruction_still_omits_as_certified() -> None:
    assessment = omission_restated("CAI-002")
    assert result(assessment, inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD).violated
    within = result(assessment, inv.QUANTITY_WITHIN_BILL)
    assert within.violated
    assert "90.00 beyond the 400.00 billed and instructed" in within.explanation


def test_a_certified_omission_re_valued_by_a_new_instruction_omits_as_re_valued() -> None:
    assessment = omission_restated("CAI-022")
    assert assessment.certified, [v.explanation for v in assessment.violations]
