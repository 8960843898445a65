"""A task store for the specialists that forgets: finished tasks are kept small and few, failed ones not at all.

a2a-sdk's `InMemoryTaskStore` keeps every task with its whole history (the request message, up to 16 MiB) for the
life of the process, so each call a token holder makes stays in memory. Countersign's client reads a specialist's
answer from the SendMessage response and never asks for a task again, so a finished task need not outlive its call:

- a completed or cancelled task is kept without its history (the request), and only the last `max_finished_tasks`
  of them, and no more than `max_finished_bytes` in all;
- a failed or rejected task is dropped once its final state is saved (its caller already has the answer);
- a task waiting for input (a message without our contract, ADR 0037) is kept with its history, so tasks/get shows
  the request and the agent's explanation, but only the last `max_waiting_tasks` of them and no more than
  `max_waiting_bytes` in all: a client sending such messages in a loop pushes out only its own earlier ones, never a
  task in flight;
- at most `max_open_tasks` unfinished tasks are kept (bounded in practice by the requests in flight); past it the
  oldest is dropped.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState

log = logging.getLogger("countersign.task_store")

MAX_FINISHED_TASKS = 32
MAX_FINISHED_BYTES = 4 * 1024 * 1024
MAX_OPEN_TASKS = 256
MAX_WAITING_TASKS = 64
MAX_WAITING_BYTES = 1024 * 1024

_KEPT_WHEN_FINISHED = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED})
_DROPPED_WHEN_FINISHED = frozenset({TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED})
_WAITING = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})


class BoundedTaskStore(TaskStore):
    def __init__(
        self,
        *,
        max_finished_tasks: int = MAX_FINISHED_TASKS,
        max_finished_bytes: int = MAX_FINISHED_BYTES,
        max_open_tasks: int = MAX_OPEN_TASKS,
        max_waiting_tasks: int = MAX_WAITING_TASKS,
        max_waiting_bytes: int = MAX_WAITING_BYTES,
    ) -> None:
        if min(max_finished_tasks, max_finished_bytes, max_open_tasks, max_waiting_tasks, max_waiting_bytes) < 0:
            raise ValueError("task store bounds must be >= 0")
        self.max_finished_tasks = max_finished_tasks
        self.max_finished_bytes = max_finished_bytes
        self.max_open_tasks = max_open_tasks
        self.max_waiting_tasks = max_waiting_tasks
        self.max_waiting_bytes = max_waiting_bytes
        self._tasks = InMemoryTaskStore()
        self._open: OrderedDict[str, ServerCallContext] = OrderedDict()
        self._finished: OrderedDict[str, tuple[ServerCallContext, int]] = OrderedDict()
        self._finished_bytes = 0
        self._waiting: OrderedDict[str, tuple[ServerCallContext, int]] = OrderedDict()
        self._waiting_bytes = 0

    @property
    def task_count(self) -> int:
        return len(self._open) + len(self._finished) + len(self._waiting)

    @property
    def waiting_count(self) -> int:
        return len(self._waiting)

    @property
    def finished_bytes(self) -> int:
        return self._finished_bytes

    async def save(self, task: Task, context: ServerCallContext) -> None:
        state = task.status.state
        if state in _DROPPED_WHEN_FINISHED:
            await self._forget(task.id, context)
            return
        if state in _KEPT_WHEN_FINISHED:
            await self._save_finished(task, context)
            return
        if state in _WAITING:
            await self._save_waiting(task, context)
            return
        await self._forget(task.id, context, keep_open=True)
        await self._tasks.save(task, context)
        self._open[task.id] = context
        self._open.move_to_end(task.id)
        while len(self._open) > self.max_open_tasks:
            oldest, oldest_context = self._open.popitem(last=False)
            log.warning("dropping unfinished task %s: more than %s open tasks", oldest, self.max_open_tasks)
            await self._tasks.delete(oldest, oldest_context)

    async def _save_finished(self, task: Task, context: ServerCallContext) -> None:
        slim = Task()
        slim.CopyFrom(task)
        del slim.history[:]  # the request message: its caller has the answer, nobody reads it back
        await self._forget(task.id, context)
        size = slim.ByteSize()
        if self.max_finished_tasks == 0 or size > self.max_finished_bytes:
            return
        await self._tasks.save(slim, context)
        self._finished[task.id] = (context, size)
        self._finished_bytes += size
        while len(self._finished) > self.max_finished_tasks or self._finished_bytes > self.max_finished_bytes:
            oldest, (oldest_context, oldest_size) = self._finished.popitem(last=False)
            self._finished_bytes -= oldest_size
            await self._tasks.delete(oldest, oldest_context)

    async def _save_waiting(self, task: Task, context: ServerCallContext) -> None:
        await self._forget(task.id, context)
        size = task.ByteSize()
        if self.max_waiting_tasks == 0 or size > self.max_waiting_bytes:
            log.warning("not keeping task %s waiting for input: %s bytes", task.id, size)
            return
        await self._tasks.save(task, context)
        self._waiting[task.id] = (context, size)
        self._waiting_bytes += size
        while len(self._waiting) > self.max_waiting_tasks or self._waiting_bytes > self.max_waiting_bytes:
            oldest, (oldest_context, oldest_size) = self._waiting.popitem(last=False)
            self._waiting_bytes -= oldest_size
            await self._tasks.delete(oldest, oldest_context)

    async def _forget(self, task_id: str, context: ServerCallContext, *, keep_open: bool = False) -> None:
        """Drop the task from every ring (`keep_open`: only from the finished and waiting ones, keeping its row)."""
        held = not keep_open and self._open.pop(task_id, None) is not None
        finished = self._finished.pop(task_id, None)
        if finished is not None:
            self._finished_bytes -= finished[1]
        waiting = self._waiting.pop(task_id, None)
        if waiting is not None:
            self._waiting_bytes -= waiting[1]
        if not keep_open and (held or finished is not None or waiting is not None):
            await self._tasks.delete(task_id, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return await self._tasks.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self._tasks.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._forget(task_id, context)
