"""The engine runs any workflow: outside the workflow handler modules it names no task of any shipped workflow."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from countersign.policy import SPECIALISTS

ROOT = Path(__file__).resolve().parents[3]
ENGINE = ROOT / "countersign" / "engine"
# Handler modules may name their workflow's tasks; specialists are A2A agents that never see a task id (they answer
# the `kind` of the message they are sent).
ALLOWED = (ENGINE / "workflows", ENGINE / "specialists")


def _shipped_task_ids() -> set[str]:
    ids: set[str] = set()
    for path in sorted((ROOT / "config" / "workflows").glob("*.yaml")):
        ids |= {task["id"] for task in yaml.safe_load(path.read_text(encoding="utf-8"))["tasks"]}
    return ids


def _engine_sources() -> list[Path]:
    sources = [p for p in sorted(ENGINE.rglob("*.py")) if not any(p.is_relative_to(a) for a in ALLOWED)]
    assert len(sources) > 10, f"found {len(sources)} engine modules under {ENGINE}: the scan reads the wrong folder"
    return sources


def _task_names_in(source: str, ids: set[str]) -> list[str]:
    """Every place the source names a task: a string that is exactly a task id (`task.id == "close_signoff"`), or an
    identifier with a task id as one of its words (`bank_reconciliation_input`). Prose that happens to contain one
    of the words ("intercompany balances") names no task."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ids:
            found.append(f"{node.lineno}: string {node.value!r}")
        names: list[tuple[int, str]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append((node.lineno, node.name))
        elif isinstance(node, ast.Name):
            names.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            names.append((node.lineno, node.attr))
        elif isinstance(node, ast.arg):
            names.append((node.lineno, node.arg))
        for line, name in names:
            if any(re.search(rf"(^|_){re.escape(task)}(_|$)", name) for task in ids):
                found.append(f"{line}: identifier {name}")
    return sorted(found)


def test_no_engine_module_outside_the_handlers_names_a_task() -> None:
    # A task id that is also a specialist's name (`accruals`) names the agent where the engine routes calls.
    ids = _shipped_task_ids() - set(SPECIALISTS)
    assert {"bank_reconciliation", "close_signoff", "intercompany"} <= ids  # the search has something to find
    found = [
        f"{path.relative_to(ROOT)}:{where}"
        for path in _engine_sources()
        for where in _task_names_in(path.read_text(encoding="utf-8"), ids)
    ]
    assert found == []


def test_a_task_named_in_engine_code_would_be_found() -> None:
    """Negative control: the same search finds a branch on a task id and a function named after one."""
    ids = _shipped_task_ids() - set(SPECIALISTS)
    source = (
        "async def bank_reconciliation_input(conn):\n"
        "    if task.id == 'variance_analysis':\n"
        "        return 'the intercompany balances'\n"
    )
    assert _task_names_in(source, ids) == ["1: identifier bank_reconciliation_input", "2: string 'variance_analysis'"]


def test_the_orchestrator_stays_small() -> None:
    lines = (ENGINE / "orchestrator.py").read_text(encoding="utf-8").count("\n")
    assert lines < 300, f"countersign/engine/orchestrator.py has {lines} lines"
