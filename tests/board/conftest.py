"""Fixtures for the board's tests.

The browser tests' fixtures live with their machinery in browser_support.py: `board_server` (a real `countersign
serve` on this test's database, at http://localhost:PORT), `browser` (the session's headless chromium, held by this
sync test), `board_page` (a fresh context and page whose relative URLs go to `board_server`) and `screenshot(page,
name)` (a PNG in tmp_path, or in docs/screenshots/ when COUNTERSIGN_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

from tests.board.browser_support import (  # noqa: F401  (fixtures)
    board_page,
    board_server,
    browser,
    chromium_session,
    screenshot,
)
