"""Human wording for each refusal code the decision endpoint returns (README: "Refusal reasons")."""

from __future__ import annotations

REFUSAL_WORDING = {
    "unknown_principal": "You are not on Countersign's list of people who can decide gates, so nothing was recorded.",
    "machine_principal": "Bots, apps and service accounts cannot decide gates; a person has to.",
    "missing_role": "This gate needs an approver with the required role, and your account does not hold it.",
    "preparer": "You prepared or requested this work, so you cannot approve it: someone else has to.",
    "already_voted": "You have already decided this gate; each person counts once.",
    "already_decided": "This gate has already been decided, so your decision was not recorded.",
    "gate_expired": "This gate has expired. The task will run again and open a new gate.",
    "gate_cancelled": "This gate was cancelled, so there is nothing left to decide.",
    "conflict": "Your decision conflicts with one already recorded for this gate, so it was not recorded.",
    "needs_person_key": "This gate needs your own key: review and sign it on the Close Board.",
    "reason_required": "A rejection needs a reason, so nothing was recorded.",
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
