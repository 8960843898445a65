"""The pay-application test files (tests/data/applications) and the script that writes them, loaded by path."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from countersign.certificates import Contract, parse_contract

APPLICATIONS = Path(__file__).resolve().parents[1] / "data" / "applications"


def _fixtures_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_fixtures", APPLICATIONS / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_fixtures = _fixtures_module()


@pytest.fixture
def contracts() -> dict[str, Contract]:
    document = json.loads((APPLICATIONS / "contracts.json").read_text())
    return {item["id"]: parse_contract(item) for item in document["contracts"]}
