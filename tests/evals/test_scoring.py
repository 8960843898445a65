"""countersign/evals/scoring.py: one confusion count, exact scores, and the summary line every harness reports in."""

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from countersign.evals import gates
from countersign.evals.scoring import Confusion, Summary, all_passed, ratio, reaches, render, score_text
from tests.evals.test_gate_eval import CASES_PATH, SHIPPED_CHECKLIST, SHIPPED_POLICY


def test_precision_and_recall_are_exact_and_undefined_when_nothing_was_flagged_or_planted() -> None:
    c = Confusion(true_positives=2, false_positives=1, false_negatives=1, true_negatives=5)
    assert c.precision == Decimal(2) / Decimal(3) and c.recall == Decimal(2) / Decimal(3)
    assert c.f1 == Decimal(2) / Decimal(3)
    nothing = Confusion(true_positives=0, false_positives=0, false_negatives=0)
    assert nothing.precision is None and nothing.recall is None and nothing.f1 == 0
    assert ratio(1, 0) is None and score_text(None) == "n/a" and score_text(Decimal("0.5")) == "0.500"


@given(st.integers(0, 500), st.integers(0, 500), st.integers(0, 500))
def test_scores_lie_between_zero_and_one(tp: int, fp: int, fn: int) -> None:
    c = Confusion(tp, fp, fn)
    for score in (c.precision, c.recall, c.f1):
        assert score is None or 0 <= score <= 1


def test_an_undefined_score_never_reaches_its_target() -> None:
    assert not reaches(None, 0)
    assert reaches(Decimal("0.95"), Decimal("0.95")) and not reaches(0.949, Decimal("0.95"))


def test_a_summary_line_names_harness_metric_value_target_and_verdict() -> None:
    line = Summary("injection eval", "held-out recall", Decimal("0.9315"), 0.85)
    assert line.render() == "injection eval: held-out recall 0.932 (target >= 0.85): PASS"
    miss = Summary("injection eval", "held-out recall", Decimal("0.5"), 0.85)
    assert miss.render() == "injection eval: held-out recall 0.500 (target >= 0.85): FAIL"


def test_a_negative_control_passes_only_by_missing_its_target() -> None:
    missed = Summary("gate eval", "share of cases passed", Decimal("0.8"), Decimal(1), control=True)
    assert missed.passed
    assert missed.render() == "gate eval (negative control): share of cases passed 0.800 (must stay below 1): PASS"
    reached = Summary("gate eval", "share of cases passed", Decimal(1), Decimal(1), control=True)
    assert not reached.passed
    measured = Summary("gate eval", "share of cases passed", Decimal(1), Decimal(1))
    assert all_passed((measured, missed)) and not all_passed((measured, reached)) and not all_passed(())


def test_the_gate_eval_sums_up_green_with_a_red_control() -> None:
    cases = gates.load_cases(CASES_PATH)
    report = gates.run_gate_eval(SHIPPED_POLICY, SHIPPED_CHECKLIST, cases)
    control = gates.negative_control(SHIPPED_POLICY, SHIPPED_CHECKLIST, cases)
    lines = gates.summary(report, control)
    assert all_passed(lines), render(lines)
    assert lines[0].value == 1 and lines[1].value is not None and lines[1].value < 1
