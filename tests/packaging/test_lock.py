"""The lock files agree with pyproject: every declared requirement is pinned, with hashes, at a version it accepts.

`make lock` writes them (uv pip compile --generate-hashes, CPython 3.11 on Linux x86_64); `make` installs
requirements-dev.lock with --require-hashes and the image installs requirements.lock (ADR 0013).
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from countersign.bootstrap.settings import PROJECT_ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
# The interpreter and platform the locks are compiled for (Makefile LOCK_FLAGS).
TARGET = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def lock_pins(text: str) -> dict[str, str]:
    """Package name (canonical) → pinned version, for every `name==version` entry of a requirements lock."""
    return {canonicalize_name(m[1]): m[2] for line in text.splitlines() if (m := PIN.match(line))}


def unhashed(text: str) -> list[str]:
    """Pinned entries that carry no --hash (pip --require-hashes would refuse the whole file)."""
    entries = re.split(r"\n(?=[A-Za-z0-9])", text)
    return [entry.split()[0] for entry in entries if PIN.match(entry) and "--hash=sha256:" not in entry]


def unlocked(requirements: list[str], pins: dict[str, str], extras: tuple[str, ...] = ()) -> list[str]:
    """The requirements (for the lock's target) that the lock does not pin, or pins at a version they refuse."""
    problems: list[str] = []
    for line in requirements:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name == "countersign-close":  # the dev extra names the embedded one: countersign-close[embedded]
            continue
        if req.marker and not any(req.marker.evaluate({**TARGET, "extra": e}) for e in ("", *extras)):
            continue
        if name not in pins:
            problems.append(f"{req.name}: not in the lock")
        elif not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{req.name}: locked {pins[name]}, pyproject wants {req.specifier}")
    return problems


def pyproject() -> dict[str, Any]:
    return tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def read(name: str) -> str:
    return (PROJECT_ROOT / name).read_text(encoding="utf-8")


def test_production_lock_pins_every_runtime_requirement_and_no_embedded_database() -> None:
    pins = lock_pins(read("requirements.lock"))
    assert unlocked(pyproject()["project"]["dependencies"], pins) == [], "run `make lock`"
    assert "pgserver" not in pins


def test_dev_lock_pins_runtime_embedded_and_dev_requirements() -> None:
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *extras["embedded"], *extras["dev"]]
    assert unlocked(wanted, lock_pins(read("requirements-dev.lock")), ("embedded", "dev")) == [], "run `make lock`"


def test_both_locks_pin_the_runtime_alike_and_hash_everything() -> None:
    prod, dev = read("requirements.lock"), read("requirements-dev.lock")
    prod_pins, dev_pins = lock_pins(prod), lock_pins(dev)
    assert len(prod_pins) > 20
    assert {name: dev_pins.get(name) for name in prod_pins} == prod_pins
    assert unhashed(prod) == [] and unhashed(dev) == []


def test_a_requirement_the_lock_lacks_or_refuses_is_named() -> None:
    # Negative controls: each check above would catch a dependency added to pyproject without `make lock`.
    pins = lock_pins("pyyaml==6.0.2 \\\n    --hash=sha256:00\nuvloop==0.21.0 \\\n    --hash=sha256:01\n")
    assert pins == {"pyyaml": "6.0.2", "uvloop": "0.21.0"}
    assert unlocked(["pyyaml>=6", "uvloop>=0.21; sys_platform != 'win32'"], pins) == []
    assert unlocked(["pyyaml>=7"], pins) == ["pyyaml: locked 6.0.2, pyproject wants >=7"]
    assert unlocked(["prometheus-client>=0.26"], pins) == ["prometheus-client: not in the lock"]
    assert unlocked(["pywin32>=306; sys_platform == 'win32'"], pins) == []
    assert unhashed("pyyaml==6.0.2\n    # via countersign\nuvloop==0.21.0 \\\n    --hash=sha256:01\n") == [
        "pyyaml==6.0.2"
    ]
