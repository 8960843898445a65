"""Reconciliation tasks of the close: bank to ledger, subledgers to control accounts, intercompany pairs."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.close_session import CloseSession
from countersign.engine.dispatch import SpecialistCall
from countersign.engine.workflows.base import Escalate, TaskContext, TaskHandler
from countersign.engine.workflows.close import bank_pages, inputs, queries
from countersign.policy import AlwaysHumanEvent, EscalationReason


class BankReconciliation(TaskHandler):
    def __init__(self, page_lines: int = bank_pages.PAGE_LINES, *, force_pages: bool = False) -> None:
        self.page_lines = page_lines
        self.force_pages = force_pages

    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return await inputs.bank_reconciliation_input(conn, tc.close.book_set_id, tc.policy)

    async def prepared_input(self, session: CloseSession, call: SpecialistCall, tc: TaskContext) -> dict[str, Any]:
        """The whole payload when the cash lines fit one page; else pages first, then the closing message."""
        return await bank_pages.paged_input(session, call, tc, page_lines=self.page_lines, force_pages=self.force_pages)

    def check_result(self, tc: TaskContext, payload: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        """A foreign account's currency and exchange explanation come back exactly as the engine sent them."""
        sent = {entry["account"]: entry for entry in payload.get("accounts", [])}
        for entry in result.get("accounts", []):
            original = sent.get(entry.get("account"), {})
            for key in ("currency", "fx"):
                if entry.get(key) != original.get(key):
                    raise Escalate(
                        EscalationReason.CONTRADICTORY_EVIDENCE,
                        f"account {entry.get('account')}: the specialist returned {key} {entry.get(key)!r}, "
                        f"not the {original.get(key)!r} the books give",
                    )

    def gate_accounts(self, result: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(str(entry["account"]) for entry in result.get("accounts", []) if "account" in entry)

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

    def gate_accounts(self, result: Mapping[str, Any]) -> tuple[str, ...]:
        return (str(result["control_account"]),) if result.get("control_account") else ()

    async def gate_events(
        self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]
    ) -> list[tuple[AlwaysHumanEvent, str]]:
        """Payables: every change to a supplier's bank details the books show (the fraud that redirects a payment)."""
        if self.ledger != "ap":
            return []
        return [
            (
                AlwaysHumanEvent.SUPPLIER_BANK_DETAILS_CHANGED,
                f"{change.vendor}, {change.changed_on.isoformat()}, by {change.changed_by}",
            )
            for change in await inputs.supplier_bank_changes(conn, tc.close.book_set_id)
        ]


class IntercompanyReconciliation(TaskHandler):
    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        return await inputs.intercompany_input(conn, tc.close.book_set_id, tc.policy)

    def gate_accounts(self, result: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(sorted({str(pair["account"]) for pair in result.get("pairs", []) if "account" in pair}))
