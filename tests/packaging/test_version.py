"""The version every trace event and `countersign_build_info` carry is the installed distribution's, not a fallback."""

from __future__ import annotations

import tomllib

from countersign import DISTRIBUTION, installed_version
from countersign.bootstrap.metrics import build_labels
from countersign.bootstrap.runtime import app_version
from countersign.bootstrap.settings import PROJECT_ROOT


def test_the_version_recorded_is_pyproject_s_under_the_distribution_name() -> None:
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION  # one name: a rename of the distribution must move this constant too
    assert installed_version() == app_version() == build_labels({})["version"] == project["version"]
    assert installed_version() != "0+unknown"  # the fallback a wrong distribution name silently gave
