"""`GET /closes/{close_id}`: a close's status for an authenticated reader.

Thin: read the credentials from the headers, call `countersign.services.reading` (the same read every door calls), and
answer
service errors through the door's one table (countersign/web/errors.py).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from countersign.policy.model import Policy
from countersign.services.decide import Connect
from countersign.services.errors import Unauthenticated
from countersign.services.reading import ReadCredentials, authenticate_http_reader, read_close_status
from countersign.web.errors import SERVICE_ERRORS, ErrorBody, error_response

READ_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "no credentials, or a revoked, unknown or stale one"},
    403: {"model": ErrorBody, "description": "the caller may not read closes"},
    404: {"model": ErrorBody, "description": "unknown close"},
}


def read_credentials(request: Request) -> ReadCredentials:
    """A bearer token, or a person's signature over the request; `Unauthenticated` for another Authorization."""
    authorization = request.headers.get("authorization")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Authorization must be `Bearer cs_...`")
        return ReadCredentials(token=token.strip())
    return ReadCredentials(
        principal=request.headers.get("x-countersign-principal"),
        signed_at=request.headers.get("x-countersign-signed-at"),
        signature=request.headers.get("x-countersign-person-signature"),
    )


def build_read_router(connect_callbacks: Connect, connect_engine: Connect, policy: Policy) -> APIRouter:
    """Readers are authenticated as the callbacks role (tokens, keys) and read as the engine role."""
    router = APIRouter()

    @router.get("/closes/{close_id}", responses=READ_RESPONSES)
    async def get_close(close_id: str, request: Request) -> JSONResponse:
        """Needs `Authorization: Bearer cs_...` (a principal's API token) or a principal's signed request."""
        try:
            credentials = read_credentials(request)
            async with connect_callbacks() as conn:
                caller = await authenticate_http_reader(conn, credentials, method="GET", path=request.url.path)
            async with connect_engine() as conn:
                return JSONResponse(await read_close_status(conn, policy, caller, close_id))
        except SERVICE_ERRORS as exc:
            return error_response(exc)

    return router
