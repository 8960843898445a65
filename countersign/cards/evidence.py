"""What a gate's summary shows an approver: figures and evidence lines, the same for Slack and Teams.

Summaries are free-form JSON written by the engine (`countersign/engine/workflows/base.py::card_summary`), so reading
them is
lenient: a missing or odd value is shown as it is (or as "—") rather than stopping the card from rendering. Amounts
are shown with the summary's `currency` (the close's, from the policy), written in the caller's CLDR `locale`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from countersign.cards.formatting import count, money, share_percent
from countersign.policy.wording import in_words
from countersign.states import TaskState


@dataclass(frozen=True)
class Fact:
    label: str
    value: str


@dataclass(frozen=True)
class Evidence:
    title: str
    facts: tuple[Fact, ...] = ()
    lines: tuple[str, ...] = ()
    narrative: str | None = None
    narrative_note: str | None = None  # our words: the narrative is the deterministic one, and why


def halt_reason(summary: Mapping[str, Any]) -> str | None:
    """An escalation gate's summary is `{"reason": ..., "result": <task summary>}`."""
    reason = summary.get("reason")
    return reason if isinstance(reason, str) and reason else None


Money = Callable[[object], str]
_CURRENCY = re.compile(r"[A-Z]{3}")


def summary_currency(summary: Mapping[str, Any], default: str | None = None) -> str | None:
    """The ISO code a summary's amounts are in (`summary.currency`), or `default` when it names none."""
    currency = summary.get("currency")
    return currency if isinstance(currency, str) and _CURRENCY.fullmatch(currency) else default


def evidence_for(
    summary: Mapping[str, Any], *, locale: str | None = None, currency: str | None = None
) -> tuple[Evidence, ...]:
    """The evidence a summary shows; amounts in the summary's currency (else `currency`), written in `locale`; last,
    the exchange rate its amount was compared with the thresholds at, when it was converted."""
    return (*_evidence(summary, locale=locale, currency=currency), *_conversion(summary))


def _evidence(summary: Mapping[str, Any], *, locale: str | None, currency: str | None) -> tuple[Evidence, ...]:
    currency = summary_currency(summary, currency)
    result = summary.get("result")
    if isinstance(result, Mapping):
        return _evidence(result, locale=locale, currency=currency)

    def amount(value: object) -> str:
        return money(value, currency, locale=locale)

    kind = summary.get("kind")
    if kind == "signoff" or "tasks" in summary:
        return _signoff(summary, amount)
    if kind == "bank" or "accounts" in summary:
        return (_bank(summary),)
    if kind == "subledger" or "control_account" in summary:
        return (_subledger(summary, amount),)
    if kind == "intercompany" or "pairs" in summary:
        return (_intercompany(summary, amount),)
    if "flagged" in summary or "narrative" in summary:
        return (_variance(summary, amount),)
    if "journal_lines" in summary or "total" in summary:
        return (_accruals(summary, amount),)
    return _generic(summary)


def _conversion(summary: Mapping[str, Any]) -> tuple[Evidence, ...]:
    """The rate the gate's amount was compared with the thresholds at, when it was converted (`fx_rate`)."""
    fx = summary.get("fx_rate")
    if not isinstance(fx, Mapping):
        return ()
    facts = (
        Fact("Rate", f"1 {_text(fx.get('from_currency'))} = {_text(fx.get('rate'))} {_text(fx.get('to_currency'))}"),
        Fact("Source", f"{_text(fx.get('source'))}, {_text(fx.get('rate_date'))}"),
        Fact("Compared as", f"{_text(fx.get('to_currency'))} {_text(fx.get('converted_amount'))}"),
    )
    return (Evidence("Exchange rate used", facts=facts),)


def _bank(summary: Mapping[str, Any]) -> Evidence:
    accounts = _objects(summary.get("accounts"))
    lines: list[str] = []
    bank_total = 0
    unmatched_total = 0
    for account in accounts:
        bank = count(account.get("bank_lines"))
        matched = count(account.get("matched"))
        gl = count(account.get("gl_lines"))
        name = _text(account.get("account"))
        if bank is None or matched is None:
            line = f"Account {name}: bank lines {_text(bank)}, matched {_text(matched)}"
        else:
            unmatched = max(bank - matched, 0)
            bank_total += bank
            unmatched_total += unmatched
            line = f"Account {name}: {unmatched} of {bank} bank lines unmatched, {matched} matched"
            if "unmatched_share" in account:
                line += f" ({share_percent(account.get('unmatched_share'))} unmatched)"
        if gl is not None:
            line += f"; {gl} GL lines"
        if account.get("halt") is True:
            line += " — over tolerance"
        if isinstance(account.get("currency"), str):
            line += f" (matched in {account['currency']})"
        lines.append(line)
        fx = account.get("fx")
        if isinstance(fx, Mapping) and isinstance(fx.get("note"), str):
            lines.append(f"Account {name}, exchange difference: {fx['note']}")
    facts = (
        Fact("Accounts", str(len(accounts))),
        Fact("Bank lines", str(bank_total)),
        Fact("Unmatched bank lines", str(unmatched_total)),
    )
    return Evidence("Bank accounts", facts=facts, lines=tuple(lines))


def _subledger(summary: Mapping[str, Any], money: Money) -> Evidence:
    facts = (
        Fact("Control account", _text(summary.get("control_account"))),
        Fact("Control balance", money(summary.get("control_balance"))),
        Fact("Subledger total", money(summary.get("subledger_total"))),
        Fact("Difference", money(summary.get("difference"))),
    )
    return Evidence("Control account against subledger", facts=facts)


def _intercompany(summary: Mapping[str, Any], money: Money) -> Evidence:
    pairs = _objects(summary.get("pairs"))
    lines: list[str] = []
    outside = 0
    for pair in pairs:
        within = pair.get("within_tolerance")
        if within is False:
            outside += 1
        line = (
            f"{_text(pair.get('counterparty'))} on {_text(pair.get('account'))}: "
            f"ours {money(pair.get('our_balance'))}, theirs {money(pair.get('their_balance'))}, "
            f"difference {money(pair.get('difference'))}"
        )
        if within is True:
            line += " — within tolerance"
        elif within is False:
            line += " — outside tolerance"
        lines.append(line)
    facts = (Fact("Pairs", str(len(pairs))), Fact("Outside tolerance", str(outside)))
    return Evidence("Intercompany pairs", facts=facts, lines=tuple(lines))


def _variance(summary: Mapping[str, Any], money: Money) -> Evidence:
    flagged = _objects(summary.get("flagged"))
    lines: list[str] = []
    for line in flagged:
        pct = line.get("variance_budget_pct")
        percent = "no budget" if pct is None else f"{_text(pct)}% of budget"
        lines.append(
            f"{_text(line.get('account'))} {_text(line.get('name'))}: actual {money(line.get('actual'))} "
            f"against budget {money(line.get('budget'))}, variance {money(line.get('variance_budget'))} ({percent})"
        )
    narrative = summary.get("narrative")
    return Evidence(
        "Flagged variance lines",
        facts=(Fact("Flagged lines", str(len(flagged))),),
        lines=tuple(lines),
        narrative=narrative if isinstance(narrative, str) and narrative else None,
        narrative_note=narrative_note(summary),
    )


NARRATIVE_FALLBACK_NOTE = "Deterministic narrative, flagged for review: the model's was not used"
MODEL_NOT_ASKED_NOTE = (
    "Deterministic narrative, flagged for review: not written by the model, which this attempt did not ask "
    "after a person approved its escalation"
)
# Flags a specialist sets when the engine told it not to ask the model
# (countersign.specialists.narration.MODEL_OFF_REASONS).
MODEL_NOT_ASKED_FLAGS = frozenset({"no_recorded_response_fallback", "budget_exhausted_fallback"})
_GUARD_FLAG = re.compile(r"[a-z][a-z_]{0,62}_(?:fallback|escalation)")


def narrative_note(summary: Mapping[str, Any]) -> str | None:
    """When the narrative is the deterministic fallback: that, and the guard flags that refused the model's
    (only flags of our own shape, `<failure>_fallback`; a flag carrying anything else is not shown). When the model
    was not asked at all (an approved escalation, docs/adr/0036), the note says so."""
    if summary.get("narrative_source") != "fallback":
        return None
    flags = summary.get("narrative_flags")
    named = [f for f in flags if isinstance(f, str) and _GUARD_FLAG.fullmatch(f)] if isinstance(flags, list) else []
    note = MODEL_NOT_ASKED_NOTE if MODEL_NOT_ASKED_FLAGS & set(named) else NARRATIVE_FALLBACK_NOTE
    return f"{note} ({', '.join(named)})" if named else f"{note}."


def _accruals(summary: Mapping[str, Any], money: Money) -> Evidence:
    journal_lines = _objects(summary.get("journal_lines"))
    lines = tuple(
        f"{_text(line.get('account'))}  {money(line.get('amount'))}  {_text(line.get('description'))}"
        for line in journal_lines
    )
    facts = (Fact("Total accrued", money(summary.get("total"))), Fact("Journal lines", str(len(journal_lines))))
    return Evidence("Accrual journal", facts=facts, lines=lines)


def _signoff(summary: Mapping[str, Any], money: Money) -> tuple[Evidence, ...]:
    tasks = _objects(summary.get("tasks"))
    task_lines = tuple(
        f"{_text(t.get('title') or t.get('task'))}: {_words(t.get('status'))} (attempt {_text(t.get('attempt'))})"
        for t in tasks
    )
    done = sum(1 for t in tasks if t.get("status") == TaskState.DONE)
    journals = _objects(summary.get("journals"))
    journal_lines = tuple(
        f"Journal {_text(j.get('journal_id'))}: {_text(j.get('memo'))} — debits {money(j.get('debits'))}"
        for j in journals
    )
    return (
        Evidence("Close tasks", facts=(Fact("Tasks done", f"{done} of {len(tasks)}"),), lines=task_lines),
        Evidence("Journals posted", facts=(Fact("Journals", str(len(journals))),), lines=journal_lines),
    )


def _generic(summary: Mapping[str, Any]) -> tuple[Evidence, ...]:
    facts = tuple(
        Fact(str(key), _text(value))
        for key, value in summary.items()
        if key not in ("kind", "currency") and (value is None or isinstance(value, str | int | float | bool))
    )
    return (Evidence("Figures", facts=facts),) if facts else ()


def _objects(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _words(value: object) -> str:
    return in_words(value) if isinstance(value, str) else _text(value)


def _text(value: object) -> str:
    if value is None:
        return "—"
    return str(value)
