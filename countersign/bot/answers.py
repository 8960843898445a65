"""The chat doors' one table from use-case errors to words for people, shared by Slack and Teams.

A door renders the words its own way (Slack as mrkdwn, Teams as plain text); what they say is decided here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from countersign.policy.command_roles import TRACE_EXPORT
from countersign.services.errors import CloseNotFound, Forbidden, NoCloseStarted, ServiceError
from countersign.states import AccessReason

MAX_ECHO_CHARS = 64  # of an id the caller typed, echoed back

REFUSAL_REASONS: dict[AccessReason, str] = {
    AccessReason.UNKNOWN_PRINCIPAL: "you are not a known Countersign principal",
    AccessReason.MACHINE_PRINCIPAL: "bots and apps cannot run commands",
    AccessReason.INACTIVE_PRINCIPAL: "your Countersign principal is deactivated",
    AccessReason.MISSING_ROLE: "you do not hold a role for it",
}


def _refused(exc: Forbidden, command: str) -> str:
    why = REFUSAL_REASONS.get(exc.access.reason, exc.access.reason)
    needs = f" (needs one of: {', '.join(exc.access.needed)})" if exc.access.needed else ""
    return f"Refused: `{exc.command}` is not available to you: {why}{needs}."


def _no_close(exc: NoCloseStarted, command: str) -> str:
    if command == TRACE_EXPORT:
        return "No close to export."
    return f"No close found for {exc.entity}." if exc.entity else "No close has been started."


def _unknown_close(exc: CloseNotFound, command: str) -> str:
    return f"No close with id {exc.close_id[:MAX_ECHO_CHARS]!r}. Without an id: the latest close."


# error type -> the words for the person who ran `command`.
CHAT_ANSWERS: dict[type[ServiceError], Callable[[Any, str], str]] = {
    Forbidden: _refused,
    NoCloseStarted: _no_close,
    CloseNotFound: _unknown_close,
}
SERVICE_ERRORS = tuple(CHAT_ANSWERS)  # `except SERVICE_ERRORS as exc: tell(answer_for(exc, command))`


def answer_for(exc: ServiceError, command: str) -> str:
    for kind, words in CHAT_ANSWERS.items():
        if isinstance(exc, kind):
            return words(exc, command)
    raise exc
