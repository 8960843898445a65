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


class _Slow(Exception):
    """Raised inside the fast walk when a value needs the careful one (to be refused with its path, or a subclass)."""


def normalise(value: Any, path: str = "$") -> Any:
    """Return `value` with Decimals as strings; refuse floats and other types that have no canonical form.

    The common case (exact str, int, bool, None, dict and list values, keys without characters beyond U+FFFF) takes a
    fast walk that builds no paths; anything else is walked again carefully, which names the path of what it refuses.
    """
    try:
        return _fast(value)
    except _Slow:
        return _careful(value, path)


def _fast(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        if not value.isascii():
            _text(value, "")  # a lone surrogate raises: _careful names where
        return value
    if kind is dict:
        for key in value:
            if type(key) is not str or not key.isascii():
                raise _Slow  # non-ASCII keys: UTF-16 order and the surrogate check are _careful's
        return {key: _fast(value[key]) for key in sorted(value)}  # ASCII: code unit order is code point order
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise _Slow
    if value is None or kind is bool:
        return value
    if kind is list or kind is tuple:
        return [_fast(item) for item in value]
    if kind is Decimal:
        return str(value)
    raise _Slow


def _careful(value: Any, path: str = "$") -> Any:
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
            key: _careful(value[key], f"{path}.{key}") for key in sorted(value, key=lambda k: k.encode("utf-16-be"))
        }
    if isinstance(value, list | tuple):
        return [_careful(item, f"{path}[{index}]") for index, item in enumerate(value)]
    raise NonCanonicalValue(path, value)


def _text(value: str, path: str) -> str:
    """Strings must be Unicode scalar values: a lone surrogate has no UTF-8 (or UTF-16) form."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        if not path:
            raise _Slow from None
        raise NonCanonicalValue(path, value) from None
    return value


def canonical_bytes(value: Any) -> bytes:
    return orjson.dumps(normalise(value))
