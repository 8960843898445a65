"""A chat command's words, named instead of indexed (no I/O)."""

from __future__ import annotations


def first_words(words: list[str]) -> tuple[str, str, str, str]:
    """The command's first four words, "" where it has fewer (no command takes more than four)."""
    verb, first, second, third, *_ = [*words, "", "", "", ""]
    return verb, first, second, third
