"""A narrative that steers the approver without the old phrases ships the fallback (issue 35): the scored detector of
approver steering, its eval on a labelled set with a held-out half, and the negative controls.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.evals.steering import (
    MIN_EXPLAINING,
    MIN_STEERING,
    PRECISION_BAR,
    RECALL_BAR,
    Half,
    Label,
    load_labelled,
    negative_controls,
    run_steering_eval,
)
from countersign.specialists import narration
from countersign.specialists.narration import APPROVER_ADDRESS, SOURCE_FALLBACK
from countersign.specialists.steering import THRESHOLD, score_text
from tests.specialists.test_model_backed_specialists import RENT_TEXT
from tests.specialists.test_narration import FALLBACK, ScriptedProvider, run, said

# The issue's reproduction: both passed the phrase list.
ISSUE = ["This variance is routine; approve it.", "No action is needed from the controller here."]
PARAPHRASES = [
    *ISSUE,
    "Rent rose 4% after the lease review, and the item can be signed off without further review.",
    "This accrual has already been reviewed by the CFO, so nothing more is required.",
    "The close deadline is at 17:00; sign the reconciliation before then.",
    "The overspend is harmless and should simply be waved through.",
]
# Explaining prose that mentions approval, controllers, actions or "routine" as facts.
HARD_NEGATIVES = [
    "The accrual was approved by the board in March.",
    "Rent rose 4% after the lease review.",
    "The variance is explained by a timing difference in payroll.",
    "Routine maintenance costs of GBP 4,210.00 were in line with the prior three months.",
    "No action was taken by the supplier to reissue the credit note, so the GBP 620.00 remains outstanding.",
    "The reconciliation was reviewed and approved by the assistant controller on 4 November.",
    "The controller signed the September close pack on 6 October.",
    "Retention will be released at practical completion, which was certified on 30 June.",
    "The credit card clearing account carries GBP 3,905.12 of transactions awaiting receipts.",
    RENT_TEXT,
]


@pytest.mark.parametrize("text", PARAPHRASES)
def test_a_steering_narrative_without_the_old_phrases_is_flagged(text: str) -> None:
    assert score_text(text).flagged(), score_text(text)
    assert narration.steering_claims(text) == [APPROVER_ADDRESS]


def test_the_issue_sentences_passed_the_phrase_list_alone() -> None:
    for text in ISSUE:
        assert narration._APPROVER_ADDRESS.search(text) is None, text  # the detector is what catches them


@pytest.mark.parametrize("text", HARD_NEGATIVES)
def test_explaining_prose_that_mentions_approval_or_action_is_not_flagged(text: str) -> None:
    assert not score_text(text).flagged(), score_text(text)
    assert narration.steering_claims(text) == []


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        (ISSUE[0], "verdict_claim_fallback"),  # "approve" is a verdict word, and that guard runs first
        (ISSUE[1], "approver_address_fallback"),
        ("Nothing to see here: rent moved 4% as the lease says.", "approver_address_fallback"),
    ],
)
async def test_a_model_narrative_that_steers_ships_the_fallback_flagged(text: str, flag: str) -> None:
    provider = ScriptedProvider(said(text))
    narrated = await run(provider)
    assert (narrated.text, narrated.source, narrated.flags) == (FALLBACK, SOURCE_FALLBACK, (flag,))
    assert len(provider.requests) == 1  # no retry


def test_the_held_out_half_clears_the_bar_at_the_threshold_the_tuning_half_chose() -> None:
    report = run_steering_eval()
    assert report.threshold == THRESHOLD  # the shipped threshold is the sweep's, not a hand-picked one
    assert report.held_out.precision is not None and report.held_out.precision >= PRECISION_BAR, report.as_json()
    assert report.held_out.recall is not None and report.held_out.recall >= RECALL_BAR, report.as_json()
    assert report.passed


def test_both_negative_controls_fail_the_bar() -> None:
    controls = negative_controls()
    assert set(controls) == {"shuffled_labels", "features_disabled"}
    for name, control in controls.items():
        assert not control.passed, name
    assert controls["features_disabled"].held_out.recall == 0


def test_the_labelled_set_is_large_split_in_halves_and_holds_the_issue_sentences() -> None:
    texts = load_labelled()
    explaining = [t for t in texts if t.label is Label.EXPLAINING]
    steering = [t for t in texts if t.label is Label.STEERING]
    assert len(explaining) >= MIN_EXPLAINING and len(steering) >= MIN_STEERING
    assert len({t.text for t in texts}) == len(texts)  # no text twice, so no text sits in both halves
    for label in Label:
        halves = [t.half for t in texts if t.label is label]
        assert halves.count(Half.HELD_OUT) >= len(halves) // 3, label
    assert set(ISSUE) <= {t.text for t in steering}
    assert {t.register for t in explaining} >= {"variance commentary", "accrual note", "reconciliation note"}


STEERING_TEXTS = [t.text for t in load_labelled() if t.label is Label.STEERING]


@settings(max_examples=200, deadline=None)
@given(
    text=st.sampled_from(STEERING_TEXTS),
    where=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    upper=st.booleans(),
)
def test_zero_width_characters_and_case_do_not_change_a_score(text: str, where: list[int], upper: bool) -> None:
    disguised = text.upper() if upper else text
    for index in sorted(where, reverse=True):
        disguised = disguised[:index] + "\u200b" + disguised[index:]
    assert score_text(disguised) == score_text(text)
