"""Strict YAML reading shared by the policy and workflow loaders."""

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node

from countersign.policy.errors import PolicyError

DOCUMENT = "<document>"
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of silently keeping the last one.

    Scalars PyYAML resolves but cannot build (`2026-02-30`, an integer of over 4300 digits) become a
    ConstructorError at the value's line instead of a bare ValueError.
    """

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError) as error:
            tag = node.tag.rsplit(":", 1)[-1]
            raise ConstructorError(None, None, f"unreadable {tag} value ({error})", node.start_mark) from error

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"mapping keys must be scalars, found a {type(key).__name__}",
                    key_node.start_mark,
                ) from None
            if duplicate:
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _describe_yaml_error(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is not None:
        return f"malformed YAML: {problem} (line {mark.line + 1}, column {mark.column + 1})"
    return f"malformed YAML: {problem}"


def parse_yaml_bytes(raw: bytes, source: str) -> object:
    try:
        return yaml.load(raw, Loader=_StrictLoader)  # _StrictLoader subclasses SafeLoader
    except yaml.YAMLError as error:
        raise PolicyError(source, DOCUMENT, _describe_yaml_error(error)) from error
    except UnicodeDecodeError as error:
        raise PolicyError(source, DOCUMENT, f"not valid UTF-8 text (byte offset {error.start})") from error
    except RecursionError:
        raise PolicyError(source, DOCUMENT, "malformed YAML: nested too deeply") from None
    except (ValueError, TypeError) as error:
        # PyYAML's scalar constructors raise these for e.g. `2026-02-30` or an integer of over 4300 digits.
        raise PolicyError(source, DOCUMENT, f"malformed YAML: unreadable value ({error})") from error


def read_yaml_file(path: Path) -> tuple[object, str]:
    """Return the parsed document and the sha256 hex digest of the file's bytes."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise PolicyError(source, DOCUMENT, f"cannot read file: {error.strerror or error}") from error
    return parse_yaml_bytes(raw, source), hashlib.sha256(raw).hexdigest()


def refuse_lone_surrogates(data: object, source: str) -> None:
    """Raise a PolicyError naming the first field whose text holds a lone surrogate (not encodable as UTF-8).

    YAML's `"\\ud800"` escape produces one; such text cannot be hashed as UTF-8 nor stored in PostgreSQL.
    """
    pending: list[tuple[str, object]] = [(DOCUMENT, data)]
    visited: set[int] = set()
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                raise PolicyError(source, path, "text contains a lone surrogate (not valid Unicode)")
        elif isinstance(value, (dict, list)) and id(value) not in visited:
            visited.add(id(value))
            children = value.items() if isinstance(value, dict) else enumerate(value)
            for key, child in reversed(list(children)):
                child_path = _child_path(path, key, isinstance(value, list))
                if isinstance(key, str) and _LONE_SURROGATE.search(key):
                    raise PolicyError(source, path, "a key contains a lone surrogate (not valid Unicode)")
                pending.append((child_path, child))


def _child_path(path: str, key: object, indexed: bool) -> str:
    if indexed:
        return f"{path}[{key}]"
    return str(key) if path == DOCUMENT else f"{path}.{key}"


def canonical_digest(data: object, source: str) -> str:
    """sha256 hex of canonical JSON (sorted keys, no whitespace) of already-validated plain data."""
    refuse_lone_surrogates(data, source)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
