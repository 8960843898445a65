"""Strict YAML reading shared by the policy and checklist loaders."""

import hashlib
import json
from pathlib import Path

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

from policy.errors import PolicyError

DOCUMENT = "<document>"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of silently keeping the last one."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
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


def read_yaml_file(path: Path) -> tuple[object, str]:
    """Return the parsed document and the sha256 hex digest of the file's bytes."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise PolicyError(source, DOCUMENT, f"cannot read file: {error.strerror or error}") from error
    return parse_yaml_bytes(raw, source), hashlib.sha256(raw).hexdigest()


def canonical_digest(data: object) -> str:
    """sha256 hex of canonical JSON (sorted keys, no whitespace) of already-validated plain data."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
