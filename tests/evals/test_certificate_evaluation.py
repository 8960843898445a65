"""The certificate eval meets its targets on seeds nobody tuned on; with any one invariant disabled it fails."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from countersign.certificates import INVARIANTS
from countersign.evals.certificates import CLASS_INVARIANTS, TARGET_PRECISION, TARGET_RECALL, evaluate
from countersign.synthetic.construction import FAULT_CLASSES
from tests.certificates.generated import TUNED_SEEDS, Dataset, generate

HELD_OUT_SEEDS = (7, 2026)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return generate(tmp_path_factory.mktemp("small"), 23, contracts=80, months=20)


def test_the_eval_knows_every_seeded_class() -> None:
    assert set(FAULT_CLASSES) <= set(CLASS_INVARIANTS)
    assert {names[0] for names in CLASS_INVARIANTS.values()} <= set(INVARIANTS)


@pytest.mark.parametrize("seed", HELD_OUT_SEEDS)
def test_the_eval_meets_its_targets_on_a_held_out_seed(seed: int, tmp_path: Path) -> None:
    assert seed not in TUNED_SEEDS
    data = generate(tmp_path, seed)
    report = evaluate(data.contracts, data.certificates, data.truth)
    assert report.failures() == ()
    for score in report.classes:
        assert score.seeded >= 10
        assert score.recall is not None and score.recall >= TARGET_RECALL
        assert score.precision is not None and score.precision >= TARGET_PRECISION
    assert report.duplicates.recall is not None and report.duplicates.recall >= TARGET_RECALL
    assert all(crafted.planted > 0 and crafted.caught == crafted.planted for crafted in report.crafted)


def test_the_fault_rate_is_two_to_three_percent(small: Dataset) -> None:
    monthly = len(small.certificates) - len(small.truth.duplicates)
    assert Decimal("0.02") <= Decimal(len(small.truth.faults)) / monthly <= Decimal("0.03")


@pytest.mark.parametrize("disabled", INVARIANTS)
def test_negative_control_any_disabled_invariant_fails_the_eval(disabled: str, small: Dataset) -> None:
    report = evaluate(small.contracts, small.certificates, small.truth, disabled=disabled)
    assert not report.passed
    assert any(disabled in failure for failure in report.failures()) or any(
        score.invariant == disabled and score.recall == 0 for score in report.classes
    )


def test_the_eval_passes_on_the_small_dataset_before_anything_is_disabled(small: Dataset) -> None:
    report = evaluate(small.contracts, small.certificates, small.truth)
    assert report.failures() == ()


def test_an_unknown_invariant_is_refused(small: Dataset) -> None:
    with pytest.raises(ValueError, match="unknown invariant"):
        evaluate(small.contracts, small.certificates, small.truth, disabled="no_such_invariant")
