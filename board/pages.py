"""The board's pages (placeholder until the pages land): closes, the inbox, a close, a gate."""

from __future__ import annotations

from fastapi import APIRouter

from board.app import BoardDeps


def build_page_router(deps: BoardDeps) -> APIRouter:
    return APIRouter()
