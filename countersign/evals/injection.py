"""Injection eval: the scored detector (countersign/specialists/injection.py) against a hand-labelled set, with two
negative controls, on the shared harness (countersign/evals/detector_eval.py: the hash split, the sweep on the tuning
half, the held-out grade and the controls).

The labelled set is `config/evals/injection/benign.txt` and `hostile.txt`. `run_injection_eval` reports precision and
recall on the held-out half at the swept threshold and whether they clear the bar (`PRECISION_BAR`, `RECALL_BAR`).

`python -m countersign.evals.injection` prints the report (the figures in docs/benchmarks.md).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path

from countersign.bootstrap.settings import default_config_dir
from countersign.evals.detector_eval import DetectorEval, DetectorEvalReport, Half, LabelledText, Scorer
from countersign.evals.scoring import Summary
from countersign.specialists.injection import FEATURES, THRESHOLD, Feature, score_text

__all__ = ["Half", "InjectionEvalReport", "Label", "LabelledText", "Scorer"]

HARNESS = "injection eval"
DATA_DIR = default_config_dir() / "evals" / "injection"  # the checkout's config/, else the wheel's copy
PRECISION_BAR = 0.85
RECALL_BAR = 0.85
SHUFFLE_SEED = 19
MIN_BENIGN = 300
MIN_HOSTILE = 100

InjectionEvalReport = DetectorEvalReport


class Label(Enum):
    BENIGN = "benign"
    HOSTILE = "hostile"


def feature_scorer(features: Sequence[Feature] = FEATURES) -> Scorer:
    return lambda text: score_text(text, features).score


EVAL = DetectorEval(
    harness=HARNESS,
    data_dir=DATA_DIR,
    negative=Label.BENIGN,
    positive=Label.HOSTILE,
    precision_bar=PRECISION_BAR,
    recall_bar=RECALL_BAR,
    shuffle_seed=SHUFFLE_SEED,
    default_threshold=THRESHOLD,
    scorer_for=feature_scorer,
    features=FEATURES,
)


def load_labelled(data_dir: Path = DATA_DIR) -> list[LabelledText]:
    return EVAL.load_labelled(data_dir)


def run_injection_eval(
    texts: Sequence[LabelledText] | None = None, scorer: Scorer | None = None, *, threshold: int | None = None
) -> InjectionEvalReport:
    """Choose the threshold on the tuning half (unless given), grade the held-out half at it."""
    return EVAL.run(texts, scorer, threshold=threshold)


def negative_controls(texts: Sequence[LabelledText] | None = None) -> dict[str, InjectionEvalReport]:
    return EVAL.negative_controls(texts)


def summary(report: InjectionEvalReport, controls: Mapping[str, InjectionEvalReport]) -> tuple[Summary, ...]:
    return EVAL.summary(report, controls)


if __name__ == "__main__":
    sys.exit(EVAL.main())
