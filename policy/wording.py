"""Internal codes as the words a controller reads: escalation reasons, statuses and kinds. Pure.

Every door shows people `in_words(code)`, never the code itself (cards, the board, the CLI's human output; the JSON
outputs keep the codes, which are their contract).
"""

from __future__ import annotations

WORDS: dict[str, str] = {
    "no_recorded_response": "the model was asked something nobody recorded an answer for",
}


def in_words(code: str) -> str:
    """The words for `code`; an unknown code is shown with its underscores as spaces."""
    return WORDS.get(code, code.replace("_", " "))
