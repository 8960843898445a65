"""Who is looking at the board: a signed-in principal, found from the session cookie.

`require_viewer` is the FastAPI dependency every page takes. Sessions begin only with a passkey sign-in
(countersign/board/passkeys.py); the cookie is `__Host-`-style (Secure, HttpOnly, SameSite=Strict, Path=/) and names a
session
row whose SHA-256 the database stores, never the token itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from countersign.services.reading import Caller

SESSION_COOKIE = "countersign_session"
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class Viewer:
    """A signed-in person: who they are (as every read checks them) and their session's CSRF token."""

    caller: Caller
    csrf_token: str

    @property
    def principal_id(self) -> str:
        return self.caller.principal_id


class NotSignedIn(Exception):
    """No session, or an expired or revoked one: a browser is sent to the sign-in page."""


async def require_viewer(request: Request) -> Viewer:
    """The signed-in viewer; raises NotSignedIn. Replaced when the board is built (countersign/board/app.py wires the
    real one)."""
    viewer = getattr(request.state, "viewer", None)
    if not isinstance(viewer, Viewer):
        raise NotSignedIn
    return viewer
