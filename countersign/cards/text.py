"""Cutting text to a platform limit, counted in UTF-16 code units (never fewer than Python's characters), and
Slack data escaped and cut in one step (the escaping itself lives in countersign/cards/escape.py)."""

from __future__ import annotations

from countersign.cards.escape import slack_data, slack_mrkdwn_object

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


def one_line(text: str) -> str:
    """Any run of whitespace (newlines included) as one space: data cannot pose as a line of the card's own."""
    return " ".join(text.split())


def slack_escape(text: str) -> str:
    """Data for Slack mrkdwn (countersign/cards/escape.py): &, < and > as entities and the formatting characters as
    look-alikes,
    so it can forge no mention, link or formatting."""
    return slack_data(text)


def slack_fit(raw: str, limit: int) -> str:
    """Data on one line, escaped, within `limit` units once escaped; never cuts an entity in half."""
    escaped = slack_escape(one_line(raw))
    if units(escaped) <= limit:
        return escaped
    kept: list[str] = []
    used = units(ELLIPSIS)
    for char in one_line(raw):
        piece = slack_escape(char)
        if used + units(piece) > limit:
            break
        kept.append(piece)
        used += units(piece)
    return "".join(kept) + ELLIPSIS


def slack_mrkdwn(text: str, limit: int) -> dict[str, object]:
    """Our own mrkdwn around already-escaped data, verbatim (no auto-linking); `fit` is the backstop."""
    return slack_mrkdwn_object(fit(text, limit))
