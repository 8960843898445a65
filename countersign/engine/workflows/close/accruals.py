"""Period-end accruals: the specialist proposes a journal (GRNI receipts, and the sums certified for the period not
yet invoiced: ADR 0050); approval posts it under a per-attempt key."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.postings import JournalLine, JournalRequest, post_journal
from countersign.engine.workflows.base import TaskContext, TaskHandler
from countersign.engine.workflows.close import inputs


class Accruals(TaskHandler):
    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return await inputs.accruals_input(
            conn, tc.close.book_set_id, tc.close.period, tc.policy, entity=tc.close.entity
        )

    def gate_accounts(self, result: Mapping[str, Any]) -> tuple[str, ...]:
        """The accounts the proposed journal posts to."""
        journal = result.get("journal") or {}
        return tuple(sorted({str(line["account"]) for line in journal.get("lines", []) if "account" in line}))

    def gate_amount(self, result: Mapping[str, Any]) -> Decimal | None:
        return Decimal(str(result["total"])) if result.get("total") is not None else None

    async def complete(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        journal = result.get("journal")
        if not journal:
            return []
        request = JournalRequest(
            idempotency_key=f"close:{tc.close.close_id}:{tc.task.id}:attempt:{tc.attempt}",
            entity=tc.close.entity,
            period=tc.close.period,
            journal_date=date.fromisoformat(journal["date"]),
            memo=journal["memo"],
            lines=[
                JournalLine(line["account"], Decimal(line["amount"]), line["description"]) for line in journal["lines"]
            ],
            source_close=tc.close.close_id,
            source_task=tc.task.id,
        )
        posted = await post_journal(conn, request, posted_by=tc.actor)
        return [f"{tc.task.id}: journal {posted.journal_id} posted ({tc.money(result.get('total'))})"]
