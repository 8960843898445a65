"""One harness for a scored text detector graded on a hand-labelled set: the injection detector and the steering
detector each configure it (countersign/evals/injection.py, countersign/evals/steering.py).

The labelled set is two files in the eval's folder, `<negative>.txt` and `<positive>.txt` (one text per line;
`## register` lines name the register of the lines below them). Every text is assigned to a half by the SHA-256 of
its bytes: an even first byte puts it in the tuning half, an odd one in the held-out half, so the split is fixed,
independent of the order of the files and of the detector. `sweep` tries every threshold on the tuning half and picks
the one with the best F1 (ties: the higher threshold, the fewer false alarms); `run` reports precision and recall on
the held-out half at that threshold and whether they clear the bars.

Negative controls, both of which must fail the bar: the same detector graded against labels shuffled with a fixed
seed (a detector that scores structure cannot agree with random labels), and the detector with its features
disabled (nothing scores, nothing is flagged).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any

from countersign.evals.scoring import Confusion, Summary, reaches

Scorer = Callable[[str], int]


class Half(Enum):
    TUNING = "tuning"
    HELD_OUT = "held_out"


@dataclass(frozen=True)
class LabelledText:
    text: str
    label: Enum
    register: str
    line: int

    @property
    def half(self) -> Half:
        return Half.TUNING if hashlib.sha256(self.text.encode("utf-8")).digest()[0] % 2 == 0 else Half.HELD_OUT


def _rounded(score: Decimal | None) -> float:
    """Three places, as a JSON number; an undefined score is shown as 0.0."""
    return 0.0 if score is None else float(round(score, 3))


def _confusion_json(c: Confusion) -> dict[str, object]:
    return {
        "tp": c.true_positives,
        "fp": c.false_positives,
        "fn": c.false_negatives,
        "tn": c.true_negatives,
        "precision": _rounded(c.precision),
        "recall": _rounded(c.recall),
    }


@dataclass(frozen=True)
class DetectorEvalReport:
    harness: str
    bars: tuple[float, float]  # precision, recall
    threshold: int
    tuning: Confusion
    held_out: Confusion
    counts: Mapping[str, int]  # texts per label, by the label's word
    missed: tuple[LabelledText, ...]  # held-out positive texts not flagged
    false_alarms: tuple[LabelledText, ...]  # held-out negative texts flagged

    @property
    def passed(self) -> bool:
        return reaches(self.held_out.precision, self.bars[0]) and reaches(self.held_out.recall, self.bars[1])

    def summary(self) -> tuple[Summary, ...]:
        return (
            Summary(self.harness, "held-out precision", self.held_out.precision, self.bars[0]),
            Summary(self.harness, "held-out recall", self.held_out.recall, self.bars[1]),
        )

    def as_json(self) -> dict[str, object]:
        return {
            "threshold": self.threshold,
            **self.counts,
            "tuning": _confusion_json(self.tuning),
            "held_out": _confusion_json(self.held_out),
            "bar": {"precision": self.bars[0], "recall": self.bars[1]},
            "passed": self.passed,
            "missed": [t.text for t in self.missed],
            "false_alarms": [t.text for t in self.false_alarms],
        }


@dataclass(frozen=True)
class DetectorEval:
    """An eval's settings: its set, its labels, its bars, its control's seed and the detector it grades."""

    harness: str
    data_dir: Path
    negative: Enum  # the label of texts that must not be flagged
    positive: Enum  # the label of texts that must be
    precision_bar: float
    recall_bar: float
    shuffle_seed: int
    default_threshold: int  # the candidate when nothing scores
    scorer_for: Callable[[Sequence[Any]], Scorer]  # a scorer from a sequence of the detector's features
    features: Sequence[Any]

    def load_labelled(self, data_dir: Path | None = None) -> list[LabelledText]:
        texts: list[LabelledText] = []
        for label in (self.negative, self.positive):
            register = "unnamed"
            path = (data_dir or self.data_dir) / f"{label.value}.txt"
            for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                line = raw.strip()
                if line.startswith("## "):
                    register = line[3:].strip()
                elif line and not line.startswith("#"):
                    texts.append(LabelledText(line, label, register, number))
        return texts

    def confusion(self, texts: Sequence[LabelledText], scores: Sequence[int], threshold: int) -> Confusion:
        tp = fp = fn = tn = 0
        for text, score in zip(texts, scores, strict=True):
            flagged = score >= threshold
            positive = text.label is self.positive
            tp += flagged and positive
            fp += flagged and not positive
            fn += not flagged and positive
            tn += not flagged and not positive
        return Confusion(tp, fp, fn, tn)

    def sweep(self, texts: Sequence[LabelledText], scores: Sequence[int]) -> int:
        """The threshold with the best F1 on these texts; ties go to the higher threshold."""
        candidates = sorted({score for score in scores if score > 0}) or [self.default_threshold]
        return max(candidates, key=lambda threshold: (self.confusion(texts, scores, threshold).f1, threshold))

    def sweep_table(self, texts: Sequence[LabelledText], scores: Sequence[int]) -> list[tuple[int, Confusion]]:
        """Every candidate threshold with its confusion on these texts (the rows docs/benchmarks.md shows)."""
        return [(t, self.confusion(texts, scores, t)) for t in sorted({s for s in scores if s > 0})]

    def scorer(self, features: Sequence[Any] | None = None) -> Scorer:
        return self.scorer_for(self.features if features is None else features)

    def run(
        self,
        texts: Sequence[LabelledText] | None = None,
        scorer: Scorer | None = None,
        *,
        threshold: int | None = None,
    ) -> DetectorEvalReport:
        """Choose the threshold on the tuning half (unless given), grade the held-out half at it."""
        labelled = list(texts) if texts is not None else self.load_labelled()
        score = scorer or self.scorer()
        tuning = [t for t in labelled if t.half is Half.TUNING]
        held_out = [t for t in labelled if t.half is Half.HELD_OUT]
        tuning_scores = [score(t.text) for t in tuning]
        held_scores = [score(t.text) for t in held_out]
        chosen = self.sweep(tuning, tuning_scores) if threshold is None else threshold
        held = list(zip(held_out, held_scores, strict=True))
        return DetectorEvalReport(
            harness=self.harness,
            bars=(self.precision_bar, self.recall_bar),
            threshold=chosen,
            tuning=self.confusion(tuning, tuning_scores, chosen),
            held_out=self.confusion(held_out, held_scores, chosen),
            counts={
                label.value: sum(1 for t in labelled if t.label is label) for label in (self.negative, self.positive)
            },
            missed=tuple(t for t, s in held if t.label is self.positive and s < chosen),
            false_alarms=tuple(t for t, s in held if t.label is self.negative and s >= chosen),
        )

    def shuffled_labels(self, texts: Sequence[LabelledText], seed: int | None = None) -> list[LabelledText]:
        """The same texts with their labels permuted (a fixed seed): the negative control's data."""
        labels = [t.label for t in texts]
        random.Random(self.shuffle_seed if seed is None else seed).shuffle(labels)
        return [LabelledText(t.text, label, t.register, t.line) for t, label in zip(texts, labels, strict=True)]

    def negative_controls(self, texts: Sequence[LabelledText] | None = None) -> dict[str, DetectorEvalReport]:
        labelled = list(texts) if texts is not None else self.load_labelled()
        return {
            "shuffled_labels": self.run(self.shuffled_labels(labelled)),
            "features_disabled": self.run(labelled, self.scorer(())),
        }

    def summary(self, report: DetectorEvalReport, controls: Mapping[str, DetectorEvalReport]) -> tuple[Summary, ...]:
        """The detector's lines, then one per control: the lower of its held-out precision and recall, which must
        miss the bar (the lower of the two bars)."""
        lowest = [(name, _lowest(c.held_out.precision, c.held_out.recall)) for name, c in controls.items()]
        bar = min(self.precision_bar, self.recall_bar)
        return report.summary() + tuple(
            Summary(
                f"{self.harness}, {name.replace('_', ' ')}", "lower of precision and recall", value, bar, control=True
            )
            for name, value in lowest
        )

    def main(self, *, with_sweep: bool = False) -> int:
        """Print the report as JSON (with the tuning half's sweep when asked); 0 when the detector passes and no
        control does."""
        labelled = self.load_labelled()
        report = self.run(labelled)
        controls = self.negative_controls(labelled)
        out: dict[str, object] = {"detector": report.as_json()}
        if with_sweep:
            tuning = [t for t in labelled if t.half is Half.TUNING]
            scorer = self.scorer()
            out["tuning_sweep"] = [
                {**_confusion_json(c), "threshold": t, "f1": _rounded(c.f1)}
                for t, c in self.sweep_table(tuning, [scorer(x.text) for x in tuning])
            ]
        out["controls"] = {name: {**c.as_json(), "missed": len(c.missed)} for name, c in controls.items()}
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0 if report.passed and not any(c.passed for c in controls.values()) else 1


def _lowest(*scores: Decimal | None) -> Decimal | None:
    return None if any(score is None for score in scores) else min(s for s in scores if s is not None)
