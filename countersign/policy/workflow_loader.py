"""Load and validate workflow files (config/workflows/<name>.yaml) against a Policy."""

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

from countersign.policy.errors import PolicyError, WorkflowPolicyMismatch
from countersign.policy.fields import Fields, describe
from countersign.policy.gates import derive_gate
from countersign.policy.model import Policy
from countersign.policy.workflow import SPECIALISTS, Workflow, WorkflowTask, check_graph
from countersign.policy.yaml_source import DOCUMENT, canonical_digest, read_yaml_file

SUPPORTED_WORKFLOW_VERSIONS = (1,)
WORKFLOW_SUFFIX = ".yaml"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_HANDLER = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
_ROOT_KEYS = ("version", "workflow", "title", "tasks")
_TASK_KEYS = ("id", "title", "handler", "depends_on", "risk_tier", "requires_gate")
_OPTIONAL_TASK_KEYS = ("specialist",)  # absent or null: the handler calls no specialist


def load_workflow(path: Path, policy: Policy) -> Workflow:
    """One workflow file, checked against `policy`; its name must equal the file's stem. Digest: sha256 of the bytes."""
    data, file_digest = read_yaml_file(path)
    workflow = parse_workflow(data, str(path), policy)
    if workflow.name != path.stem:
        raise PolicyError(
            str(path), "workflow", f"names workflow {workflow.name!r} but the file is {path.name!r}; they must match"
        )
    return dataclasses.replace(workflow, digest=file_digest)


def load_workflows(directory: Path, policy: Policy) -> Mapping[str, Workflow]:
    """Every `*.yaml` in `directory`, each checked against `policy`, by name (sorted). An empty folder is refused."""
    try:
        paths = sorted(path for path in directory.iterdir() if path.name.endswith(WORKFLOW_SUFFIX))
    except OSError as error:
        raise PolicyError(str(directory), DOCUMENT, f"cannot read folder: {error.strerror or error}") from error
    if not paths:
        raise PolicyError(str(directory), DOCUMENT, f"no workflow files (*{WORKFLOW_SUFFIX}) in this folder")
    workflows = (load_workflow(path, policy) for path in paths)
    return {workflow.name: workflow for workflow in workflows}


def parse_workflow(data: object, source: str, policy: Policy) -> Workflow:
    """Validate plain data (as parsed from YAML); digest is sha256 of its canonical JSON.

    Raises WorkflowPolicyMismatch when a task's `requires_gate` disagrees with the derived gate.
    """
    root = Fields(data, source, DOCUMENT, required=_ROOT_KEYS)
    version = root.integer("version", minimum=1)
    if version not in SUPPORTED_WORKFLOW_VERSIONS:
        raise root.error("version", f"unsupported version {version} (supported: {SUPPORTED_WORKFLOW_VERSIONS})")
    name = root.text("workflow")
    if not _NAME.match(name):
        raise root.error("workflow", f"workflow names are lower_snake_case, got {name!r}")
    title = root.text("title")
    entries = root.items("tasks")
    if not entries:
        raise root.error("tasks", "must list at least one task")
    tasks = tuple(_parse_task(entry, index, source, policy) for index, entry in enumerate(entries))
    check_graph(tasks, source)
    for task in tasks:
        policy_value = derive_gate(policy, task) is not None
        if task.requires_gate != policy_value:
            raise WorkflowPolicyMismatch(source, task.id, task.requires_gate, policy_value, task.risk_tier)
    return Workflow(name=name, title=title, tasks=tasks, digest=canonical_digest(data, source))


def _parse_task(entry: object, index: int, source: str, policy: Policy) -> WorkflowTask:
    first = Fields(entry, source, f"tasks[{index}]", ("id",), (*_TASK_KEYS, *_OPTIONAL_TASK_KEYS))
    task_id = first.text("id")
    if not _NAME.match(task_id):
        raise first.error("id", f"task ids are lower_snake_case, got {task_id!r}")
    fields = Fields(entry, source, f"tasks[{task_id}]", _TASK_KEYS, _OPTIONAL_TASK_KEYS)
    handler = fields.text("handler")
    if not _HANDLER.match(handler):
        raise fields.error(
            "handler", f"handler names are dotted lower_snake_case like close.bank_reconciliation, got {handler!r}"
        )
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
    return WorkflowTask(
        id=task_id,
        title=fields.text("title"),
        handler=handler,
        specialist=specialist,
        depends_on=tuple(depends_on),
        risk_tier=risk_tier,
        requires_gate=fields.flag("requires_gate"),
    )
