"""A workflow: a named DAG of tasks, each run by a handler the engine registers by name; deterministic ordering."""

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from countersign.policy.errors import PolicyError, UnknownTaskError

SPECIALISTS = ("reconciliation", "accruals", "variance", "extraction", "adjudication")


@dataclass(frozen=True)
class WorkflowTask:
    id: str
    title: str
    handler: str  # a handler registered by this name in countersign/engine/workflows/; the engine checks it exists
    specialist: str | None
    depends_on: tuple[str, ...]
    risk_tier: str
    requires_gate: bool  # the workflow file's own claim; gate derivation never reads it


@dataclass(frozen=True)
class Workflow:
    name: str  # equals the file's stem: config/workflows/<name>.yaml
    title: str
    tasks: tuple[WorkflowTask, ...]
    digest: str

    def __post_init__(self) -> None:
        check_graph(self.tasks, source=f"Workflow {self.name!r}")

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(task.id for task in self.tasks)

    def task(self, task_id: str) -> WorkflowTask:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise UnknownTaskError(task_id)

    def title_of(self, task_id: str) -> str:
        return self.task(task_id).title

    def topological_order(self) -> tuple[str, ...]:
        """Kahn's algorithm; among ready tasks the one earliest in the file goes first."""
        position = {task.id: index for index, task in enumerate(self.tasks)}
        waiting_on = {task.id: len(set(task.depends_on)) for task in self.tasks}
        ready = [position[task.id] for task in self.tasks if waiting_on[task.id] == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            task = self.tasks[heapq.heappop(ready)]
            order.append(task.id)
            for dependent in self.dependents(task.id):
                waiting_on[dependent] -= 1
                if waiting_on[dependent] == 0:
                    heapq.heappush(ready, position[dependent])
        return tuple(order)

    def dependents(self, task_id: str) -> tuple[str, ...]:
        """Tasks that directly depend on `task_id`, in file order."""
        self.task(task_id)
        return tuple(task.id for task in self.tasks if task_id in task.depends_on)

    def downstream(self, task_id: str) -> tuple[str, ...]:
        """Every task that depends on `task_id` directly or transitively, in topological order."""
        reached: set[str] = set()
        frontier = [task_id]
        while frontier:
            for dependent in self.dependents(frontier.pop()):
                if dependent not in reached:
                    reached.add(dependent)
                    frontier.append(dependent)
        return tuple(task for task in self.topological_order() if task in reached)


def check_graph(tasks: Sequence[WorkflowTask], source: str) -> None:
    """Raise PolicyError for duplicate ids, unknown or repeated dependencies, or a dependency cycle."""
    known: set[str] = set()
    for index, task in enumerate(tasks):
        if task.id in known:
            raise PolicyError(source, f"tasks[{index}].id", f"duplicate task id {task.id!r}")
        known.add(task.id)
    for task in tasks:
        for dependency in task.depends_on:
            if dependency not in known:
                raise PolicyError(source, f"tasks[{task.id}].depends_on", f"unknown task {dependency!r}")
        if len(set(task.depends_on)) != len(task.depends_on):
            raise PolicyError(source, f"tasks[{task.id}].depends_on", "lists a dependency twice")
    cycle = find_cycle(tasks)
    if cycle:
        raise PolicyError(source, f"tasks[{cycle[0]}].depends_on", f"dependency cycle: {' -> '.join(cycle)}")


def find_cycle(tasks: Sequence[WorkflowTask]) -> tuple[str, ...] | None:
    """The first cycle found, as `a -> b -> a` read "a depends on b which depends on a"; file order."""
    depends_on = {task.id: task.depends_on for task in tasks}
    done: set[str] = set()
    for start in depends_on:
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start}
        iterators = [iter(depends_on[start])]
        while iterators:
            following = next(iterators[-1], None)
            if following is None:
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                iterators.pop()
                continue
            if following in on_path:
                return (*path[path.index(following) :], following)
            if following not in done and following in depends_on:
                path.append(following)
                on_path.add(following)
                iterators.append(iter(depends_on[following]))
    return None
