"""The wheel stands on its own: the one the image builds (from exactly what the Dockerfile copies, conftest.py),
installed (not editable) into a fresh venv, runs a close.

Slow by nature (a build, a venv, an install, an embedded PostgreSQL): one build (shared with test_image_context.py)
and one install serve every test here.
The venv is made and filled by uv, resolving the wheel's own requirements (with the embedded extra) from the registry
under the dev lock's pins, so a dependency missing from pyproject fails here instead of hiding behind the dev venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from uv import find_uv_bin

from countersign.bootstrap.settings import PROJECT_ROOT
from tests.packaging.docker_context import Built

# Every top-level package the wheel lists, read from pyproject.toml: a room added to the house is built and checked
# without this list being edited.
PACKAGE_ROOTS = tuple(
    dict.fromkeys(
        name.split(".")[0]
        for name in tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
        if not name.startswith("countersign._")
    )
)
INSTALL_TIMEOUT_S = 600
DEMO_TIMEOUT_S = 300


def missing_from_wheel(wheel_names: set[str], source: Path) -> list[str]:
    """Source files the wheel must carry but does not: every module of ours and every file under config/."""
    wanted: list[str] = []
    for root in PACKAGE_ROOTS:
        wanted += [
            p.relative_to(source).as_posix() for p in (source / root).rglob("*.py") if "__pycache__" not in p.parts
        ]
    config = source / "config"
    wanted += ["countersign/_config/" + p.relative_to(config).as_posix() for p in config.rglob("*") if p.is_file()]
    return sorted(name for name in wanted if name not in wheel_names)


def clean_env(**extra: str) -> dict[str, str]:
    """The process environment minus whatever points back at the checkout, a venv, a database or a chat app."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "DATABASE_URL")
    dropped_prefixes = ("COUNTERSIGN_", "SLACK_", "TEAMS_")
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith(dropped_prefixes)}
    return {**env, **extra}


@pytest.fixture(scope="module")
def wheel(image_build: Built) -> Path:
    assert image_build.wheel is not None, image_build.log[-3000:]
    return image_build.wheel


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv holding the wheel (plain install) and its requirements, nothing from the project's .venv."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    uv = find_uv_bin()
    env = clean_env()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, env=env, timeout=60)
    python = str(venv / "bin" / "python")
    lock = PROJECT_ROOT / "requirements-dev.lock"
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", python, "-c", str(lock), f"{wheel}[embedded]"],
        check=True,
        env=env,
        timeout=INSTALL_TIMEOUT_S,
    )
    subprocess.run([uv, "pip", "check", "--python", python], check=True, env=env, timeout=60)
    yield venv


def test_wheel_carries_config_migrations_and_every_module(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert missing_from_wheel(names, PROJECT_ROOT) == []
    assert "countersign/_config/risk.yaml" in names
    assert any(name.startswith("countersign/migrations/versions/0001_") for name in names)


def top_level_names(wheel_names: set[str], read: dict[str, bytes]) -> set[str]:
    """The import names a wheel writes into site-packages: its top_level.txt, and every top folder or module file."""
    listed = {
        line.strip()
        for name, text in read.items()
        if name.endswith(".dist-info/top_level.txt")
        for line in text.decode("utf-8").splitlines()
        if line.strip()
    }
    written = {name.split("/")[0].removesuffix(".py") for name in wheel_names if ".dist-info/" not in name}
    return listed | written


def test_the_wheel_installs_one_import_package(wheel: Path) -> None:
    """Nothing of ours but `countersign` lands in site-packages (issue 34): no `web`, `records`, `models`, `cli`."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        read = {name: archive.read(name) for name in names if name.endswith("top_level.txt")}
    assert read, "the wheel has no top_level.txt"
    assert top_level_names(names, read) == {"countersign"}
    assert Path(wheel).name.startswith("countersign_close-")


def test_a_wheel_with_a_second_top_level_name_is_caught(wheel: Path) -> None:
    # Negative control: the wheel as it was before issue 34 wrote `web`, `engine` and others beside `countersign`.
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist()) | {"web/__init__.py", "engine/__init__.py"}
        read = {name: archive.read(name) for name in archive.namelist() if name.endswith("top_level.txt")}
    assert top_level_names(names, read) == {"countersign", "web", "engine"}
    read = {name: b"countersign\nrecords\n" for name in read}
    assert "records" in top_level_names(set(), read)


def test_missing_from_wheel_names_what_a_broken_wheel_lacks(wheel: Path) -> None:
    # Negative control: the check above would catch a wheel built without config/ or without a migration.
    names = set(zipfile.ZipFile(wheel).namelist())
    broken = {n for n in names if not n.startswith("countersign/_config/") and "0001_" not in n}
    missing = missing_from_wheel(broken, PROJECT_ROOT)
    assert "countersign/_config/risk.yaml" in missing
    assert "countersign/_config/principals.yaml" in missing
    assert any(name.startswith("countersign/migrations/versions/0001_") for name in missing)


def test_installed_wheel_runs_the_demo_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    site = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import countersign; print(countersign.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=clean_env(),
    ).stdout
    assert str(PROJECT_ROOT) not in site, "the venv imports countersign from the checkout, not from the wheel"

    done = subprocess.run(
        [str(installed / "bin" / "countersign"), "demo"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(COUNTERSIGN_STATE_DIR=str(tmp_path / "state"), COLUMNS="200"),
        timeout=DEMO_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "close status: closed" in done.stdout
