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
from countersign.store import journals


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
        steps = await self._reverse_earlier_attempts(conn, tc)
        journal = result.get("journal")
        if not journal:
            return steps
        request = JournalRequest(
            idempotency_key=self._key(tc, tc.attempt),
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
        return [*steps, f"{tc.task.id}: journal {posted.journal_id} posted ({tc.money(result.get('total'))})"]

    @staticmethod
    def _key(tc: TaskContext, attempt: int) -> str:
        return f"close:{tc.close.close_id}:{tc.task.id}:attempt:{attempt}"

    async def _reverse_earlier_attempts(self, conn: AsyncConnection[Any], tc: TaskContext) -> list[str]:
        """An earlier attempt posted only if its gate was approved; it runs again only when a later change voided that
        sign-off (docs/adr/0046). Its journal is reversed, once, so the new approval's journal replaces it."""
        steps = []
        for attempt in range(1, tc.attempt):
            earlier = await journals.posted_journal(conn, self._key(tc, attempt))
            if earlier is None:
                continue
            reversal = JournalRequest(
                idempotency_key=f"{self._key(tc, attempt)}:reversed",
                entity=tc.close.entity,
                period=tc.close.period,
                journal_date=earlier.journal_date,
                memo=f"Reversal of journal {earlier.journal_id} ({earlier.memo}): its sign-off was voided"[:500],
                lines=[JournalLine(line.account, -line.amount, line.description) for line in earlier.lines],
                source_close=tc.close.close_id,
                source_task=tc.task.id,
            )
            posted = await post_journal(conn, reversal, posted_by=tc.actor)
            steps.append(
                f"{tc.task.id}: journal {earlier.journal_id} of attempt {attempt} reversed by {posted.journal_id}"
            )
        return steps
