"""Every invariant passes the hand-priced history and catches a crafted violation of its own."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from countersign.certificates import INVARIANTS, assess_contract, parse_certificate, parse_contract
from countersign.certificates import invariants as inv
from countersign.certificates.assessment import CertificateAssessment
from tests.certificates.history import CONTRACT, history, refoot

Edit = Callable[[list[dict[str, Any]]], int]
"""Changes the history in place and returns the index of the certificate that must be caught."""


def assess(certificates: list[dict[str, Any]], **kwargs: Any) -> tuple[CertificateAssessment, ...]:
    return assess_contract(parse_contract(CONTRACT), [parse_certificate(c) for c in certificates], **kwargs)


def result(assessment: CertificateAssessment, name: str) -> inv.InvariantResult:
    return next(r for r in assessment.results if r.name == name)


def test_there_are_sixteen_invariants_in_a_fixed_order() -> None:
    assert len(INVARIANTS) == 16
    assert len(set(INVARIANTS)) == 16
    assert tuple(inv.CHECKS) == INVARIANTS


def test_the_hand_priced_history_passes_every_invariant() -> None:
    assessments = assess(history())
    assert [a.certificate.id for a in assessments] == ["C1", "C2", "C3", "C4"]
    for assessment in assessments:
        assert [r.name for r in assessment.results] == list(INVARIANTS)
        assert [r.explanation for r in assessment.violations] == []
    assert assessments[-1].position.net_to_date_minor == 138_000


def _footing(h: list[dict[str, Any]]) -> int:
    h[1]["totals"]["amount_due"] = "446.00"
    return 1


def _carry_forward(h: list[dict[str, Any]]) -> int:
    h[2]["totals"]["previously_certified"] = "800.00"
    refoot(h[2])
    return 2


def _mixed_basis(h: list[dict[str, Any]]) -> int:
    line = h[2]["lines"][0]  # L01 stated for this period only: 30 m3, 360.00, nothing previous
    line.update(quantity_to_date="30.00", value_to_date="360.00", previous_quantity="0.00", previous_value="0.00")
    refoot(h[2])
    return 2


def _decrease(h: list[dict[str, Any]]) -> int:
    h[2]["lines"][1].update(quantity_to_date="15.00", value_to_date="300.00")  # L02 falls from 20 to 15
    refoot(h[2])
    return 2


def _beyond_bill(h: list[dict[str, Any]]) -> int:
    h[3]["lines"][1].update(quantity_to_date="55.00", value_to_date="1100.00")  # L02: bill 50
    refoot(h[3])
    return 3


def _superseded_rate(h: list[dict[str, Any]]) -> int:
    h[2]["lines"][0]["value_to_date"] = "900.00"  # 30 m3 at R1's 10.00 instead of R2's 12.00
    refoot(h[2])
    return 2


def _two_packages(h: list[dict[str, Any]]) -> int:
    h[3]["lines"].append(
        {
            "boq_line": "L01",
            "package": "P2",
            "scope_hash": "hash-l01",
            "quantity_to_date": "10.00",
            "value_to_date": "120.00",
            "previous_quantity": "0.00",
            "previous_value": "0.00",
        }
    )
    refoot(h[3])
    return 3


def _no_instruction(h: list[dict[str, Any]]) -> int:
    h[2]["variations"][0]["instruction_ref"] = None
    return 2


def _over_cap(h: list[dict[str, Any]]) -> int:
    h[2]["totals"]["retention_deducted"] = "83.00"  # 5 % of 1,660.00 ignoring the 80.00 cap
    refoot(h[2])
    return 2


def _released_twice(h: list[dict[str, Any]]) -> int:
    h[3]["retention_releases"].append({"event": "practical_completion", "amount": "40.00"})
    refoot(h[3])
    return 3


def _released_early(h: list[dict[str, Any]]) -> int:
    h[2]["retention_releases"] = [{"event": "practical_completion", "amount": "40.00"}]
    refoot(h[2])
    return 2


def _not_amortised(h: list[dict[str, Any]]) -> int:
    h[1]["totals"]["advance_repaid"] = "75.00"  # nothing repaid since certificate 1
    refoot(h[1])
    return 1


def _over_repaid(h: list[dict[str, Any]]) -> int:
    h[2]["totals"]["advance_repaid"] = "250.00"
    refoot(h[2])
    return 2


def _materials_kept(h: list[dict[str, Any]]) -> int:
    h[2]["materials_on_site"] = list(h[1]["materials_on_site"])  # M1 still claimed once L01 reaches 90 >= 60 + 20
    refoot(h[2])
    return 2


def _variation_dropped(h: list[dict[str, Any]]) -> int:
    h[3]["variations"] = []  # V01 (100.00), certified on C3, left off C4
    refoot(h[3])
    return 3


def _materials_relisted(h: list[dict[str, Any]]) -> int:
    h[3]["materials_on_site"] = [  # L01 is at its full 100 m3 on C4: the stone again, under a new id
        {"id": "M9", "boq_line": "L01", "description": "Stone", "quantity": "20.00", "amount": "100.00"}
    ]
    refoot(h[3])
    return 3


CRAFTED: dict[str, tuple[Edit, dict[str, Decimal]]] = {
    inv.STATEMENT_FOOTS: (_footing, {"difference": Decimal("1.00")}),
    inv.PREVIOUSLY_CERTIFIED_CARRIED_FORWARD: (_carry_forward, {"reconstructed": Decimal("845.00")}),
    inv.LINES_STATED_CUMULATIVELY: (_mixed_basis, {"reconstructed_previous": Decimal("600.00")}),
    inv.QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION: (_decrease, {"value_reduction": Decimal("100.00")}),
    inv.QUANTITY_WITHIN_BILL: (_beyond_bill, {"excess_value": Decimal("100.00")}),
    inv.PERIOD_WORK_AT_RATE_IN_FORCE: (_superseded_rate, {"difference": Decimal("-60.00")}),
    inv.SCOPE_BILLED_THROUGH_ONE_PACKAGE: (_two_packages, {"overlap": Decimal("120.00")}),
    inv.VARIATIONS_HAVE_INSTRUCTIONS: (_no_instruction, {"unauthorised": Decimal("100.00")}),
    inv.RETENTION_AT_RATE_WITHIN_CAP: (_over_cap, {"cap": Decimal("80.00")}),
    inv.RETENTION_RELEASED_ONCE: (_released_twice, {"excess": Decimal("40.00")}),
    inv.RETENTION_RELEASED_AFTER_PRACTICAL_COMPLETION: (_released_early, {"released": Decimal("40.00")}),
    inv.ADVANCE_AMORTISED_PER_SCHEDULE: (_not_amortised, {"scheduled": Decimal("200.00")}),
    inv.ADVANCE_REPAID_WITHIN_ADVANCE: (_over_repaid, {"excess": Decimal("50.00")}),
    inv.MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION: (_materials_kept, {"not_reversed": Decimal("100.00")}),
    inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD: (_variation_dropped, {"dropped": Decimal("100.00")}),
    inv.MATERIALS_WITHIN_LINE_ALLOWANCE: (_materials_relisted, {"excess_value": Decimal("100.00")}),
}


def test_every_invariant_has_a_crafted_case() -> None:
    assert set(CRAFTED) == set(INVARIANTS)


@pytest.mark.parametrize("name", INVARIANTS)
def test_a_crafted_violation_is_caught_with_its_amounts_and_clauses(name: str) -> None:
    edit, amounts = CRAFTED[name]
    h = history()
    target = edit(h)
    assessments = assess(h)
    found = result(assessments[target], name)
    assert found.verdict == "violation", found.explanation
    for key, value in amounts.items():
        assert found.amounts[key] == value
    refs = CONTRACT["clause_refs"]
    assert found.clause_topics == inv.CLAUSE_TOPICS[name]
    assert found.clause_ids == tuple(refs[topic] for topic in found.clause_topics)
    assert all(clause_id in found.explanation for clause_id in found.clause_ids)
    again = result(assess(h)[target], name)
    assert again == found  # deterministic: same verdict, amounts, lines and explanation
    # the same certificate untouched passes that invariant
    assert result(assess(history())[target], name).verdict == "pass"


def test_a_disabled_invariant_is_not_run() -> None:
    h = history()
    _footing(h)
    assessment = assess(h, disabled=[inv.STATEMENT_FOOTS])[1]
    assert inv.STATEMENT_FOOTS not in [r.name for r in assessment.results]
    assert assessment.certified


def test_an_unknown_invariant_cannot_be_disabled() -> None:
    with pytest.raises(ValueError, match="unknown invariant"):
        assess(history(), disabled=["no_such_invariant"])


def test_a_decrease_recorded_by_an_omission_passes() -> None:
    h = history()
    _decrease(h)
    h[2]["variations"].append(
        {
            "id": "V02",
            "instruction_ref": "CAI-002",
            "description": "Omit 5 t of steelwork",
            "amount": "0.00",
            "boq_line": "L02",
            "quantity_change": "-5.00",
        }
    )
    found = result(assess(h)[2], inv.QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION)
    assert found.verdict == "pass", found.explanation


def test_quantity_beyond_the_bill_passes_when_instructed() -> None:
    h = history()
    _beyond_bill(h)
    h[3]["variations"].append(
        {
            "id": "V02",
            "instruction_ref": "CAI-002",
            "description": "Add 5 t of steelwork",
            "amount": "0.00",
            "boq_line": "L02",
            "quantity_change": "5.00",
        }
    )
    assert result(assess(h)[3], inv.QUANTITY_WITHIN_BILL).verdict == "pass"


def test_the_superseded_rate_is_named_in_the_explanation() -> None:
    h = history()
    _superseded_rate(h)
    found = result(assess(h)[2], inv.PERIOD_WORK_AT_RATE_IN_FORCE)
    assert "superseded rate 10.00 of version R1" in found.explanation
    assert found.lines == ("L01",)


def test_a_held_certificate_does_not_move_the_position() -> None:
    h = history()
    _footing(h)  # certificate 2 is held
    assessments = assess(h)
    assert not assessments[1].certified
    assert assessments[2].position.last_certificate == "C1"
    carried = result(assessments[2], inv.PREVIOUSLY_CERTIFIED_CARRIED_FORWARD)
    assert carried.verdict == "violation"  # it carries forward 845.00, but only 400.00 was certified
    assert carried.amounts["reconstructed"] == Decimal("400.00")
