"""What PostgreSQL can store as text: the check every door runs on an identity or a reason before it is written."""

from __future__ import annotations


def storable_text(value: str) -> bool:
    """Text PostgreSQL can store and UTF-8 can encode: no NUL, no lone surrogate."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
