"""Fixtures for the board's browser tests (machinery in browser_support.py).

`board_server`: a real `countersign serve` on this test's database, at http://localhost:PORT. `browser`: the
session's headless chromium, held by this (sync) test. `board_page`: a fresh browser context and page whose
relative URLs go to `board_server`. `screenshot(page, name)`: a PNG in tmp_path, or in docs/screenshots/ when
COUNTERSIGN_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, ViewportSize

from countersign.database import Database
from tests.board.browser_support import BoardServer, ChromiumSession, run_board_server, save_screenshot

VIEWPORT: ViewportSize = {"width": 1280, "height": 800}


@pytest.fixture
def board_server(database: Database, tmp_path: Path) -> Iterator[BoardServer]:
    """`countersign serve` against this test's fresh database, stopped when the test ends."""
    with run_board_server(database, tmp_path / "board-server") as server:
        yield server


@pytest.fixture(scope="session")
def chromium_session() -> Iterator[ChromiumSession]:
    """One Playwright driver and chromium for the session; tests reach it through `browser`."""
    session = ChromiumSession.start()
    yield session
    session.stop()


@pytest.fixture
def browser(chromium_session: ChromiumSession) -> Iterator[Browser]:
    """The session's chromium, held for this sync test only (so asyncio tests after it still run)."""
    with chromium_session.holding() as held:
        yield held


@pytest.fixture
def board_page(board_server: BoardServer, browser: Browser) -> Iterator[Page]:
    """A page in a fresh context (no cookies, no authenticators) whose relative URLs go to `board_server`."""
    context = browser.new_context(base_url=board_server.base_url, viewport=VIEWPORT, locale="en-GB")
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def screenshot(tmp_path: Path) -> Callable[[Page, str], Path]:
    """`screenshot(page, name)`: saves the whole page and returns the PNG's path."""

    def take(page: Page, name: str) -> Path:
        return save_screenshot(page, name, tmp_path / "screenshots")

    return take
