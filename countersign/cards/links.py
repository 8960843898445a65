"""Where a gate lives on the Close Board: the one place its page address is written. Pure.

The board serves each gate at `{board_url}/board/gates/{gate_id}`; the chat cards link there ("Open in Close Board",
"Review and sign"). The caller passes the board's public base URL (COUNTERSIGN_BOARD_URL): cards read no settings.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from countersign.cards.model import CardDataError

GATE_PAGE_PATH = "/board/gates/{gate_id}"


def gate_page_url(board_url: str, gate_id: str) -> str:
    """The gate's page; CardDataError when `board_url` is not an absolute http(s) address or the gate id is empty."""
    parts = urlsplit(board_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise CardDataError("board_url", f"expected an absolute http(s) base URL, got {board_url!r}", "gate link")
    if not gate_id:
        raise CardDataError("gate_id", "must not be empty", "gate link")
    return board_url.rstrip("/") + GATE_PAGE_PATH.format(gate_id=quote(gate_id, safe=""))
