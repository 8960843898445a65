"""Which generator a profile file is for: books (the default), the clause corpus or construction contracts."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import yaml

from countersign.synthetic.profile import ProfileError

PROFILE_KINDS: Final[tuple[str, ...]] = ("books", "clauses", "construction")


def profile_kind(path: Path) -> str:
    """The profile's `kind` key; a profile without one is a books profile. Errors name the file and the key."""
    source = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(source, "<file>", f"cannot read profile: {exc.strerror or exc}") from exc
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError, ValueError, TypeError) as exc:
        raise ProfileError(source, "<yaml>", f"invalid YAML: {type(exc).__name__}") from exc
    if not isinstance(data, dict):
        raise ProfileError(source, "<root>", f"expected a mapping, got {type(data).__name__}")
    kind = data.get("kind", "books")
    if kind not in PROFILE_KINDS:
        raise ProfileError(source, "kind", f"expected one of {', '.join(PROFILE_KINDS)}, got {kind!r}")
    return str(kind)
