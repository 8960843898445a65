"""What a specialist of this workflow may never return: an amount, a verdict or a gate.

Extraction structures prose and adjudication explains; every figure and verdict is the engine's arithmetic. A result
carrying a key that reads as one (at any depth, outside the agent loop's own `model_steps`) is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

AMOUNT_WORDS = frozenset(
    {
        "amount",
        "amounts",
        "total",
        "totals",
        "value",
        "due",
        "net",
        "gross",
        "retention",
        "advance",
        "previously",
        "certified",
        "price",
        "rate",
        "sum",
        "balance",
        "paid",
        "pay",
        "payment",
        "money",
    }
)
VERDICT_WORDS = frozenset(
    {
        "verdict",
        "verdicts",
        "violation",
        "violations",
        "violated",
        "gate",
        "tier",
        "approve",
        "approved",
        "approval",
        "decision",
        "pass",
        "passed",
        "fail",
        "failed",
        "certify",
        "reject",
        "rejected",
    }
)
UNCHECKED = frozenset({"model_steps"})


def _keys(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in UNCHECKED:
                continue
            where = f"{path}.{key}" if path else str(key)
            yield str(key), where
            yield from _keys(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _keys(item, f"{path}[{index}]")


def forbidden_keys(result: Mapping[str, Any], words: frozenset[str]) -> list[str]:
    """Paths of every key in `result` with one of `words` among its snake_case words."""
    return [where for key, where in _keys(result, "") if words & set(key.lower().replace("-", "_").split("_"))]
