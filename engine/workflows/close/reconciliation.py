"""Reconciliation tasks of the close: bank to ledger, subledgers to control accounts, intercompany pairs."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from engine.workflows.base import TaskContext, TaskHandler
from engine.workflows.close import inputs, queries


class BankReconciliation(TaskHandler):
    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return await inputs.bank_reconciliation_input(conn, tc.close.book_set_id, tc.policy)

    def gate_amount(self, result: Mapping[str, Any]) -> Decimal | None:
        """The unmatched bank amount, summed over accounts, may raise the tier."""
        return sum(
            (abs(Decimal(str(a.get("unmatched_bank_amount", "0")))) for a in result.get("accounts", [])),
            Decimal("0"),
        )

    async def requesters(self, conn: AsyncConnection[Any], tc: TaskContext) -> list[str]:
        """The close's starter and whoever loaded the bank feed the reconciliation read."""
        people = [tc.close.started_by]
        loaded_by = await queries.latest_feed_loader(conn, tc.close.book_set_id)
        if loaded_by is not None:
            people.append(loaded_by)
        return people


class SubledgerReconciliation(TaskHandler):
    def __init__(self, ledger: str) -> None:
        self.ledger = ledger

    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return await inputs.subledger_input(conn, tc.close.book_set_id, tc.policy, self.ledger)


class IntercompanyReconciliation(TaskHandler):
    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return await inputs.intercompany_input(conn, tc.close.book_set_id, tc.policy)
