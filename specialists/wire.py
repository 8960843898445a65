"""Shared conventions for specialist data carried over A2A data parts.

A2A data parts are protobuf `Value`s, which store every number as a double: an integer count sent as `17`
arrives as `17.0`. Money never travels as a number (always a "1234.50" string), so the only numbers on the
wire are counts and small integral settings, and turning integral floats back into ints is lossless for them.
"""

from typing import Any

IDEMPOTENCY_KEY_FIELD = "idempotency_key"


def restore_integers(value: Any) -> Any:
    """Return `value` with every integral float (at any depth) turned back into an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: restore_integers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [restore_integers(item) for item in value]
    return value
