"""The timeline says when an attempt runs without the model, and why, in the words a person reads (docs/adr/0036)."""

from __future__ import annotations

from typing import Any

import pytest

from countersign.audit.timeline import MODEL_OFF_WORDS, describe
from countersign.audit.trace import TraceEvent
from countersign.policy.wording import in_words
from countersign.specialists.narration import MODEL_OFF_FIELD, MODEL_OFF_REASONS


def event(kind: str, **payload: Any) -> TraceEvent:
    return TraceEvent(
        seq=1,
        ts="2026-12-02T13:00:00.000000+00:00",
        close_id="c",
        actor="countersign-engine",
        kind=kind,
        payload=payload,
        version_set={},
        prev_hash=b"",
        hash=b"",
    )


def test_an_attempt_without_the_model_says_so_and_why_in_words() -> None:
    started = event("task_started", task="variance_analysis", attempt=2, **{MODEL_OFF_FIELD: "no_recorded_response"})
    requeued = event("task_requeued", task="variance_analysis", next_attempt=2, **{MODEL_OFF_FIELD: "budget_exhausted"})
    assert describe(started) == (
        "variance_analysis, without the model "
        "(approved escalation: the model was asked something nobody recorded an answer for)"
    )
    assert describe(requeued) == (
        "variance_analysis, to re-run without the model "
        "(approved escalation: the agent ran out of its step, time or token budget)"
    )
    assert "no_recorded_response" not in describe(started)


@pytest.mark.parametrize("kind", ["task_started", "task_requeued", "task_done"])
def test_negative_control_an_attempt_that_asks_the_model_is_just_the_task(kind: str) -> None:
    assert describe(event(kind, task="variance_analysis", attempt=1)) == "variance_analysis"


def test_a_reason_without_words_is_shown_as_its_code() -> None:
    assert describe(event("task_started", task="t", **{MODEL_OFF_FIELD: "felt_like_it"})) == (
        "t, without the model (approved escalation: felt_like_it)"
    )


def test_the_timeline_words_are_policy_words_for_every_model_off_reason() -> None:
    assert set(MODEL_OFF_WORDS) == set(MODEL_OFF_REASONS)
    assert {reason: in_words(reason) for reason in MODEL_OFF_REASONS} == MODEL_OFF_WORDS
