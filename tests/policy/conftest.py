import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from countersign.policy import Policy, load_policy

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
RISK_PATH = CONFIG_DIR / "risk.yaml"
WORKFLOWS_DIR = CONFIG_DIR / "workflows"
CLOSE_WORKFLOW_PATH = WORKFLOWS_DIR / "close.yaml"


@pytest.fixture
def policy() -> Policy:
    return load_policy(RISK_PATH)


@pytest.fixture
def policy_data() -> dict[str, Any]:
    """A fresh, mutable copy of the shipped risk.yaml as plain data."""
    return copy.deepcopy(yaml.safe_load(RISK_PATH.read_text()))


@pytest.fixture
def workflow_data() -> dict[str, Any]:
    """A fresh, mutable copy of the shipped workflows/close.yaml as plain data."""
    return copy.deepcopy(yaml.safe_load(CLOSE_WORKFLOW_PATH.read_text()))


@pytest.fixture
def task_entry(workflow_data: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    def find(task_id: str) -> dict[str, Any]:
        return next(task for task in workflow_data["tasks"] if task["id"] == task_id)

    return find
