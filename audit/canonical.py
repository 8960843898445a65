"""Canonical bytes for trace events.

The trace hashes canonical JSON: members sorted by the UTF-16 code units of their names, no insignificant
whitespace, UTF-8. For the values we allow (strings, integers, booleans, null, lists, objects — never floats: money
travels as strings) this is the byte string RFC 8785 produces; orjson serialises it fast, keeping our order.
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
    if isinstance(value, str):
        return _text(value, path)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise NonCanonicalValue(path, value)
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise NonCanonicalValue(f"{path}.{key!r}", key)
            _text(key, f"{path}.{key!r}")
        # RFC 8785 orders members by their names' UTF-16 code units (not code points: they differ above U+FFFF).
        return {
            key: normalise(value[key], f"{path}.{key}") for key in sorted(value, key=lambda k: k.encode("utf-16-be"))
        }
    if isinstance(value, list | tuple):
        return [normalise(item, f"{path}[{index}]") for index, item in enumerate(value)]
    raise NonCanonicalValue(path, value)


def _text(value: str, path: str) -> str:
    """Strings must be Unicode scalar values: a lone surrogate has no UTF-8 (or UTF-16) form."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise NonCanonicalValue(path, value) from None
    return value


def canonical_bytes(value: Any) -> bytes:
    return orjson.dumps(normalise(value))
