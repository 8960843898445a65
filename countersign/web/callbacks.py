"""`POST /callbacks/gates/{gate_id}/decisions`: the signed decision callback.

Thin: verify the door's HMAC over the raw body, parse, call `decide_gate` (countersign/services/decide.py, the decision
use
case every door shares; `record_decision` checks the person's own Ed25519 signature,
`countersign/callbacks/person_signature.py`),
answer errors through the door's one table (countersign/web/errors.py), then ask for delivery of the card updates
committed
with the decision.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from countersign.http_edge.storable import storable_text
from countersign.services.decide import (
    DECISIONS,
    MAX_SIGNED_AT,
    NO_PERSON_KEY,
    PERSON_SIGNATURE_REJECTED,
    PERSON_WINDOW_S,
    Amendment,
    AmendmentInvalid,
    Channel,
    Connect,
    DecisionConflict,
    DecisionRefused,
    GateNotFound,
    OnRecorded,
    PlatformIdentity,
    Seal,
    SignatureRejected,
    decide_gate,
    ed25519_proof,
    parse_amendment,
    verify_transport_signature,
)
from countersign.states import ErrorCode
from countersign.web.errors import ErrorBody, error, error_response

MAX_BODY_BYTES = 8 * 1024
MAX_TEXT_CHARS = 1000
MAX_SIGNATURE_CHARS = 128  # base64 of a 64-byte Ed25519 signature is 88 characters
TEXT_FIELDS = ("principal", "decision", "reason", "nonce")
BODY_FIELDS = (*TEXT_FIELDS, "signed_at", "signature", "amendment")  # `amendment` is optional

Deliver = Callable[[list[int]], Awaitable[None]]  # deliver these outbox messages now


class BodyInvalid(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def parse_body(raw: bytes) -> dict[str, Any]:
    """The six fields of a decision body: four non-empty texts, `signed_at` (int) and `signature` (text)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError, bad UTF-8, absurdly long integers, deep nesting
        raise BodyInvalid("body", "is not valid JSON") from None
    if not isinstance(data, dict):
        raise BodyInvalid("body", "must be a JSON object")
    unknown = sorted(set(data) - set(BODY_FIELDS))
    if unknown:
        raise BodyInvalid(unknown[0], "is not a known field")
    if "amendment" in data:
        try:
            out_amendment: Amendment | None = parse_amendment(data["amendment"])
        except AmendmentInvalid as exc:
            raise BodyInvalid(exc.field, exc.reason) from None
    else:
        out_amendment = None
    out: dict[str, Any] = {}
    for field in TEXT_FIELDS:
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
    signed_at = data.get("signed_at")
    if isinstance(signed_at, bool) or not isinstance(signed_at, int):
        raise BodyInvalid("signed_at", "is required and must be an integer (unix seconds)")
    if not 0 <= signed_at <= MAX_SIGNED_AT:
        raise BodyInvalid("signed_at", "is not plausible unix seconds")
    signature = data.get("signature")
    if not isinstance(signature, str) or not signature:
        raise BodyInvalid("signature", "is required: base64 Ed25519 signature by the principal's own key")
    if len(signature) > MAX_SIGNATURE_CHARS:
        raise BodyInvalid("signature", f"is longer than {MAX_SIGNATURE_CHARS} characters")
    if not signature.isascii():
        raise BodyInvalid("signature", "must be base64 text")
    out["signed_at"] = signed_at
    out["signature"] = signature
    out["amendment"] = out_amendment
    return out


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
    401: {
        "model": ErrorBody,
        "description": "forged or stale transport signature (`signature_rejected`), or the person's own Ed25519"
        " signature does not verify against their registered key or is outside the window"
        " (`person_signature_rejected`)",
    },
    403: {
        "model": ErrorBody,
        "description": "the responder may not decide this gate (reason in `error`; `no_person_key` when the"
        " principal has no registered public key)",
    },
    404: {"model": ErrorBody, "description": "unknown gate"},
    409: {"model": ErrorBody, "description": "decided the other way, or nonce reused for another request"},
    413: {"model": ErrorBody, "description": "body over 8 KiB"},
    422: {"model": ErrorBody, "description": "malformed body; `field` names what was wrong"},
}


DECIDE_DESCRIPTION = f"""Two signatures, two questions.

* **Which system sent it** (the door): headers `X-Countersign-Timestamp` (unix seconds) and
  `X-Countersign-Signature: v1=<hex HMAC-SHA256(COUNTERSIGN_CALLBACK_SECRET, "v1:{{timestamp}}:{{raw body}}")>`.
  Checked first; a forged or stale one is 401 `signature_rejected`.
* **Which person decided**: `signature` is the standard base64 Ed25519 signature, by the principal's own key
  (registered with `countersign principals import`, field `public_key`), over the canonical JSON (keys sorted,
  no whitespace, UTF-8) of `{{"purpose": "countersign.decision.v2", "gate_id", "principal", "decision", "reason",
  "nonce", "signed_at", "summary_digest"}}`, where `gate_id` is the lowercase UUID, `principal` the normalised id
  (case-folded, no whitespace), `signed_at` the integer unix seconds (within {PERSON_WINDOW_S} s of now) and
  `summary_digest` the gate's own, as `GET /closes/{{close_id}}` gives it (the SHA-256 of what the gate shows: a
  person signs what they were shown). No key registered: 403
  `{NO_PERSON_KEY}`; a signature that does not verify: 401 `{PERSON_SIGNATURE_REJECTED}`.
* **Approve with edits** (a quantity surveyor on a certificate's payment gate): `amendment` carries the sum certified
  instead of the proposed one and each line's adjustment; the signed message then also holds `amendment_digest`
  (`countersign.certificates.amendment.Amendment.digest`). An amendment that does not fit the gate is 422
  `amendment_invalid`.

The decision is recorded once per nonce: the same body again returns the original outcome; the same nonce with any
other field or signature is 409.
"""

DECIDE_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": [name for name in BODY_FIELDS if name != "amendment"],
                    "properties": {
                        "principal": {"type": "string", "maxLength": MAX_TEXT_CHARS},
                        "decision": {"type": "string", "enum": list(DECISIONS)},
                        "reason": {"type": "string", "maxLength": MAX_TEXT_CHARS},
                        "nonce": {"type": "string", "maxLength": MAX_TEXT_CHARS},
                        "signed_at": {"type": "integer", "description": "unix seconds when the person signed"},
                        "signature": {
                            "type": "string",
                            "maxLength": MAX_SIGNATURE_CHARS,
                            "description": "base64 Ed25519 signature by the principal's own key",
                        },
                        "amendment": {
                            "type": "object",
                            "description": "approve with edits (a quantity surveyor, on a certificate's payment gate):"
                            " the sum certified instead of the proposed one, amounts as decimal text, each line's"
                            " adjustment with its reason; the signed message then carries `amendment_digest`",
                            "additionalProperties": False,
                            "required": ["currency", "proposed", "certified", "lines"],
                            "properties": {
                                "currency": {"type": "string", "minLength": 3, "maxLength": 3},
                                "proposed": {"type": "string"},
                                "certified": {"type": "string"},
                                "lines": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "required": ["line", "proposed", "certified", "reason"],
                                        "properties": {
                                            "line": {"type": "string"},
                                            "proposed": {"type": "string"},
                                            "certified": {"type": "string"},
                                            "reason": {"type": "string"},
                                        },
                                    },
                                },
                            },
                        },
                    },
                }
            }
        },
    }
}


async def _after_release() -> None:
    """The seal `decide_gate` asks for, deferred: the door seals once it has given its connection back, so a request
    waiting for the group sealer's run holds no pool connection."""


def build_callback_router(
    secret: str,
    connect: Connect,
    *,
    seal: Seal | None = None,
    on_recorded: OnRecorded | None = None,
    deliver: Deliver | None = None,
) -> APIRouter:
    """`seal`, when given, seals trace events for many requests at once (`countersign.audit.sealer.GroupSealer.seal`);
    `on_recorded` enqueues card updates in the decision's transaction, and `deliver` sends them after it commits
    (without it, the worker's next pass does)."""
    router = APIRouter()

    @router.post(
        "/callbacks/gates/{gate_id}/decisions",
        response_model=GateStateBody,
        responses=ERROR_RESPONSES,
        summary="Record a signed decision on a gate",
        description=DECIDE_DESCRIPTION,
        openapi_extra=DECIDE_OPENAPI,
    )
    async def decide(gate_id: str, request: Request) -> JSONResponse:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return error(413, ErrorCode.BODY_TOO_LARGE, f"body exceeds {MAX_BODY_BYTES} bytes")
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return error(413, ErrorCode.BODY_TOO_LARGE, f"body exceeds {MAX_BODY_BYTES} bytes")
        try:
            verify_transport_signature(
                secret,
                request.headers.get("x-countersign-timestamp"),
                request.headers.get("x-countersign-signature"),
                raw,
            )
        except SignatureRejected as exc:
            return error(401, ErrorCode.SIGNATURE_REJECTED, exc.reason)
        try:
            gate_uuid = str(uuid.UUID(gate_id))
        except ValueError:
            return error(404, ErrorCode.GATE_NOT_FOUND, f"no gate with id {gate_id!r}")
        try:
            body = parse_body(raw)
        except BodyInvalid as exc:
            return error(422, ErrorCode.INVALID_BODY, str(exc), field=exc.field)
        identity = PlatformIdentity(
            channel=Channel.SIGNED_CALLBACK,
            external_id=body["principal"],
            proof=ed25519_proof(body["signature"], body["signed_at"]),
        )
        try:
            async with connect() as conn:
                try:
                    decided = await decide_gate(
                        conn,
                        identity,
                        gate_id=gate_uuid,
                        decision=body["decision"],
                        reason=body["reason"],
                        nonce=body["nonce"],
                        amendment=body["amendment"],
                        on_recorded=on_recorded,
                        seal=None if seal is None else _after_release,
                    )
                except (GateNotFound, DecisionRefused, DecisionConflict) as exc:
                    return error_response(exc)
        finally:  # the connection is back in the pool; the decision (or refusal) is chained before the answer
            if seal is not None:
                await seal()
        if decided.message_ids and deliver is not None:
            await deliver(list(decided.message_ids))
        return JSONResponse(decided.outcome.as_dict(), status_code=200)

    return router
