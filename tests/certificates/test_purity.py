"""The certificates domain holds no I/O and no path to a model: asserted on its source, and by the import contract."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from countersign.bootstrap.settings import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "countersign" / "certificates"
LAYERS_CONTRACT = "one layer model"
IO_CONTRACT = "the pure rooms do no I/O"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# The only modules the domain may import (besides its own): pure standard-library computation. An allowlist, so a
# module that reads or writes the outside world (files, sockets, databases, processes) is refused without naming it.
PURE_MODULES = {
    "__future__", "bisect", "collections", "dataclasses", "datetime", "decimal", "enum", "functools", "hashlib",
    "itertools", "math", "operator", "re", "typing",
}  # fmt: skip
# Of our own rooms, only the currency table, which itself imports nothing but the standard library (checked below).
PURE_OURS = {"countersign.money.units"}
MODEL_REACH = {"llm", "engine", "retrieval", "httpx", "aiohttp", "openai", "bootstrap", "psycopg"}


def room(module: str) -> str:
    """A module's top-level name, or for one of ours its room: `countersign.llm.loop` is `llm`."""
    parts = module.split(".")
    return parts[1] if parts[0] == "countersign" and len(parts) > 1 else parts[0]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {room(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module if node.module in PURE_OURS else room(node.module))
    return found


def names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


MODULES = sorted(PACKAGE.glob("*.py"))


def test_the_package_has_its_modules() -> None:
    names = {path.stem for path in MODULES}
    assert {"model", "reconstruction", "invariants", "duplicates", "assessment", "pipeline"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_module_imports_beyond_pure_computation_or_calls_open(path: Path) -> None:
    outside = imported_modules(path) - {PACKAGE.name}  # its own modules, imported absolutely, are allowed
    assert outside <= PURE_MODULES | PURE_OURS, outside - PURE_MODULES - PURE_OURS
    assert "open" not in names_used(path)


def test_the_currency_table_the_domain_reads_is_pure_itself() -> None:
    for module in PURE_OURS:
        path = PROJECT_ROOT.joinpath(*module.split(".")).with_suffix(".py")
        assert imported_modules(path) <= PURE_MODULES, imported_modules(path) - PURE_MODULES


def test_the_duplicate_detector_holds_no_reference_to_a_model_or_gateway() -> None:
    path = PACKAGE / "duplicates.py"
    assert imported_modules(path) & MODEL_REACH == set()
    text = path.read_text(encoding="utf-8")
    for word in ("gateway", "models.", "complete(", "prompt"):
        assert word not in text.lower()
    # and nothing it imports from its own package reaches one either
    tree = ast.parse(text)
    siblings = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}
    for sibling in siblings:
        assert imported_modules(PACKAGE / f"{sibling}.py") & MODEL_REACH == set()


def test_the_scan_would_catch_a_model_import(tmp_path: Path) -> None:
    smuggled = tmp_path / "duplicates.py"
    smuggled.write_text("from countersign.llm.gateway import Gateway\nimport json\n", encoding="utf-8")
    assert imported_modules(smuggled) & MODEL_REACH == {"llm"}
    assert imported_modules(smuggled) - PURE_MODULES == {"llm", "json"}


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(config["tool"]["importlinter"]["contracts"])


def test_the_import_contracts_keep_models_engine_and_the_network_out_of_the_domain() -> None:
    layers = next(c for c in _contracts() if c["type"] == "layers")
    floors = [{name.strip() for name in line.split("|")} for line in layers["layers"]]  # type: ignore[attr-defined]
    floor = next(i for i, line in enumerate(floors) if "certificates" in line)
    above = set().union(*floors[:floor])
    assert {"engine", "callbacks", "bot", "bootstrap", "llm", "retrieval", "audit", "cards"} <= above
    assert floors[floor] >= {"certificates", "policy"}  # independent of policy, on the same floor
    io = next(c for c in _contracts() if str(c["name"]).startswith(IO_CONTRACT))
    assert "countersign.certificates" in io["source_modules"]  # type: ignore[operator]
    assert {"psycopg", "httpx"} <= set(io["forbidden_modules"])  # type: ignore[call-overload]


def _lint_copy(tmp_path: Path, smuggled: str) -> subprocess.CompletedProcess[str]:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(PROJECT_ROOT / "countersign", root / "countersign", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", root / "pyproject.toml")
    (root / "countersign" / "certificates" / "shortcut.py").write_text(smuggled, encoding="utf-8")
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("smuggled", "contract"),
    [("import countersign.llm\n", LAYERS_CONTRACT), ("from httpx import Client  # noqa: F401\n", IO_CONTRACT)],
)
def test_negative_control_the_contract_catches_a_forbidden_import(tmp_path: Path, smuggled: str, contract: str) -> None:
    done = _lint_copy(tmp_path, smuggled)
    assert done.returncode != 0
    broken = [line for line in done.stdout.splitlines() if "BROKEN" in line]
    assert any(contract in line for line in broken), done.stdout
