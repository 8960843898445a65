"""The HTTP door's one table from use-case errors to answers: status code, error code, detail.

Every web router answers a service error through `error_response`; the bodies are `{"error": code, "detail": ...}`
(`ErrorBody`), as the OpenAPI pages document them. A code is an `ErrorCode`, or a decision's `RefusalCode`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from countersign.policy.command_roles import PAYMENTS, READ_CLOSE, TRACE_EXPORT
from countersign.services.decide import PERSON_SIGNATURE_REJECTED, DecisionConflict, DecisionRefused, GateNotFound
from countersign.services.errors import CloseNotFound, Forbidden, NoCloseStarted, Unauthenticated
from countersign.states import ErrorCode, RefusalCode


class ErrorBody(BaseModel):
    error: str
    detail: str
    field: str | None = None


# What a refused reader was trying to do, in the words of a 403's detail.
DOING = {READ_CLOSE: "reading a close", PAYMENTS: "reading payment runs", TRACE_EXPORT: "exporting a trace"}


Answer = tuple[int, ErrorCode | RefusalCode, str]  # status code, error code, detail


def _forbidden(exc: Forbidden) -> Answer:
    doing = DOING.get(exc.command, f"`{exc.command}`")
    needed = ", ".join(exc.access.needed)
    return 403, ErrorCode.FORBIDDEN, f"{exc.access.reason}: {doing} needs one of the roles {needed}"


def _refused(exc: DecisionRefused) -> Answer:
    if exc.code == RefusalCode.AMENDMENT_INVALID:
        return 422, exc.code, str(exc)
    return (401 if exc.code == PERSON_SIGNATURE_REJECTED else 403), exc.code, str(exc)


# error type -> (status code, error code, detail); the first entry the error is an instance of answers.
HTTP_ERRORS: dict[type[Exception], Callable[[Any], Answer]] = {
    Unauthenticated: lambda exc: (401, ErrorCode.UNAUTHENTICATED, exc.reason),
    Forbidden: _forbidden,
    CloseNotFound: lambda exc: (404, ErrorCode.CLOSE_NOT_FOUND, str(exc)),
    NoCloseStarted: lambda exc: (404, ErrorCode.CLOSE_NOT_FOUND, str(exc)),
    GateNotFound: lambda exc: (404, ErrorCode.GATE_NOT_FOUND, str(exc)),
    DecisionRefused: _refused,
    DecisionConflict: lambda exc: (409, RefusalCode.CONFLICT, str(exc)),
}
SERVICE_ERRORS = tuple(HTTP_ERRORS)  # `except SERVICE_ERRORS as exc: return error_response(exc)`


def error(status: int, code: ErrorCode | RefusalCode, message: str, **extra: Any) -> JSONResponse:
    """A door's own refusal (a body it cannot parse, a signature it rejects) in the same shape."""
    return JSONResponse({"error": code, "detail": message, **extra}, status_code=status)


def error_response(exc: Exception) -> JSONResponse:
    for kind, answer in HTTP_ERRORS.items():
        if isinstance(exc, kind):
            return error(*answer(exc))
    raise exc
