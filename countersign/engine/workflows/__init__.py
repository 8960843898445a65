"""Workflow handlers: each workflow's tasks, registered by the names its file in `config/workflows/` uses."""

from countersign.engine.workflows.base import Escalate, Handlers, TaskContext, TaskHandler, UnknownHandler
from countersign.engine.workflows.certificates import RetrieverSource, certificate_handlers
from countersign.engine.workflows.close import HANDLERS as CLOSE_HANDLERS


def shipped_handlers(retriever: RetrieverSource | None = None) -> Handlers:
    """Every handler of the workflows Countersign ships (clause retrieval needs a `retriever` to do its work)."""
    return {**CLOSE_HANDLERS, **certificate_handlers(retriever)}


__all__ = ["Escalate", "Handlers", "TaskContext", "TaskHandler", "UnknownHandler", "shipped_handlers"]
