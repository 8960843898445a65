"""The duplicate detector on generated vendor data with issue 22's variations (`duplicate_variations`): every varied
re-submission held against its original, no legitimate look-alike held, through the pure pipeline."""

from __future__ import annotations

import pytest

from countersign.certificates.duplicates import Thresholds
from countersign.certificates.pipeline import run_pipeline
from tests.certificates.duplicate_variations import LookAlike, Variation, VariedSet, vary
from tests.certificates.generated import TUNED_SEEDS, generate

SEED = 31
assert SEED not in TUNED_SEEDS


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> VariedSet:
    data = generate(tmp_path_factory.mktemp("construction"), SEED, contracts=60, months=20)
    return vary(data.contracts, data.certificates, data.truth.duplicates, SEED)


def _holds(varied: VariedSet, thresholds: Thresholds | None = None) -> dict[str, str]:
    run = run_pipeline(varied.contracts, varied.certificates, thresholds=thresholds)
    return {hold.certificate: hold.other_certificate for hold in run.holds}


def test_the_set_has_every_variation_and_every_look_alike(varied: VariedSet) -> None:
    assert set(varied.variations.values()) == set(Variation)
    assert set(varied.look_alikes.values()) == set(LookAlike)
    same_day = [d for d, v in varied.variations.items() if v is Variation.SAME_DAY]
    assert all(d < varied.duplicates[d] for d in same_day), "the same-day re-send's id sorts before the original's"


def test_every_varied_resubmission_is_held_against_its_original(varied: VariedSet) -> None:
    held = _holds(varied)
    missed = {varied.variations[d]: d for d, original in varied.duplicates.items() if held.get(d) != original}
    assert missed == {}


def test_no_legitimate_look_alike_is_held(varied: VariedSet) -> None:
    held = _holds(varied)
    wrongly = {varied.look_alikes[c]: c for c in held if c in varied.look_alikes}
    assert wrongly == {}
    assert set(held) == set(varied.duplicates)


def test_the_fixed_45_day_window_misses_the_late_resubmissions(varied: VariedSet) -> None:
    """Negative control: the window the detector had before misses exactly the late variation."""
    held = _holds(varied, Thresholds(date_window_days=45))
    missed = {varied.variations[d] for d in varied.duplicates if d not in held}
    assert missed == {Variation.LATE}
