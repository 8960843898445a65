"""The image builds, shown without Docker: the wheel is built from exactly the files the Dockerfile's `COPY` lines put
in the build stage (the context as `.dockerignore` leaves it), then installed on its own and run.

The Dockerfile read as text (test_dockerfile.py) and the wheel built from the whole tree (test_wheel.py) both passed
while the image failed at its first step: the build stage lacked packages pyproject.toml lists (issue 24).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from countersign.bootstrap.settings import PROJECT_ROOT
from tests.packaging.docker_context import (
    Built,
    ContextError,
    assemble,
    build_wheel_as_the_image_does,
    context_sources,
    copied_top_level,
    ignore_patterns,
    ignored,
    parse_copy,
    stages,
    wheel_stage,
)

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGES: list[str] = PYPROJECT["tool"]["setuptools"]["packages"]
PACKAGE_DIRS: dict[str, str] = PYPROJECT["tool"]["setuptools"].get("package-dir", {})
DOCKERFILE = (PROJECT_ROOT / "Dockerfile").read_text(encoding="utf-8")
RUN_TIMEOUT_S = 120


def wanted_in_build_stage() -> set[str]:
    """The top-level paths a wheel build needs: each package's folder (package-dir mapped), pyproject and its readme."""
    folders = {PACKAGE_DIRS.get(name, name.replace(".", "/")).split("/")[0] for name in PACKAGES}
    return folders | {"pyproject.toml", PYPROJECT["project"]["readme"]}


def not_copied(dockerfile_text: str) -> list[str]:
    return sorted(wanted_in_build_stage() - copied_top_level(dockerfile_text, wheel_stage(dockerfile_text)))


def without_copy_of(dockerfile_text: str, name: str) -> str:
    broken = re.sub(rf"(?m)^COPY {name} {name}\n", "", dockerfile_text)
    assert broken != dockerfile_text, name
    return broken


def test_the_build_stage_copies_every_package_pyproject_lists() -> None:
    missing = not_copied(DOCKERFILE)
    assert missing == [], f"pyproject.toml lists packages the Dockerfile's build stage never copies: {missing}"


def test_a_package_without_its_copy_line_is_named() -> None:
    # Negative control: the image of issue 24 lacked packages pyproject listed; with one import package, the build
    # stage needs its one folder and config/ (shipped as countersign._config).
    assert not_copied(without_copy_of(DOCKERFILE, "countersign")) == ["countersign"]
    assert not_copied(without_copy_of(DOCKERFILE, "config")) == ["config"]


def test_every_context_copy_of_every_stage_is_in_the_build_context() -> None:
    """docker build stops at a COPY whose source the context lacks (missing, or left out by .dockerignore)."""
    patterns = ignore_patterns(PROJECT_ROOT)
    for index, stage in enumerate(stages(DOCKERFILE)):
        for copy, _ in stage.copies:
            if copy.from_stage is None:
                assert context_sources(copy, PROJECT_ROOT, patterns), (index, copy)


def test_copy_lines_are_read_as_docker_reads_them(tmp_path: Path) -> None:
    assert parse_copy("--chown=10001:10001 --chmod=644 a b ./").sources == ("a", "b")
    assert parse_copy('--link ["with space", "/dest/"]').dest == "/dest/"
    assert parse_copy("--from=build /dist/ /tmp/install/").from_stage == "build"
    text = (
        "FROM python:3.11-slim AS build\nWORKDIR /src\nCOPY --chown=1:1 a.toml b.md ./\nCOPY pkg pkg\n"
        "COPY one.txt renamed.txt\nRUN python -m build --wheel .\n"
        "FROM python:3.11-slim\nCOPY --from=build /dist/ /tmp/\nCOPY req.lock /tmp/req.lock\n"
    )
    context = tmp_path / "context"
    (context / "pkg" / "__pycache__").mkdir(parents=True)
    (context / "pkg" / "__pycache__" / "m.pyc").write_text("")
    (context / "pkg" / "m.py").write_text("")
    for name in ("a.toml", "b.md", "one.txt", "unlisted.txt", "req.lock"):
        (context / name).write_text(name)
    (context / ".dockerignore").write_text("# comment\n**/__pycache__\n*.lock\n!keep.lock\n")
    assert wheel_stage(text) == 0
    workdir = assemble(text, context, tmp_path / "stage")
    assert workdir == tmp_path / "stage" / "src"
    laid_out = sorted(p.relative_to(workdir).as_posix() for p in workdir.rglob("*"))
    assert laid_out == ["a.toml", "b.md", "pkg", "pkg/m.py", "renamed.txt"]  # no unlisted file, no __pycache__
    patterns = ignore_patterns(context)
    assert ignored("pkg/__pycache__/m.pyc", patterns) and ignored("req.lock", patterns)
    assert not ignored("keep.lock", patterns) and not ignored("pkg/m.py", patterns)
    with pytest.raises(ContextError, match=r"COPY req.lock: not in the build context"):
        assemble(text, context, tmp_path / "runtime", 1)  # .dockerignore keeps it out, as docker build would


def test_the_wheel_builds_from_exactly_what_the_dockerfile_copies(image_build: Built) -> None:
    assert image_build.wheel is not None, image_build.log[-3000:]
    assert (image_build.workdir / "pyproject.toml").is_file()
    assert not (image_build.workdir / "tests").exists() and not (image_build.workdir / ".venv").exists()
    # The image's build stage runs this same command; if it changes, the replay above must follow it.
    (build_run,) = [run for run in stages(DOCKERFILE)[wheel_stage(DOCKERFILE)].runs if "-m build" in run]
    assert "python -m build --wheel --outdir /dist ." in build_run


def test_a_dockerfile_missing_a_package_fails_to_build_naming_it(tmp_path: Path) -> None:
    # Negative control: the same replay over the Dockerfile without `COPY countersign countersign` stops where docker
    # build would, at setuptools' package discovery.
    broken = build_wheel_as_the_image_does(without_copy_of(DOCKERFILE, "countersign"), PROJECT_ROOT, tmp_path)
    assert broken.wheel is None
    assert "package directory 'countersign' does not exist" in broken.log, broken.log[-3000:]


@pytest.fixture(scope="module")
def installed(image_build: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's wheel installed alone (no dependencies: this venv has them) into an empty target folder."""
    assert image_build.wheel is not None, image_build.log[-3000:]
    target = tmp_path_factory.mktemp("target")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(target),
         str(image_build.wheel)],
        check=True,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    return target


def run_installed(target: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A process that finds our packages only in `target` (its folder first on the path, the checkout nowhere)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COUNTERSIGN_", "DATABASE_URL", "PYTHON"))}
    return subprocess.run(
        list(args),
        cwd=cwd,
        env={**base, "PYTHONPATH": str(target), "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


IMPORT_ALL = """
import importlib, json, sys
found = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    found[name] = getattr(module, "__file__", None) or list(module.__path__)[0]
from countersign.bootstrap import migrate
found["head"] = migrate.head_revision()
found["migrations_dir"] = str(migrate.MIGRATIONS_DIR)
print(json.dumps(found))
"""


def test_the_installed_wheel_imports_every_package_and_finds_its_runtime_files(installed: Path, tmp_path: Path) -> None:
    done = run_installed(installed, tmp_path, sys.executable, "-c", IMPORT_ALL, *PACKAGES)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    outside = {name: path for name, path in found.items() if name in PACKAGES and not path.startswith(str(installed))}
    assert outside == {}, "imported from somewhere other than the installed wheel"
    # The migrations alembic reads at run time, up to the newest one in the tree.
    newest = max(p.stem for p in (PROJECT_ROOT / "countersign" / "migrations" / "versions").glob("[0-9]*.py"))
    assert found["migrations_dir"] == str(installed / "countersign" / "migrations")
    assert found["head"] == newest.split("_")[0] or newest.startswith(found["head"]), (found["head"], newest)
    # What package-data ships: the board's templates and assets, alembic's template, config/ as countersign._config.
    for relative in (
        "countersign/board/templates/base.html",
        "countersign/board/static/board.css",
        "countersign/migrations/script.py.mako",
    ):
        assert (installed / relative).is_file(), relative
    shipped = {p.relative_to(PROJECT_ROOT / "config") for p in (PROJECT_ROOT / "config").rglob("*") if p.is_file()}
    assert {p for p in shipped if not (installed / "countersign" / "_config" / p).is_file()} == set()


def test_the_installed_command_starts_and_its_configuration_is_valid(installed: Path, tmp_path: Path) -> None:
    command = str(installed / "bin" / "countersign")
    helped = run_installed(installed, tmp_path, command, "--help")
    assert helped.returncode == 0 and "Usage" in helped.stdout, helped.stderr[-3000:]
    checked = run_installed(installed, tmp_path, command, "config", "check", COUNTERSIGN_STATE_DIR=str(tmp_path / "s"))
    assert checked.returncode == 0 and "configuration valid" in checked.stdout, checked.stdout + checked.stderr
    config_row = next(line for line in checked.stdout.splitlines() if "COUNTERSIGN_CONFIG_DIR" in line)
    assert str(installed / "countersign" / "_config") in config_row, config_row
