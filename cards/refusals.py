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
}

UNKNOWN_REFUSAL = "Your decision was not recorded."


def refusal_wording(reason_code: str) -> str:
    return REFUSAL_WORDING.get(reason_code, f"{UNKNOWN_REFUSAL} (reason: {reason_code})")
