"""The board's router: its pages (countersign/board/pages.py) and its passkey ceremonies
(countersign/board/passkeys.py), under /board.

Mounted by the composition root. Every request first has its session cookie read (`load_viewer`), so a page only
asks for `Depends(require_viewer)`; a request without a live session is sent to the sign-in page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request

from countersign.board.deps import PREFIX, BoardDeps
from countersign.board.pages import build_page_router, build_root_router
from countersign.board.passkeys import EXCEPTION_HANDLERS, build_passkey_router
from countersign.board.session import SESSION_COOKIE, Viewer
from countersign.services.passkeys import viewer_for

__all__ = ["PREFIX", "BoardDeps", "build_board_router", "install_board"]

# Every board page: no script or style but the board's own files, no framing, no referrer, no sniffing. The SVG
# pictures set their own, narrower CSP (countersign/board/pages.py).
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self';"
        " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BoardSecurityHeaders:
    """ASGI middleware: adds SECURITY_HEADERS to every response under PREFIX that does not set its own CSP."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(PREFIX):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.decode("latin-1").lower() for name, _ in headers}
                for name, value in SECURITY_HEADERS.items():
                    if name not in present:
                        headers.append((name.encode("latin-1"), value.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def build_board_router(deps: BoardDeps) -> APIRouter:
    """Every board route under PREFIX, each request with its viewer read from the session cookie first."""

    async def load_viewer(request: Request) -> None:
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            return
        async with deps.connect_callbacks() as conn:
            found = await viewer_for(conn, token)
        if found is not None:
            request.state.viewer = Viewer(caller=found[0], csrf_token=found[1])

    # A browser's pages, not an API: left out of the OpenAPI document (the JSON ceremony endpoints serve board.js).
    router = APIRouter(prefix=PREFIX, dependencies=[Depends(load_viewer)], include_in_schema=False)
    router.include_router(build_passkey_router(deps))  # first: its /static/board.js before the pages' /static/{name}
    router.include_router(build_page_router(deps))
    return router


def install_board(app: FastAPI, deps: BoardDeps) -> None:
    """Mount the board on the app: its routes, `/` redirecting to it, its security headers and its answers to a
    request without a session or without its CSRF token."""

    app.include_router(build_board_router(deps))
    app.include_router(build_root_router())
    app.add_middleware(BoardSecurityHeaders)
    for error, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(error, handler)
