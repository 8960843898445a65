"""What a workflow task does, as the engine sees it: a handler, registered by name, that the workflow file names.

The orchestrator runs any workflow; everything particular to one task (which rows feed its specialist, which
figure sets its gate tier, which effects approval has) lives in its handler. A handler never changes task or
gate state: it returns data, raises `Escalate`, or applies its effects inside the engine's transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from psycopg import AsyncConnection

from countersign.cards.targets import ChannelTarget
from countersign.engine.runs import CloseRecord
from countersign.money.formatting import DEFAULT_LOCALE, format_money
from countersign.policy import AlwaysHumanEvent, EscalationReason, Policy, WorkflowTask

if TYPE_CHECKING:
    from countersign.engine.close_session import CloseSession
    from countersign.engine.dispatch import SpecialistCall


@dataclass(frozen=True)
class TaskContext:
    """One attempt of one task of one close, with the policy it runs under."""

    close: CloseRecord
    task: WorkflowTask
    attempt: int
    policy: Policy
    actor: str
    escalation: EscalationReason | None = None
    """The reason this task was escalated earlier, if it was: a person has looked at it, and its gate stays at least
    the escalation tier. A handler that escalates for a reason does not escalate again for the same one."""
    locale: str = DEFAULT_LOCALE
    """The CLDR locale the amounts in the task's texts for people are written in (COUNTERSIGN_LOCALE)."""
    channels: tuple[ChannelTarget, ...] = ()
    """The chat channels the close's cards and notices go to."""

    @property
    def currency(self) -> str:
        """The close's currency: its entity's functional currency (risk.yaml `entities`), else the policy's."""
        return self.policy.entity(self.close.entity).currency

    def money(self, amount: Decimal | str | None) -> str:
        """An amount of the close, in its currency and the locale: `"GBP 82,213.52"`."""
        return "—" if amount is None else format_money(Decimal(str(amount)), self.currency, locale=self.locale)


class Escalate(Exception):
    """The work cannot go on without a person: a typed reason and the detail a person needs."""

    def __init__(self, reason: EscalationReason, detail: str) -> None:
        if not isinstance(reason, EscalationReason):
            raise TypeError(f"an escalation needs an EscalationReason, got {reason!r}")
        if not detail.strip():
            raise ValueError("an escalation must say what a person should look at")
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


class UnknownHandler(LookupError):
    def __init__(self, workflow: str, task: str, handler: str) -> None:
        super().__init__(f"workflow {workflow!r} task {task!r} names handler {handler!r}, which is not registered")
        self.workflow = workflow
        self.task = task
        self.handler = handler


class TaskHandler:
    """Defaults for a task: no effects, no amount, the close's starter as the only requester."""

    #: the escalation a specialist's bare `halted: true` means for this task
    halt_escalation: EscalationReason = EscalationReason.ANOMALY_OVER_TOLERANCE

    async def specialist_input(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        """The message for the task's specialist, built from the database (specialist tasks only)."""
        raise NotImplementedError(f"{type(self).__name__} builds no specialist input")

    async def prepared_input(self, session: CloseSession, call: SpecialistCall, tc: TaskContext) -> dict[str, Any]:
        """The message for the task's specialist when building it may call the specialist first (a bank
        reconciliation too large for one message sends its pages: docs/adr/0041); by default `specialist_input`."""
        return await self.specialist_input(session.conn, tc)

    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        """The result of a task without a specialist, computed by the engine itself."""
        raise NotImplementedError(f"{type(self).__name__} computes nothing itself")

    def check_result(self, tc: TaskContext, payload: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        """Check a specialist's result against what it was given; raise `Escalate` when it does not hold."""

    def halt_reason(self, result: Mapping[str, Any]) -> EscalationReason:
        """The typed reason of a halted result: the specialist's own `escalation` if valid, else the default."""
        named = result.get("escalation")
        if named is None:
            return self.halt_escalation
        try:
            return EscalationReason(str(named))
        except ValueError:
            known = ", ".join(reason.value for reason in EscalationReason)
            raise ValueError(f"specialist named unknown escalation reason {named!r} (known: {known})") from None

    def gate_amount(self, result: Mapping[str, Any]) -> Decimal | None:
        """The amount that may raise the gate's tier, if the task has one."""
        return None

    def gate_findings(self, result: Mapping[str, Any]) -> int:
        """How many findings (violated rules, holds) the result carries; any raises the gate to the findings tier."""
        return 0

    def gate_accounts(self, result: Mapping[str, Any]) -> tuple[str, ...]:
        """The ledger accounts the result reports on or posts to: an always-human one (risk.yaml `always_human`)
        sends the result to a person whatever its amount."""
        return ()

    async def gate_events(
        self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]
    ) -> list[tuple[AlwaysHumanEvent, str]]:
        """Events in the books the result covers that policy may send to a person whatever the amount (a change to a
        supplier's bank details), each with what a person recognises it by."""
        return []

    def gate_due_by(self, result: Mapping[str, Any]) -> datetime | None:
        """The latest the task's gate may fall due, when a deadline outside the policy binds it (a legal notice
        period); the gate falls due at the earlier of this and the policy's due time, and is escalated when overdue."""
        return None

    async def rejected(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        """Effects a rejection of the task's approval gate has (a notice the law requires), in the engine's
        transaction; one line per effect for the report."""
        return []

    async def requesters(self, conn: AsyncConnection[Any], tc: TaskContext) -> list[str]:
        """Who asked for this work; separation of duties refuses their approval of it."""
        return [tc.close.started_by]

    async def complete(self, conn: AsyncConnection[Any], tc: TaskContext, result: Mapping[str, Any]) -> list[str]:
        """Apply the task's effects in the engine's transaction; return one line per effect for the report."""
        return []

    def gate_summary(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """What the approver needs to see on the card, trimmed to card size."""
        return card_summary(result)


Handlers = Mapping[str, TaskHandler]


def card_summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """The figures and evidence of a result that a gate card shows (countersign/cards/evidence.py reads these keys)."""
    summary: dict[str, Any] = {"kind": result.get("kind")}
    if "accounts" in result:
        summary["accounts"] = [
            {
                k: a.get(k)
                for k in ("account", "bank_lines", "gl_lines", "matched", "unmatched_share", "halt", "currency", "fx")
                if k in a or k not in ("currency", "fx")
            }
            for a in result["accounts"]
        ]
    for key in (
        "control_account",
        "control_balance",
        "subledger_total",
        "difference",
        "total",
        "narrative",
        "narrative_source",
        "narrative_flags",
    ):
        if key in result:
            summary[key] = result[key]
    if result.get("journal"):
        summary["journal_lines"] = result["journal"]["lines"][:20]
    if "flagged" in result:
        summary["flagged"] = result["flagged"][:10]
    if "pairs" in result:
        summary["pairs"] = result["pairs"][:10]
    if "tasks" in result:
        summary["tasks"] = result["tasks"]
        summary["journals"] = result.get("journals", [])
    return summary
