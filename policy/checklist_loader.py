"""Load and validate config/checklist.yaml against a Policy."""

import dataclasses
import re
from pathlib import Path

from policy.checklist import SPECIALISTS, Checklist, ChecklistTask, check_graph
from policy.errors import ChecklistPolicyMismatch
from policy.fields import Fields, describe
from policy.gates import derive_gate
from policy.model import Policy
from policy.yaml_source import DOCUMENT, canonical_digest, read_yaml_file

SUPPORTED_CHECKLIST_VERSIONS = (1,)
_TASK_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_TASK_KEYS = ("id", "title", "specialist", "depends_on", "risk_tier", "requires_gate")


def load_checklist(path: Path, policy: Policy) -> Checklist:
    data, file_digest = read_yaml_file(path)
    return dataclasses.replace(parse_checklist(data, str(path), policy), digest=file_digest)


def parse_checklist(data: object, source: str, policy: Policy) -> Checklist:
    """Validate plain data (as parsed from YAML); digest is sha256 of its canonical JSON.

    Raises ChecklistPolicyMismatch when a task's `requires_gate` disagrees with the derived gate.
    """
    root = Fields(data, source, DOCUMENT, required=("version", "tasks"))
    version = root.integer("version", minimum=1)
    if version not in SUPPORTED_CHECKLIST_VERSIONS:
        raise root.error("version", f"unsupported version {version} (supported: {SUPPORTED_CHECKLIST_VERSIONS})")
    entries = root.items("tasks")
    if not entries:
        raise root.error("tasks", "must list at least one task")
    tasks = tuple(_parse_task(entry, index, source, policy) for index, entry in enumerate(entries))
    check_graph(tasks, source)
    for task in tasks:
        policy_value = derive_gate(policy, task) is not None
        if task.requires_gate != policy_value:
            raise ChecklistPolicyMismatch(source, task.id, task.requires_gate, policy_value, task.risk_tier)
    return Checklist(tasks=tasks, digest=canonical_digest(data, source))


def _parse_task(entry: object, index: int, source: str, policy: Policy) -> ChecklistTask:
    first = Fields(entry, source, f"tasks[{index}]", ("id",), _TASK_KEYS)
    task_id = first.text("id")
    if not _TASK_ID.match(task_id):
        raise first.error("id", f"task ids are lower_snake_case, got {task_id!r}")
    fields = Fields(entry, source, f"tasks[{task_id}]", _TASK_KEYS)
    specialist = fields.optional_text("specialist")
    if specialist is not None and specialist not in SPECIALISTS:
        raise fields.error(
            "specialist", f"unknown specialist {specialist!r} (known: {', '.join(SPECIALISTS)}, or null)"
        )
    depends_on: list[str] = []
    for position, dependency in enumerate(fields.items("depends_on")):
        if not isinstance(dependency, str):
            raise fields.error(f"depends_on[{position}]", f"expected a task id, got {describe(dependency)}")
        depends_on.append(dependency)
    risk_tier = fields.text("risk_tier")
    if risk_tier not in policy.tier_names:
        raise fields.error("risk_tier", f"unknown tier {risk_tier!r} (known: {', '.join(policy.tier_names)})")
    return ChecklistTask(
        id=task_id,
        title=fields.text("title"),
        specialist=specialist,
        depends_on=tuple(depends_on),
        risk_tier=risk_tier,
        requires_gate=fields.flag("requires_gate"),
    )
