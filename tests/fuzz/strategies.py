"""Hypothesis strategies shared by the fuzz tests: random garbage and near-valid documents.

Near-valid documents start from a shipped config file and change exactly one thing (replace a value, drop a key,
add an unknown key), so the fuzzer spends its time next to the accepting path where parsers have branches.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Deterministic and fast: a fixed seed per test (derandomize), no example database, no deadline (the database is real).
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Text that finds encoding and database bugs: NUL, lone surrogates, invisible and full-width characters, newlines.
NASTY_CHARS = st.sampled_from(["\x00", "\ud800", "\u200b", "\ufeff", "ｏ", "\n", "\r", ",", '"', "'", ";", ":", " "])
TEXT = st.one_of(
    st.text(max_size=30),
    st.lists(st.one_of(NASTY_CHARS, st.characters()), max_size=12).map("".join),
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(),
    st.decimals(allow_nan=True, allow_infinity=True).map(str),
    TEXT,
    st.dates(),
)

# What a YAML or JSON parser can hand a validator: nested lists and string-keyed mappings of scalars.
PLAIN_DATA = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(TEXT, st.integers(), st.booleans()), children, max_size=4),
    ),
    max_leaves=12,
)

JSON_DATA = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), TEXT),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(TEXT, children, max_size=4)),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside nested dicts and lists (the root excluded)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*prefix, key))
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.append((*prefix, index))
            out.extend(_paths(value, (*prefix, index)))
    return out


def _containers(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = [prefix] if isinstance(node, (dict, list)) else []
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_containers(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.extend(_containers(value, (*prefix, index)))
    return out


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        node = node[step]
    return node


@st.composite
def mutated(draw: st.DrawFn, document: Any, values: st.SearchStrategy[Any] = PLAIN_DATA) -> Any:
    """`document` with exactly one change: a value replaced, a key or item removed, or an unknown key added."""
    doc = copy.deepcopy(document)
    action = draw(st.sampled_from(["replace", "replace", "replace", "remove", "add", "duplicate"]))
    if action in ("replace", "remove"):
        paths = _paths(doc)
        if not paths:
            return draw(values)
        path = draw(st.sampled_from(paths))
        parent = _at(doc, path[:-1])
        if action == "remove":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(values)
        return doc
    container_path = draw(st.sampled_from(_containers(doc)))
    container = _at(doc, container_path)
    if isinstance(container, list):
        item = copy.deepcopy(draw(st.sampled_from(container))) if container and action == "duplicate" else None
        container.append(item if item is not None else draw(values))
    elif action == "duplicate" and container:
        key = draw(st.sampled_from(sorted(container, key=str)))
        container[key] = copy.deepcopy(container[key])
    else:
        container[draw(st.one_of(TEXT, st.integers()))] = draw(values)
    return doc
