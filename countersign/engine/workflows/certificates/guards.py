"""What a specialist of this workflow may never return: an amount, a verdict or a gate.

Extraction structures prose and adjudication explains; every figure and verdict is the engine's arithmetic. A result
carrying a key that reads as one (at any depth, outside the agent loop's own `model_steps`) is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from countersign.engine.workflows.base import Escalate
from countersign.policy import EscalationReason

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


def check_answer(result: Mapping[str, Any], kind: str) -> None:
    """A `kind` specialist's result sets no figure or verdict (else Escalate: contradictory evidence) and answers
    as its own kind (else ValueError)."""
    forbidden = forbidden_keys(result, AMOUNT_WORDS | VERDICT_WORDS)
    if forbidden:
        raise Escalate(
            EscalationReason.CONTRADICTORY_EVIDENCE,
            f"the {kind} specialist returned figures or verdicts it may not set: {', '.join(forbidden[:5])}",
        )
    if result.get("kind") != kind:
        raise ValueError(f"the {kind} specialist answered kind {result.get('kind')!r}, not {kind!r}")
