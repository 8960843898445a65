"""A gate's evidence as typed rows: the pieces of `gate.summary` (and of a task's result, which has the same shape)
that the Close Board shows. Pure: no I/O.

Summaries are free-form JSON the engine writes, so reading is lenient: a figure that is not a decimal is None (shown
as a dash), a piece that is missing is None or empty, never a guess. An escalation gate's summary wraps its task's
as `{"reason": ..., "escalation": <code>, "result": {...}}`; `task_summary` unwraps it. A payment certificate is
read strictly by countersign/cards/certificates.py instead, because an approver must never see a guessed amount.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from countersign.states import TaskState

MAX_ROWS = 500  # rows of any one table shown from a summary


def decimal_or_none(value: object) -> Decimal | None:
    """`"82213.52"` -> `Decimal("82213.52")`; anything that is not a finite decimal (a float included) -> None."""
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _objects(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [item for item in value[:MAX_ROWS] if isinstance(item, Mapping)]


def _texts(value: object) -> tuple[str, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return ()
    return tuple(item for item in value[:MAX_ROWS] if isinstance(item, str))


def task_summary(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """The task's own summary: an escalation gate's `result`, else the summary itself."""
    result = summary.get("result")
    return result if isinstance(result, Mapping) else summary


@dataclass(frozen=True)
class Escalation:
    """Why work halted for a person: the reason's code (words via countersign.policy.wording) and the task's own
    sentence."""

    code: str | None
    reason: str | None


def escalation_of(summary: Mapping[str, Any]) -> Escalation | None:
    code, reason = summary.get("escalation"), summary.get("reason")
    if not isinstance(code, str) and not isinstance(reason, str):
        return None
    return Escalation(code if isinstance(code, str) and code else None, reason if isinstance(reason, str) else None)


@dataclass(frozen=True)
class BankAccountCheck:
    account: str
    bank_lines: int | None
    gl_lines: int | None
    matched: int | None
    unmatched_share: Decimal | None  # 0..1
    halt: bool


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def bank_accounts(summary: Mapping[str, Any]) -> tuple[BankAccountCheck, ...]:
    """The bank reconciliation's accounts (empty for any other summary)."""
    body = task_summary(summary)
    if body.get("kind") not in ("bank", None) or "accounts" not in body:
        return ()
    return tuple(
        BankAccountCheck(
            account=_text(a.get("account")),
            bank_lines=_count(a.get("bank_lines")),
            gl_lines=_count(a.get("gl_lines")),
            matched=_count(a.get("matched")),
            unmatched_share=decimal_or_none(a.get("unmatched_share")),
            halt=a.get("halt") is True,
        )
        for a in _objects(body.get("accounts"))
    )


@dataclass(frozen=True)
class ProposedLine:
    account: str
    amount: Decimal | None
    description: str


@dataclass(frozen=True)
class ProposedJournal:
    lines: tuple[ProposedLine, ...]
    total: Decimal | None


def proposed_journal(summary: Mapping[str, Any]) -> ProposedJournal | None:
    """The journal a task proposes (accruals), as the approver saw it; None when the summary proposes none."""
    body = task_summary(summary)
    if "journal_lines" not in body:
        return None
    lines = tuple(
        ProposedLine(_text(line.get("account")), decimal_or_none(line.get("amount")), _text(line.get("description")))
        for line in _objects(body.get("journal_lines"))
    )
    return ProposedJournal(lines, decimal_or_none(body.get("total")))


@dataclass(frozen=True)
class VarianceRow:
    account: str
    name: str
    actual: Decimal | None
    budget: Decimal | None
    prior: Decimal | None
    variance_budget: Decimal | None
    variance_budget_pct: Decimal | None
    variance_prior: Decimal | None


@dataclass(frozen=True)
class VarianceTable:
    rows: tuple[VarianceRow, ...]
    narrative: str | None
    narrative_source: str | None  # "model" or "fallback"
    narrative_flags: tuple[str, ...]


def variance_table(summary: Mapping[str, Any]) -> VarianceTable | None:
    """The flagged accounts against budget and prior period, and the narrative; None for another summary."""
    body = task_summary(summary)
    if "flagged" not in body and "narrative" not in body:
        return None
    rows = tuple(
        VarianceRow(
            account=_text(r.get("account")),
            name=_text(r.get("name")),
            actual=decimal_or_none(r.get("actual")),
            budget=decimal_or_none(r.get("budget")),
            prior=decimal_or_none(r.get("prior")),
            variance_budget=decimal_or_none(r.get("variance_budget")),
            variance_budget_pct=decimal_or_none(r.get("variance_budget_pct")),
            variance_prior=decimal_or_none(r.get("variance_prior")),
        )
        for r in _objects(body.get("flagged"))
    )
    narrative = body.get("narrative")
    source = body.get("narrative_source")
    return VarianceTable(
        rows,
        narrative if isinstance(narrative, str) and narrative else None,
        source if isinstance(source, str) else None,
        _texts(body.get("narrative_flags")),
    )


@dataclass(frozen=True)
class IntercompanyPair:
    counterparty: str
    account: str
    our_balance: Decimal | None
    their_balance: Decimal | None
    difference: Decimal | None
    within_tolerance: bool


def intercompany_pairs(summary: Mapping[str, Any]) -> tuple[IntercompanyPair, ...]:
    body = task_summary(summary)
    return tuple(
        IntercompanyPair(
            counterparty=_text(p.get("counterparty")),
            account=_text(p.get("account")),
            our_balance=decimal_or_none(p.get("our_balance")),
            their_balance=decimal_or_none(p.get("their_balance")),
            difference=decimal_or_none(p.get("difference")),
            within_tolerance=p.get("within_tolerance") is True,
        )
        for p in _objects(body.get("pairs"))
    )


@dataclass(frozen=True)
class SignoffTask:
    task: str
    title: str
    status: TaskState
    attempt: int | None


class SummaryWordUnknown(ValueError):
    """A summary names a state no Enum in countersign.states names: it is refused, never shown as a guess."""

    def __init__(self, field: str, value: object, allowed: Sequence[str]) -> None:
        super().__init__(f"sign-off summary: {field}: expected one of {tuple(allowed)}, got {value!r}")
        self.field = field
        self.value = value


def _task_state(value: object, field: str) -> TaskState:
    """A sign-off task's status: the word `close_task.status` stored, as its TaskState."""
    if isinstance(value, str) and value in _TASK_WORDS:
        return TaskState(value)
    raise SummaryWordUnknown(field, value, _TASK_WORDS)


_TASK_WORDS = tuple(state.value for state in TaskState)


@dataclass(frozen=True)
class SignoffJournal:
    journal_id: int | None
    memo: str
    debits: Decimal | None


@dataclass(frozen=True)
class Signoff:
    tasks: tuple[SignoffTask, ...]
    journals: tuple[SignoffJournal, ...]


def signoff(summary: Mapping[str, Any]) -> Signoff | None:
    """A sign-off gate's view of the close: every task's status and the journals posted; None for another gate.

    A task's status is the TaskState its word names; a word no TaskState names raises SummaryWordUnknown."""
    body = task_summary(summary)
    if body.get("kind") != "signoff":
        return None
    return Signoff(
        tuple(
            SignoffTask(
                _text(t.get("task")),
                _text(t.get("title")),
                _task_state(t.get("status"), f"tasks[{i}].status"),
                _count(t.get("attempt")),
            )
            for i, t in enumerate(_objects(body.get("tasks")))
        ),
        tuple(
            SignoffJournal(_count(j.get("journal_id")), _text(j.get("memo")), decimal_or_none(j.get("debits")))
            for j in _objects(body.get("journals"))
        ),
    )
