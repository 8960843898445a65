"""countersign/policy/wording.py: every code a person meets has words, and every escalation reason in particular."""

from __future__ import annotations

from enum import StrEnum

import pytest

from countersign.policy import EscalationReason
from countersign.policy.wording import WORDS, in_words
from countersign.states import Decision, GateLifecycle, GateStatus, ProofKind, RunState, TaskState


def without_words(codes: type[StrEnum] | tuple[str, ...]) -> list[str]:
    """The codes of `codes` the table has no words for (a code whose words are its own spelling has none)."""
    return [str(code) for code in codes if code not in WORDS or not WORDS[code].strip()]


def test_every_escalation_reason_has_words_of_its_own() -> None:
    """Fails when a reason is added to countersign/policy/escalation.py without words in
    countersign/policy/wording.py."""
    assert without_words(EscalationReason) == []
    for reason in EscalationReason:
        assert in_words(reason) != reason.value.replace("_", " "), reason


def test_a_reason_added_without_words_is_caught() -> None:
    """Negative control: the check above names a reason the table does not know."""

    class Extended(StrEnum):
        GATE_EXPIRED = "gate_expired"
        LEDGER_ON_FIRE = "ledger_on_fire"

    assert without_words(Extended) == ["ledger_on_fire"]


@pytest.mark.parametrize("states", [GateStatus, GateLifecycle, Decision, TaskState, RunState, ProofKind])
def test_every_state_people_see_has_words(states: type[StrEnum]) -> None:
    assert without_words(states) == []


def test_every_decision_channel_and_gate_kind_has_words() -> None:
    from countersign.callbacks.person_signature import SIGNED_CALLBACK
    from countersign.callbacks.principals import CHANNELS
    from countersign.policy import APPROVAL, ESCALATION

    assert without_words((*CHANNELS, SIGNED_CALLBACK, "board", APPROVAL, ESCALATION)) == []
    assert in_words("signed_callback") == "a signed callback"
    assert in_words("awaiting_gate") == "waiting for a person's decision"


def test_an_unknown_code_reads_with_spaces() -> None:
    assert in_words("some_new_code") == "some new code"
