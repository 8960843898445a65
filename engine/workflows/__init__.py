"""Workflow handlers: each workflow's tasks, registered by the names its file in `config/workflows/` uses."""

from .base import Escalate, Handlers, TaskContext, TaskHandler, UnknownHandler
from .close import HANDLERS as CLOSE_HANDLERS


def shipped_handlers() -> Handlers:
    """Every handler of the workflows Countersign ships."""
    return dict(CLOSE_HANDLERS)


__all__ = ["Escalate", "Handlers", "TaskContext", "TaskHandler", "UnknownHandler", "shipped_handlers"]
