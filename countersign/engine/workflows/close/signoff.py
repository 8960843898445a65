"""Close sign-off: the engine summarises the close; approval closes the accounting period."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event
from countersign.engine.workflows.base import TaskContext, TaskHandler
from countersign.engine.workflows.close import queries
from countersign.states import TraceKind


class CloseSignoff(TaskHandler):
    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return {
            "kind": "signoff",
            "entity": tc.close.entity,
            "period": tc.close.period,
            "tasks": await queries.task_summary(conn, tc.close.close_id),
            "journals": await queries.period_journals(conn, tc.close.entity, tc.close.period),
        }

    async def complete(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        await queries.close_period(conn, tc.close.entity, tc.close.period, tc.close.close_id)
        await append_event(
            conn,
            actor=tc.actor,
            close_id=tc.close.close_id,
            kind=TraceKind.PERIOD_CLOSED,
            payload={"entity": tc.close.entity, "period": tc.close.period},
        )
        return [f"period {tc.close.entity} {tc.close.period} closed"]
