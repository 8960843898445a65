"""Canonical bytes for trace events.

The trace hashes canonical JSON: keys sorted, no insignificant whitespace, UTF-8. For the values we allow
(strings, integers, booleans, null, lists, objects — never floats: money travels as strings) this is the
same byte string RFC 8785 produces, and orjson makes it fast.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

MAX_SAFE_INTEGER = 2**53 - 1


class NonCanonicalValue(TypeError):
    def __init__(self, path: str, value: object) -> None:
        super().__init__(f"trace payload {path}: {type(value).__name__} is not allowed in canonical JSON")
        self.path = path
        self.value = value


def normalise(value: Any, path: str = "$") -> Any:
    """Return `value` with Decimals as strings; refuse floats and other types that have no canonical form."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise NonCanonicalValue(path, value)
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NonCanonicalValue(f"{path}.{key!r}", key)
            out[key] = normalise(item, f"{path}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [normalise(item, f"{path}[{index}]") for index, item in enumerate(value)]
    raise NonCanonicalValue(path, value)


def canonical_bytes(value: Any) -> bytes:
    return orjson.dumps(normalise(value), option=orjson.OPT_SORT_KEYS)
