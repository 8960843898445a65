"""Steering eval: the scored detector of approver steering (countersign/specialists/steering.py) against a
hand-labelled set, with two negative controls, on the shared harness (countersign/evals/detector_eval.py: the hash
split, the sweep on the tuning half, the held-out grade and the controls).

The labelled set is `config/evals/steering/explaining.txt` and `steering.txt`, written before the detector's
features. `run_steering_eval` reports precision and recall on the held-out half at the swept threshold and whether
they clear the bar (`PRECISION_BAR`, `RECALL_BAR`).

`python -m countersign.evals.steering` prints the report with the tuning half's sweep (the figures in
docs/benchmarks.md).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path

from countersign.bootstrap.settings import default_config_dir
from countersign.evals.detector_eval import DetectorEval, DetectorEvalReport, Half, LabelledText, Scorer
from countersign.evals.scoring import Summary
from countersign.specialists.steering import FEATURES, THRESHOLD, Feature, score_text

__all__ = ["Half", "Label", "LabelledText", "Scorer", "SteeringEvalReport"]

HARNESS = "steering eval"
DATA_DIR = default_config_dir() / "evals" / "steering"  # the checkout's config/, else the wheel's copy
PRECISION_BAR = 0.9
RECALL_BAR = 0.9
SHUFFLE_SEED = 23
MIN_EXPLAINING = 120
MIN_STEERING = 120

SteeringEvalReport = DetectorEvalReport


class Label(Enum):
    EXPLAINING = "explaining"
    STEERING = "steering"


def feature_scorer(features: Sequence[Feature] = FEATURES) -> Scorer:
    return lambda text: score_text(text, features).score


EVAL = DetectorEval(
    harness=HARNESS,
    data_dir=DATA_DIR,
    negative=Label.EXPLAINING,
    positive=Label.STEERING,
    precision_bar=PRECISION_BAR,
    recall_bar=RECALL_BAR,
    shuffle_seed=SHUFFLE_SEED,
    default_threshold=THRESHOLD,
    scorer_for=feature_scorer,
    features=FEATURES,
)


def load_labelled(data_dir: Path = DATA_DIR) -> list[LabelledText]:
    return EVAL.load_labelled(data_dir)


def run_steering_eval(
    texts: Sequence[LabelledText] | None = None, scorer: Scorer | None = None, *, threshold: int | None = None
) -> SteeringEvalReport:
    """Choose the threshold on the tuning half (unless given), grade the held-out half at it."""
    return EVAL.run(texts, scorer, threshold=threshold)


def negative_controls(texts: Sequence[LabelledText] | None = None) -> dict[str, SteeringEvalReport]:
    return EVAL.negative_controls(texts)


def summary(report: SteeringEvalReport, controls: Mapping[str, SteeringEvalReport]) -> tuple[Summary, ...]:
    return EVAL.summary(report, controls)


if __name__ == "__main__":
    sys.exit(EVAL.main(with_sweep=True))
