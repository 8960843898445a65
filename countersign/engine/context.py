"""What one call of `advance` runs with, and what it reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from countersign.audit.checkpoint import NoteSigner
from countersign.cards.targets import ChannelTarget
from countersign.engine.actors import ENGINE_ACTOR
from countersign.engine.dispatch import SpecialistCall
from countersign.engine.workflows import Handlers, TaskHandler, UnknownHandler, shipped_handlers
from countersign.money.formatting import DEFAULT_LOCALE
from countersign.policy import Policy, Workflow, WorkflowTask
from countersign.states import RunState


class UnknownWorkflow(LookupError):
    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        super().__init__(f"close runs workflow {name!r}, which this engine was not given (given: {', '.join(known)})")
        self.name = name


@dataclass(frozen=True)
class EngineContext:
    policy: Policy
    workflows: Mapping[str, Workflow]
    call: SpecialistCall
    actor: str = ENGINE_ACTOR
    channels: tuple[ChannelTarget, ...] = ()
    signer: NoteSigner | None = None  # signs a trace checkpoint at every sign-off
    origin: str = "countersign.local/close-trace"
    handlers: Handlers = field(default_factory=shipped_handlers)
    locale: str = DEFAULT_LOCALE  # CLDR locale of the amounts in the texts people read (COUNTERSIGN_LOCALE)

    def __post_init__(self) -> None:
        """Refuse, before any close moves, a workflow naming a handler nobody registered."""
        if isinstance(self.workflows, Workflow):
            raise TypeError("EngineContext.workflows maps workflow names to workflows; got one Workflow")
        for name, workflow in self.workflows.items():
            if name != workflow.name:
                raise ValueError(f"workflow {workflow.name!r} is registered under the name {name!r}")
            for task in workflow.tasks:
                if task.handler not in self.handlers:
                    raise UnknownHandler(workflow.name, task.id, task.handler)

    def workflow(self, name: str) -> Workflow:
        try:
            return self.workflows[name]
        except KeyError:
            raise UnknownWorkflow(name, tuple(self.workflows)) from None

    def handler(self, task: WorkflowTask) -> TaskHandler:
        return self.handlers[task.handler]


def workflows_by_name(*workflows: Workflow) -> dict[str, Workflow]:
    return {workflow.name: workflow for workflow in workflows}


@dataclass
class AdvanceReport:
    close_id: str
    status: RunState = RunState.RUNNING
    busy: bool = False
    steps: list[str] = field(default_factory=list)
