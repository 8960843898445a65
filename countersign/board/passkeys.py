"""The board's passkey routes: enrol from an owner's link, sign in and out, list and revoke one's passkeys, and sign
a decision on a gate. Thin: parse, call countersign/services/passkeys.py, answer.

The ceremonies run in the browser (countersign/board/static/board.js calls navigator.credentials); the JSON endpoints
here give
options and take responses. Every state-changing request of a signed-in person carries the session's CSRF token
(`X-CSRF-Token` header, or the `csrf_token` form field) and, when the browser sends one, an Origin equal to the
board's; the session cookie is HttpOnly and SameSite=Strict.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from countersign.board.deps import PREFIX, BoardDeps
from countersign.board.rendering import board_environment
from countersign.board.session import CSRF_FIELD, SESSION_COOKIE, NotSignedIn, Viewer, require_viewer
from countersign.services import passkeys
from countersign.services.decide import DecisionConflict, DecisionRefused, GateNotFound
from countersign.services.passkeys import BoardOrigin, FieldRefused, PasskeyRefused

STATIC = Path(__file__).parent / "static"
SignedIn = Annotated[Viewer, Depends(require_viewer)]
CSRF_HEADER = "x-csrf-token"


def _refused(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _refusal(exc: PasskeyRefused, status: int) -> JSONResponse:
    """A ceremony refused: 400 naming the field for input no such thing could hold, else `status` and the reason."""
    if isinstance(exc, FieldRefused):
        return JSONResponse({"error": str(exc), "field": exc.field}, status_code=400)
    return _refused(str(exc), status)


def _text(body: dict[str, Any], name: str) -> str:
    """A body field that must be text when given (JSON null, a number or an object is refused, not written as its
    Python text: a null reason must not become the reason "None")."""
    value = body.get(name, "")
    if not isinstance(value, str):
        raise FieldRefused(name, f"must be text, not {type(value).__name__ if value is not None else 'null'}")
    return value


def check_csrf(request: Request, viewer: Viewer, form_token: str | None = None) -> None:
    """The session's CSRF token must come back with the request (header or form field); else NotSignedIn's cousin:
    a 403 the caller answers."""
    sent = request.headers.get(CSRF_HEADER) or form_token or ""
    if not hmac.compare_digest(sent.encode(), viewer.csrf_token.encode()):
        raise CsrfRefused


class CsrfRefused(Exception):
    """A state-changing request without this session's CSRF token, or from another origin."""


def check_origin(request: Request, board: BoardOrigin) -> None:
    origin = request.headers.get("origin")
    if origin is not None and origin != board.origin:
        raise CsrfRefused


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, RecursionError):  # bad JSON or bad UTF-8, and nesting past Python's recursion limit
        raise PasskeyRefused("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise PasskeyRefused("the request body must be a JSON object")
    return body


def build_passkey_router(deps: BoardDeps) -> APIRouter:
    router = APIRouter()
    board = BoardOrigin.from_url(deps.board_url)
    env = board_environment(deps.locale)
    secure_cookie = board.origin.startswith("https://")

    async def seal() -> None:
        if deps.seal is not None:
            await deps.seal()

    def page(template: str, viewer: Viewer | None, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(template).render(viewer=viewer, **context)
        return HTMLResponse(html, status_code=status_code)

    @router.get("/static/board.js", include_in_schema=False)
    async def script() -> Response:
        return Response((STATIC / "board.js").read_bytes(), media_type="text/javascript; charset=utf-8")

    @router.get("/sign-in", response_class=HTMLResponse)
    async def sign_in_page(request: Request) -> Response:
        viewer = getattr(request.state, "viewer", None)
        if isinstance(viewer, Viewer):
            return RedirectResponse(f"{PREFIX}/", status_code=303)
        return page("sign_in.html", None)

    @router.post("/sign-in/options")
    async def sign_in_options(request: Request) -> Response:
        check_origin(request, board)
        try:
            async with deps.connect_callbacks() as conn:
                return JSONResponse(await passkeys.sign_in_options(conn, board))
        except PasskeyRefused as exc:
            return _refused(str(exc), 503)

    @router.post("/sign-in")
    async def sign_in(request: Request) -> Response:
        check_origin(request, board)
        try:
            body = await _json(request)
            async with deps.connect_callbacks() as conn:
                session = await passkeys.complete_sign_in(conn, body.get("response"), board)
        except PasskeyRefused as exc:
            return _refusal(exc, 401)
        answer = JSONResponse(
            {"signed_in": session.principal_id, "csrf_token": session.csrf_token, "next": f"{PREFIX}/inbox"}
        )
        answer.set_cookie(
            SESSION_COOKIE,
            session.token,
            max_age=8 * 3600,
            path=PREFIX,
            secure=secure_cookie,
            httponly=True,
            samesite="strict",
        )
        return answer

    @router.post("/sign-out")
    async def sign_out(request: Request, viewer: SignedIn, csrf_token: Annotated[str, Form()] = "") -> Response:
        check_origin(request, board)
        check_csrf(request, viewer, csrf_token)
        token = request.cookies.get(SESSION_COOKIE, "")
        async with deps.connect_callbacks() as conn:
            await passkeys.sign_out(conn, token)
        answer = RedirectResponse(f"{PREFIX}/sign-in", status_code=303)
        answer.delete_cookie(SESSION_COOKIE, path=PREFIX)
        return answer

    @router.get("/enrol", response_class=HTMLResponse)
    async def enrol_page() -> Response:
        return page("enrol.html", None)  # the token stays in the link's #fragment: never sent, never logged

    @router.post("/enrol/options")
    async def enrol_options(request: Request) -> Response:
        check_origin(request, board)
        try:
            body = await _json(request)
            async with deps.connect_callbacks() as conn:
                return JSONResponse(await passkeys.enrolment_options(conn, _text(body, "token"), board))
        except PasskeyRefused as exc:
            return _refusal(exc, 403)

    @router.post("/enrol")
    async def enrol(request: Request) -> Response:
        check_origin(request, board)
        try:
            body = await _json(request)
            async with deps.connect_callbacks() as conn:
                principal = await passkeys.complete_enrolment(
                    conn, _text(body, "token"), body.get("response"), _text(body, "label"), board
                )
        except PasskeyRefused as exc:
            return _refusal(exc, 403)
        await seal()  # the enrolment's trace event, written by the database
        return JSONResponse({"enrolled": principal, "next": f"{PREFIX}/sign-in"})

    @router.get("/passkeys", response_class=HTMLResponse)
    async def passkey_list(viewer: SignedIn) -> Response:
        async with deps.connect_callbacks() as conn:
            keys = await passkeys.passkeys_of(conn, viewer.principal_id)
        return page("passkeys.html", viewer, passkeys=keys, csrf_field=CSRF_FIELD)

    @router.post("/passkeys/{credential_id}/revoke")
    async def passkey_revoke(
        credential_id: str, request: Request, viewer: SignedIn, csrf_token: Annotated[str, Form()] = ""
    ) -> Response:
        check_origin(request, board)
        check_csrf(request, viewer, csrf_token)
        try:
            async with deps.connect_callbacks() as conn:
                revoked = await passkeys.revoke_passkey(conn, viewer.principal_id, credential_id)
        except PasskeyRefused as exc:
            return _refusal(exc, 400)
        await seal()
        if not revoked:
            return page("not_found.html", viewer, status_code=404, missing="You hold no live passkey with that id")
        return RedirectResponse(f"{PREFIX}/passkeys", status_code=303)

    @router.post("/gates/{gate_id}/decision/options")
    async def decision_options(gate_id: str, request: Request, viewer: SignedIn) -> Response:
        check_origin(request, board)
        check_csrf(request, viewer)
        try:
            body = await _json(request)
            async with deps.connect_callbacks() as conn:
                to_sign = await passkeys.decision_options(
                    conn,
                    viewer.caller,
                    gate_id,
                    _text(body, "decision"),
                    _text(body, "reason"),
                    board,
                    amendment=body.get("amendment"),
                )
        except PasskeyRefused as exc:
            return _refusal(exc, 409)
        return JSONResponse({"options": to_sign.options, "message": to_sign.message})

    @router.post("/gates/{gate_id}/decision")
    async def decision(gate_id: str, request: Request, viewer: SignedIn) -> Response:
        check_origin(request, board)
        check_csrf(request, viewer)
        try:
            body = await _json(request)
            async with deps.connect_callbacks() as conn:
                recorded = await passkeys.complete_decision(
                    conn,
                    viewer.caller,
                    gate_id,
                    body.get("response"),
                    board,
                    seal=deps.seal,
                    on_recorded=deps.on_recorded,
                    amendment=body.get("amendment"),
                )
        except PasskeyRefused as exc:
            return _refusal(exc, 409)
        except DecisionRefused as exc:
            return JSONResponse({"error": str(exc), "code": exc.code}, status_code=403)
        except DecisionConflict as exc:
            return _refused(str(exc), 409)
        except GateNotFound as exc:
            return _refused(str(exc), 404)
        if recorded.message_ids and deps.deliver is not None:
            await deps.deliver(list(recorded.message_ids))  # the cards show the decision now, not at the next worker
        return JSONResponse({**recorded.outcome.as_dict(), "next": f"{PREFIX}/gates/{gate_id}"})

    return router


async def answer_not_signed_in(request: Request, _: Exception) -> Response:
    """A browser without a live session goes to the sign-in page; a script gets a 401."""
    if request.method == "GET" and "text/html" in request.headers.get("accept", "text/html"):
        return RedirectResponse(f"{PREFIX}/sign-in", status_code=303)
    return _refused("sign in to the Close Board with your passkey first", 401)


async def answer_csrf(_: Request, __: Exception) -> Response:
    return _refused("this request did not come from your Close Board session (CSRF token or origin missing)", 403)


EXCEPTION_HANDLERS = {NotSignedIn: answer_not_signed_in, CsrfRefused: answer_csrf}
