"""Cutting text to a platform limit, counted in UTF-16 code units (never fewer than Python's characters)."""

from __future__ import annotations

ELLIPSIS = "…"


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def fit(text: str, limit: int) -> str:
    """Cut to `limit` units, ending in "…" when cut. Never splits a character."""
    if units(text) <= limit:
        return text
    kept: list[str] = []
    used = units(ELLIPSIS)
    for char in text:
        size = units(char)
        if used + size > limit:
            break
        kept.append(char)
        used += size
    return "".join(kept) + ELLIPSIS
