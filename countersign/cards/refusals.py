"""Human wording for each refusal code the decision endpoint returns (README: "Refusal reasons")."""

from __future__ import annotations

from countersign.states import RefusalCode

REFUSAL_WORDING: dict[str, str] = {
    RefusalCode.UNKNOWN_PRINCIPAL: (
        "You are not on Countersign's list of people who can decide gates, so nothing was recorded."
    ),
    RefusalCode.MACHINE_PRINCIPAL: "Bots, apps and service accounts cannot decide gates; a person has to.",
    RefusalCode.MISSING_ROLE: "This gate needs an approver with the required role, and your account does not hold it.",
    RefusalCode.PREPARER: "You prepared or requested this work, so you cannot approve it: someone else has to.",
    RefusalCode.ALREADY_VOTED: "You have already decided this gate; each person counts once.",
    RefusalCode.ALREADY_DECIDED: "This gate has already been decided, so your decision was not recorded.",
    RefusalCode.GATE_EXPIRED: "This gate has expired. The task will run again and open a new gate.",
    RefusalCode.GATE_CANCELLED: "This gate was cancelled, so there is nothing left to decide.",
    RefusalCode.CONFLICT: "Your decision conflicts with one already recorded for this gate, so it was not recorded.",
    RefusalCode.NEEDS_PERSON_KEY: "This gate needs your own key: review and sign it on the Close Board.",
    RefusalCode.REASON_REQUIRED: "A rejection needs a reason, so nothing was recorded.",
    RefusalCode.DUTIES_SEGREGATED: (
        "You approved the other side of this: a certificate's payment and the month's accruals that carry its"
        " certified sum need two different people, so someone else has to approve this one."
    ),
}

UNKNOWN_REFUSAL = "Your decision was not recorded."

REASON_NEEDED = "Say why you reject this gate: a rejection needs a reason. Nothing was recorded."
PERSON_KEY_NOTE = (
    "This gate needs the approver's own key (a passkey or an Ed25519 signature), so it is decided on the Close Board,"
    " not with a button here."
)


def person_key_needed(page_url: str) -> str:
    """What a person is told who clicks a one-tap button on a gate that needs their own key."""
    return f"This gate needs your own key: review and sign it on the Close Board: {page_url}"


def refusal_wording(reason_code: str) -> str:
    return REFUSAL_WORDING.get(reason_code, f"{UNKNOWN_REFUSAL} (reason: {reason_code})")
