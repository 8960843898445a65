"""Variance analysis: the specialist drafts a narrative; the engine grounds every figure in it before a gate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.workflows.base import Escalate, TaskContext, TaskHandler
from countersign.engine.workflows.close import inputs
from countersign.policy import EscalationReason
from countersign.specialists.grounding import UngroundedFigureError, ground_figures


class VarianceAnalysis(TaskHandler):
    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return await inputs.variance_input(conn, tc.close.book_set_id, tc.close.entity, tc.close.period, tc.policy)

    def check_result(self, tc: TaskContext, payload: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        """The specialist grounds its own draft; the engine does not take its word for it."""
        try:
            ground_figures(
                str(result.get("narrative", "")),
                inputs.queried_values(dict(payload)),
                tc.policy.variance.grounding_tolerance,
            )
        except UngroundedFigureError as ungrounded:
            raise Escalate(EscalationReason.UNGROUNDED_NARRATIVE, str(ungrounded)) from ungrounded
