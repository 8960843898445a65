"""The board's router: its pages (board/pages.py) and its passkey ceremonies (board/passkeys.py), under /board.

Mounted by the composition root. Every request first has its session cookie read (`load_viewer`), so a page only
asks for `Depends(require_viewer)`; a request without a live session is sent to the sign-in page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter

from policy.model import Policy
from services.decide import Connect

PREFIX = "/board"


@dataclass(frozen=True)
class BoardDeps:
    """What the board needs from the composition root: the two pools' connectors, the policy and its settings."""

    connect_callbacks: Connect  # sessions, enrolment, decisions (the callbacks role)
    connect_engine: Connect  # reads (the engine role, as every door reads)
    policy: Policy
    board_url: str  # public base URL, e.g. https://close.example.com: the passkeys' origin and rp id
    locale: str  # CLDR locale for amounts and dates
    seal: Any = None  # the group sealer's seal, as the other doors pass it
    on_recorded: Any = None  # enqueue card updates after a decision


def build_board_router(deps: BoardDeps) -> APIRouter:
    """Every board route under PREFIX."""
    from board.pages import build_page_router

    router = APIRouter(prefix=PREFIX)
    router.include_router(build_page_router(deps))
    return router
