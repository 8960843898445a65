"""A check that compares a statement with the position names the certificate whose figures it compared with."""

from __future__ import annotations

import pytest

from countersign.certificates import invariants as inv
from tests.certificates.history import history
from tests.certificates.test_invariants import CRAFTED, assess, result


@pytest.mark.parametrize(
    ("name", "earlier"),
    [
        (inv.PREVIOUSLY_CERTIFIED_CARRIED_FORWARD, ("C2",)),
        (inv.LINES_STATED_CUMULATIVELY, ("C2",)),
        (inv.QUANTITIES_NEVER_DECREASE_WITHOUT_VARIATION, ("C2",)),
        (inv.ADVANCE_AMORTISED_PER_SCHEDULE, ("C1",)),
        (inv.MATERIALS_ON_SITE_REVERSED_ON_INCORPORATION, ("C2",)),
        (inv.CERTIFIED_VARIATIONS_CARRIED_FORWARD, ("C3",)),
        (inv.MATERIALS_WITHIN_LINE_ALLOWANCE, ("C3",)),
    ],
)
def test_a_violation_against_the_position_names_the_certificate_it_compared_with(
    name: str, earlier: tuple[str, ...]
) -> None:
    edit, _ = CRAFTED[name]
    h = history()
    target = edit(h)
    found = result(assess(h)[target], name)
    assert found.violated
    assert found.compared_with == earlier


def test_a_passing_check_names_no_certificate() -> None:
    for assessment in assess(history()):
        assert all(r.compared_with == () for r in assessment.results)


def test_a_line_missing_from_the_statement_names_where_it_was_certified() -> None:
    h = history()
    h[2]["lines"] = h[2]["lines"][:1]  # L02, certified at 20.00 / 400.00 on C2, left off certificate 3
    found = result(assess(h)[2], inv.LINES_STATED_CUMULATIVELY)
    assert "line L02 was certified to date before (20.00 / GBP 400.00 on certificate C2)" in found.explanation
    assert found.compared_with == ("C2",)
