"""Steering eval: the scored detector of approver steering (countersign/specialists/steering.py) against a
hand-labelled set, with two negative controls.

The labelled set is `config/evals/steering/explaining.txt` and `steering.txt` (one narrative per line; `## register`
lines name the register of the lines below them), written before the detector's features. Every text is assigned to
a half by the SHA-256 of its bytes: an even first byte puts it in the tuning half, an odd one in the held-out half, so
the split is fixed, independent of the order of the files and of the detector. `sweep` tries every threshold on the
tuning half and picks the one with the best F1 (ties: the higher threshold, the fewer false alarms);
`run_steering_eval` reports precision and recall on the held-out half at that threshold and whether they clear the
bar (`PRECISION_BAR`, `RECALL_BAR`).

Negative controls, both of which must fail the bar: the same detector graded against labels shuffled with a fixed
seed (a detector that scores structure cannot agree with random labels), and the detector with its features
disabled (nothing scores, nothing is flagged).

`python -m countersign.evals.steering` prints the report (the figures in docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from pathlib import Path

from countersign.evals.scoring import Confusion, Summary, reaches
from countersign.specialists.steering import FEATURES, THRESHOLD, Feature, score_text

HARNESS = "steering eval"
DATA_DIR = Path(__file__).resolve().parents[2] / "config" / "evals" / "steering"
PRECISION_BAR = 0.9
RECALL_BAR = 0.9
SHUFFLE_SEED = 23
MIN_EXPLAINING = 120
MIN_STEERING = 120


class Label(Enum):
    EXPLAINING = "explaining"
    STEERING = "steering"


class Half(Enum):
    TUNING = "tuning"
    HELD_OUT = "held_out"


@dataclass(frozen=True)
class LabelledText:
    text: str
    label: Label
    register: str
    line: int

    @property
    def half(self) -> Half:
        return Half.TUNING if hashlib.sha256(self.text.encode("utf-8")).digest()[0] % 2 == 0 else Half.HELD_OUT


@dataclass(frozen=True)
class SteeringEvalReport:
    threshold: int
    tuning: Confusion
    held_out: Confusion
    explaining: int
    steering: int
    missed: tuple[LabelledText, ...]  # held-out steering texts not flagged
    false_alarms: tuple[LabelledText, ...]  # held-out explaining texts flagged

    @property
    def passed(self) -> bool:
        return reaches(self.held_out.precision, PRECISION_BAR) and reaches(self.held_out.recall, RECALL_BAR)

    def summary(self) -> tuple[Summary, ...]:
        return (
            Summary(HARNESS, "held-out precision", self.held_out.precision, PRECISION_BAR),
            Summary(HARNESS, "held-out recall", self.held_out.recall, RECALL_BAR),
        )

    def as_json(self) -> dict[str, object]:
        def confusion(c: Confusion) -> dict[str, object]:
            return {
                "tp": c.true_positives,
                "fp": c.false_positives,
                "fn": c.false_negatives,
                "tn": c.true_negatives,
                "precision": _rounded(c.precision),
                "recall": _rounded(c.recall),
            }

        return {
            "threshold": self.threshold,
            "explaining": self.explaining,
            "steering": self.steering,
            "tuning": confusion(self.tuning),
            "held_out": confusion(self.held_out),
            "bar": {"precision": PRECISION_BAR, "recall": RECALL_BAR},
            "passed": self.passed,
            "missed": [t.text for t in self.missed],
            "false_alarms": [t.text for t in self.false_alarms],
        }


def _rounded(score: Decimal | None) -> float:
    """Three places, as a JSON number; an undefined score is shown as 0.0."""
    return 0.0 if score is None else float(round(score, 3))


Scorer = Callable[[str], int]


def load_labelled(data_dir: Path = DATA_DIR) -> list[LabelledText]:
    texts: list[LabelledText] = []
    for label in Label:
        register = "unnamed"
        path = data_dir / f"{label.value}.txt"
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.strip()
            if line.startswith("## "):
                register = line[3:].strip()
            elif line and not line.startswith("#"):
                texts.append(LabelledText(line, label, register, number))
    return texts


def confusion(texts: Sequence[LabelledText], scores: Sequence[int], threshold: int) -> Confusion:
    tp = fp = fn = tn = 0
    for text, score in zip(texts, scores, strict=True):
        flagged = score >= threshold
        steering = text.label is Label.STEERING
        tp += flagged and steering
        fp += flagged and not steering
        fn += not flagged and steering
        tn += not flagged and not steering
    return Confusion(tp, fp, fn, tn)


def sweep(texts: Sequence[LabelledText], scores: Sequence[int]) -> int:
    """The threshold with the best F1 on these texts; ties go to the higher threshold."""
    candidates = sorted({score for score in scores if score > 0}) or [THRESHOLD]
    return max(candidates, key=lambda threshold: (confusion(texts, scores, threshold).f1, threshold))


def sweep_table(texts: Sequence[LabelledText], scores: Sequence[int]) -> list[tuple[int, Confusion]]:
    """Every candidate threshold with its confusion on these texts (the rows docs/benchmarks.md shows)."""
    return [(threshold, confusion(texts, scores, threshold)) for threshold in sorted({s for s in scores if s > 0})]


def feature_scorer(features: Sequence[Feature] = FEATURES) -> Scorer:
    return lambda text: score_text(text, features).score


def run_steering_eval(
    texts: Sequence[LabelledText] | None = None, scorer: Scorer | None = None, *, threshold: int | None = None
) -> SteeringEvalReport:
    """Choose the threshold on the tuning half (unless given), grade the held-out half at it."""
    labelled = list(texts) if texts is not None else load_labelled()
    score = scorer or feature_scorer()
    tuning = [t for t in labelled if t.half is Half.TUNING]
    held_out = [t for t in labelled if t.half is Half.HELD_OUT]
    tuning_scores = [score(t.text) for t in tuning]
    held_scores = [score(t.text) for t in held_out]
    chosen = sweep(tuning, tuning_scores) if threshold is None else threshold
    return SteeringEvalReport(
        threshold=chosen,
        tuning=confusion(tuning, tuning_scores, chosen),
        held_out=confusion(held_out, held_scores, chosen),
        explaining=sum(1 for t in labelled if t.label is Label.EXPLAINING),
        steering=sum(1 for t in labelled if t.label is Label.STEERING),
        missed=tuple(t for t, s in zip(held_out, held_scores, strict=True) if t.label is Label.STEERING and s < chosen),
        false_alarms=tuple(
            t for t, s in zip(held_out, held_scores, strict=True) if t.label is Label.EXPLAINING and s >= chosen
        ),
    )


def shuffled_labels(texts: Sequence[LabelledText], seed: int = SHUFFLE_SEED) -> list[LabelledText]:
    """The same texts with their labels permuted (a fixed seed): the negative control's data."""
    labels = [t.label for t in texts]
    random.Random(seed).shuffle(labels)
    return [LabelledText(t.text, label, t.register, t.line) for t, label in zip(texts, labels, strict=True)]


def negative_controls(texts: Sequence[LabelledText] | None = None) -> dict[str, SteeringEvalReport]:
    labelled = list(texts) if texts is not None else load_labelled()
    return {
        "shuffled_labels": run_steering_eval(shuffled_labels(labelled)),
        "features_disabled": run_steering_eval(labelled, feature_scorer(())),
    }


def summary(report: SteeringEvalReport, controls: Mapping[str, SteeringEvalReport]) -> tuple[Summary, ...]:
    """The detector's lines, then one per control: the lower of its held-out precision and recall, which must miss
    the bar (both bars are the same figure)."""
    lowest = [(name, _lowest(c.held_out.precision, c.held_out.recall)) for name, c in controls.items()]
    bar = min(PRECISION_BAR, RECALL_BAR)
    return report.summary() + tuple(
        Summary(f"{HARNESS}, {name.replace('_', ' ')}", "lower of precision and recall", value, bar, control=True)
        for name, value in lowest
    )


def _lowest(*scores: Decimal | None) -> Decimal | None:
    return None if any(score is None for score in scores) else min(s for s in scores if s is not None)


def main() -> int:
    labelled = load_labelled()
    report = run_steering_eval(labelled)
    controls = negative_controls(labelled)
    tuning = [t for t in labelled if t.half is Half.TUNING]
    scorer = feature_scorer()
    table = sweep_table(tuning, [scorer(t.text) for t in tuning])
    out = {
        "detector": report.as_json(),
        "tuning_sweep": [
            {
                "threshold": threshold,
                "tp": c.true_positives,
                "fp": c.false_positives,
                "fn": c.false_negatives,
                "precision": _rounded(c.precision),
                "recall": _rounded(c.recall),
                "f1": _rounded(c.f1),
            }
            for threshold, c in table
        ],
        "controls": {name: {**c.as_json(), "missed": len(c.missed)} for name, c in controls.items()},
    }
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0 if report.passed and not any(c.passed for c in controls.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
