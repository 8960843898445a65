"""The composition root stays small enough to read: no module of `countersign/bootstrap/` over 400 lines (issue 34)."""

from __future__ import annotations

from pathlib import Path

from countersign import bootstrap

ROOT = Path(bootstrap.__file__).parent
LIMIT_LINES = 400


def oversized(folder: Path, limit: int = LIMIT_LINES) -> dict[str, int]:
    sizes = {path.name: path.read_text(encoding="utf-8").count("\n") for path in sorted(folder.glob("*.py"))}
    return {name: lines for name, lines in sizes.items() if lines > limit}


def test_no_root_module_is_over_the_limit() -> None:
    assert len(list(ROOT.glob("*.py"))) > 5  # the scan reads the root, not an empty folder
    assert oversized(ROOT) == {}


def test_an_oversized_module_is_named(tmp_path: Path) -> None:
    # Negative control: settings.py as it was (569 lines) is caught.
    (tmp_path / "settings.py").write_text("x = 1\n" * 569, encoding="utf-8")
    (tmp_path / "small.py").write_text("x = 1\n", encoding="utf-8")
    assert oversized(tmp_path) == {"settings.py": 569}
