"""`normalise` takes a fast walk for the common case and a careful one otherwise: both must give the same answer."""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from countersign.audit.canonical import NonCanonicalValue, _careful, canonical_bytes, normalise

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.text(max_size=8),
    st.decimals(allow_nan=False, allow_infinity=False, places=2),
    st.floats(allow_nan=False, allow_infinity=False),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _answer(fn: Any, value: Any) -> Any:
    try:
        return ("ok", fn(value))
    except NonCanonicalValue as exc:
        return ("refused", exc.path)


@settings(max_examples=600, deadline=None)
@given(VALUES)
@example({"\U0001f600": 1, "\uff61": 2, "a": [1, 2.5]})  # beyond the BMP: UTF-16 order differs from code points
@example({"ok": "\ud800"})  # a lone surrogate
@example({"deep": [{"x": 2**53}]})  # beyond 2**53
@example({"money": Decimal("1234.50"), "t": (1, "x")})
def test_the_fast_walk_answers_as_the_careful_one(value: Any) -> None:
    fast, careful = _answer(normalise, value), _answer(_careful, value)
    assert fast == careful
    if fast[0] == "ok":
        assert list(_keys(fast[1])) == list(_keys(careful[1]))  # the same member order, not only equal dicts


def _keys(value: Any) -> Any:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


class Colour(StrEnum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "path"),
    [({"a": [1, 2.0]}, "$.a[1]"), ({"b": {"c": 2**60}}, "$.b.c"), ({"s": "x\ud800"}, "$.s"), ({1: "x"}, "$.1")],
)
def test_a_refusal_names_its_path_whichever_walk_found_it(value: Any, path: str) -> None:
    with pytest.raises(NonCanonicalValue) as refused:
        normalise(value)
    assert refused.value.path == path


def test_subclasses_take_the_careful_walk_and_keep_their_meaning() -> None:
    assert canonical_bytes({"colour": Colour.RED, "n": True}) == b'{"colour":"red","n":true}'
