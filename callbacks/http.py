"""`POST /callbacks/gates/{gate_id}/decisions`: the signed decision callback.

Thin: verify the signature over the raw body, parse, call `record_decision`, map errors to status codes here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from psycopg import AsyncConnection
from pydantic import BaseModel

from .decisions import (
    DECISIONS,
    DecisionConflict,
    DecisionRefused,
    DecisionRequest,
    GateNotFound,
    Seal,
    record_decision,
)
from .signature import SignatureRejected, verify

MAX_BODY_BYTES = 8 * 1024
MAX_TEXT_CHARS = 1000

Connect = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "detail": message, **extra}, status_code=status)


class BodyInvalid(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def storable_text(value: str) -> bool:
    """Text PostgreSQL can store and UTF-8 can encode: no NUL, no lone surrogate."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_body(raw: bytes) -> dict[str, str]:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError, bad UTF-8, absurdly long integers, deep nesting
        raise BodyInvalid("body", "is not valid JSON") from None
    if not isinstance(data, dict):
        raise BodyInvalid("body", "must be a JSON object")
    unknown = sorted(set(data) - {"principal", "decision", "reason", "nonce"})
    if unknown:
        raise BodyInvalid(unknown[0], "is not a known field")
    out: dict[str, str] = {}
    for field in ("principal", "decision", "reason", "nonce"):
        value = data.get(field)
        if not isinstance(value, str) or not value.strip():
            raise BodyInvalid(field, "is required and must be a non-empty string")
        if len(value) > MAX_TEXT_CHARS:
            raise BodyInvalid(field, f"is longer than {MAX_TEXT_CHARS} characters")
        if not storable_text(value):
            raise BodyInvalid(field, "contains a NUL character or an unpaired surrogate")
        out[field] = value
    if out["decision"] not in DECISIONS:
        raise BodyInvalid("decision", f"must be one of {list(DECISIONS)}")
    return out


class ErrorBody(BaseModel):
    error: str
    detail: str
    field: str | None = None


class DecisionLine(BaseModel):
    principal: str
    decision: str
    reason: str
    decided_at: str
    channel: str


class GateStateBody(BaseModel):
    gate_id: str
    status: str
    quorum: int
    approvals: int
    rejections: int
    recorded: bool
    decisions: list[DecisionLine]


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "forged or stale signature"},
    403: {"model": ErrorBody, "description": "the responder may not decide this gate (reason in `error`)"},
    404: {"model": ErrorBody, "description": "unknown gate"},
    409: {"model": ErrorBody, "description": "decided the other way, or nonce reused for another request"},
    413: {"model": ErrorBody, "description": "body over 8 KiB"},
    422: {"model": ErrorBody, "description": "malformed body; `field` names what was wrong"},
}


def build_callback_router(secret: str, connect: Connect, *, seal: Seal | None = None) -> APIRouter:
    """`seal`, when given, seals trace events for many requests at once (`audit.sealer.GroupSealer.seal`)."""
    router = APIRouter()

    @router.post(
        "/callbacks/gates/{gate_id}/decisions",
        response_model=GateStateBody,
        responses=ERROR_RESPONSES,
        summary="Record a signed decision on a gate",
    )
    async def decide(gate_id: str, request: Request) -> JSONResponse:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return _error(413, "body_too_large", f"body exceeds {MAX_BODY_BYTES} bytes")
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return _error(413, "body_too_large", f"body exceeds {MAX_BODY_BYTES} bytes")
        try:
            verify(
                secret,
                request.headers.get("x-countersign-timestamp"),
                request.headers.get("x-countersign-signature"),
                raw,
            )
        except SignatureRejected as exc:
            return _error(401, "signature_rejected", exc.reason)
        try:
            gate_uuid = str(uuid.UUID(gate_id))
        except ValueError:
            return _error(404, "gate_not_found", f"no gate with id {gate_id!r}")
        try:
            body = parse_body(raw)
        except BodyInvalid as exc:
            return _error(422, "invalid_body", str(exc), field=exc.field)
        decision = DecisionRequest(
            gate_id=gate_uuid,
            principal=body["principal"],
            decision=body["decision"],
            reason=body["reason"],
            nonce=body["nonce"],
            channel="signed_callback",
        )
        async with connect() as conn:
            try:
                outcome = await record_decision(conn, decision, seal=seal)
            except GateNotFound as exc:
                return _error(404, "gate_not_found", str(exc))
            except DecisionRefused as exc:
                return _error(403, exc.code, str(exc))
            except DecisionConflict as exc:
                return _error(409, "conflict", str(exc))
        return JSONResponse(outcome.as_dict(), status_code=200)

    return router
