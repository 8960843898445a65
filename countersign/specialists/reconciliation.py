"""Reconciliation specialist: bank matching, subledger-to-control and intercompany agreement.

The matching and the halt are deterministic (`handle`). A bank reconciliation arrives whole (`bank`: every line of
every cash account in one message) or, for books too large for one message, in pages (docs/adr/0041): each
`bank_page` holds whole matching groups of the lines the engine's exact one-to-one pass left, and a closing
`bank_pages` message carries the accounts' totals, the pages' figures and the first unmatched lines.

`handle_with_model` adds, to a halted bank reconciliation, an explanation of why the lines did not match, written by
a model behind the narration guards (bank references and memos reach it only as quoted data), with a deterministic
explanation as its fallback.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import anyio.to_thread

from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.grounding import extract_figures
from countersign.specialists.narration import SOURCE_FALLBACK, NarrationEscalation, Narrator, model_off, narrate
from countersign.specialists.wire import unpack_rows

_MONEY_PATTERN = re.compile(r"-?[0-9]+(?:\.[0-9]{1,2})?")
_SHARE_PATTERN = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_DATE_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_CENT = Decimal("0.01")
_SHARE_PLACES = Decimal("0.0001")
EXPLANATION_TEMPLATE = "bank_halt_explanation"
# Figures in the explanation are quoted values (amounts, counts, date parts), so they must match exactly.
EXPLANATION_TOLERANCE = Decimal(0)
EXPLANATION_MAX_TOKENS = 1024
# Seventeen unmatched lines make a prompt of about 1,500 tokens; the retry resends it with the first answer.
EXPLANATION_TOKEN_CEILING = 8000
_QUOTED_TEXT_FIELDS = ("reference", "memo", "description")


@dataclass(frozen=True, slots=True)
class CashLine:
    """One bank statement line or GL cash line, as the matcher sees it."""

    id: str
    date: dt.date
    amount: Decimal
    reference: str


@dataclass(frozen=True)
class MatchResult:
    matches: list[tuple[str, str]]
    """(bank_id, gl_id) pairs in processing order (bank lines sorted by date, then id)."""
    unmatched_bank: list[str]
    unmatched_gl: list[str]


def normalise_reference(reference: str) -> str:
    return reference.strip().casefold()


def match_bank_lines(bank: Sequence[CashLine], gl: Sequence[CashLine], window_days: int) -> MatchResult:
    """One-to-one matching on equal amount, equal normalised reference and |bank date - GL date| <= window.

    Bank lines are taken in (date, id) order; each takes the eligible unused GL line with the smallest date
    distance, then the smallest id. GL lines are indexed by (amount, normalised reference), so the cost is
    linear in the number of lines for realistic data.
    """
    if window_days < 0:
        raise ValueError(f"window_days must be >= 0, got {window_days}")
    index: dict[tuple[Decimal, str], list[tuple[int, str]]] = {}
    for line in gl:
        index.setdefault((line.amount, normalise_reference(line.reference)), []).append(
            (line.date.toordinal(), line.id)
        )
    matched_gl: set[str] = set()
    matches: list[tuple[str, str]] = []
    unmatched_bank: list[str] = []
    for line in sorted(bank, key=lambda b: (b.date, b.id)):
        candidates = index.get((line.amount, normalise_reference(line.reference)))
        best: tuple[int, str] | None = None
        best_position = -1
        if candidates:
            bank_day = line.date.toordinal()
            for position, (gl_day, gl_id) in enumerate(candidates):
                distance = abs(bank_day - gl_day)
                if distance <= window_days and (best is None or (distance, gl_id) < best):
                    best = (distance, gl_id)
                    best_position = position
        if best is None or candidates is None:
            unmatched_bank.append(line.id)
            continue
        candidates.pop(best_position)
        matched_gl.add(best[1])
        matches.append((line.id, best[1]))
    unmatched_gl = [line.id for line in sorted(gl, key=lambda g: (g.date, g.id)) if line.id not in matched_gl]
    return MatchResult(matches=matches, unmatched_bank=unmatched_bank, unmatched_gl=unmatched_gl)


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(payload, Mapping):
        raise SpecialistInputError("payload", f"expected an object, got {type(payload).__name__}")
    kind = payload.get("kind")
    handlers: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
        "bank": _bank,
        "bank_page": _bank_page,
        "bank_pages": _bank_pages,
        "subledger": _subledger,
        "intercompany": _intercompany,
    }
    if not isinstance(kind, str) or kind not in handlers:
        raise SpecialistInputError("kind", f"expected one of {', '.join(handlers)}, got {kind!r}")
    return handlers[kind](payload)


async def handle_with_model(payload: dict[str, Any], narrator: Narrator) -> dict[str, Any]:
    """`handle`, plus a model-written explanation of a bank halt; the halt itself stays deterministic.

    A narration escalation (a bound, no recorded response, a provider failure) keeps the halt and its reason, ships
    the deterministic explanation and names the escalation as the result's `escalation`. On the attempt after a
    person approved such an escalation (`model_off` in the payload), the model is not asked: the deterministic
    explanation ships, flagged `<reason>_fallback`, and the halt keeps its own reason (`anomaly_over_tolerance`).
    """
    off = model_off(payload)
    result = await anyio.to_thread.run_sync(handle, payload)
    if result.get("kind") != "bank" or not result.get("halted"):
        return result
    unmatched = _unmatched_bank_lines(payload, result)
    facts, quoted, allowed = explanation_inputs(payload, result, unmatched)
    fallback = draft_explanation(result, unmatched)
    limits = replace(narrator.limits, max_tokens=max(narrator.limits.max_tokens, EXPLANATION_TOKEN_CEILING))
    try:
        narration = await narrate(
            narrator.provider,
            template=narrator.template(EXPLANATION_TEMPLATE),
            model=narrator.model,
            facts=facts,
            quoted=quoted,
            allowed_values=allowed,
            tolerance=EXPLANATION_TOLERANCE,
            fallback=fallback,
            limits=limits,
            guards=narrator.guards,
            max_tokens=EXPLANATION_MAX_TOKENS,
            off=off,
        )
    except NarrationEscalation as escalation:
        return {
            **result,
            "escalation": escalation.reason,
            "explanation": fallback,
            "explanation_source": SOURCE_FALLBACK,
            "explanation_flags": [f"{escalation.reason}_escalation"],
            "explanation_escalation": escalation.detail,
            "model_steps": [dict(step) for step in escalation.steps],
        }
    return {
        **result,
        "explanation": narration.text,
        "explanation_source": narration.source,
        "explanation_flags": list(narration.flags),
        "explanation_model": narration.model,
        "explanation_template_hash": narration.template_hash,
        "model_steps": [dict(step) for step in narration.steps],
        # Guards off (the eval's negative control only): whatever else the model said reaches the result.
        **narration.extra,
    }


@dataclass(frozen=True)
class UnmatchedBankLine:
    account: str
    line: CashLine
    quoted: Mapping[str, str]  # the line's book text (reference, memo), as given
    gl_has_equal_amount: bool


def _unmatched_bank_lines(payload: Mapping[str, Any], result: Mapping[str, Any]) -> list[UnmatchedBankLine]:
    """The unmatched bank lines of every halted account, in the matcher's (date, id) order."""
    halted = {entry["account"]: entry for entry in result["accounts"] if entry["halt"]}
    if payload.get("kind") == "bank_pages":
        return _listed_unmatched_lines(payload, halted)
    lines: list[UnmatchedBankLine] = []
    for position, raw in enumerate(_list(payload, "accounts", "accounts")):
        entry = _object(raw, f"accounts[{position}]")
        account = _text(entry, "account", f"accounts[{position}].account")
        if account not in halted:
            continue
        field = f"accounts[{position}]"
        bank = {line.id: line for line in _cash_lines(entry, "bank_lines", f"{field}.bank_lines")}
        gl_amounts = {line.amount for line in _cash_lines(entry, "gl_lines", f"{field}.gl_lines")}
        raw_bank = {str(item.get("id")): item for item in _list(entry, "bank_lines", f"{field}.bank_lines")}
        for line_id in halted[account]["unmatched_bank"]:
            item = raw_bank[line_id]
            quoted = {key: item[key] for key in _QUOTED_TEXT_FIELDS if isinstance(item.get(key), str) and item[key]}
            line = bank[line_id]
            lines.append(UnmatchedBankLine(account, line, quoted, line.amount in gl_amounts))
    return lines


def _listed_unmatched_lines(
    payload: Mapping[str, Any], halted: Mapping[str, Mapping[str, Any]]
) -> list[UnmatchedBankLine]:
    """A paged reconciliation's listed unmatched bank lines of every halted account (the engine lists the first
    LISTED_LINES in the matcher's order, each with whether the ledger has a line of equal amount)."""
    lines: list[UnmatchedBankLine] = []
    for position, raw in enumerate(_list(payload, "accounts", "accounts")):
        entry = _object(raw, f"accounts[{position}]")
        account = _text(entry, "account", f"accounts[{position}].account")
        if account not in halted:
            continue
        field = f"accounts[{position}].unmatched_bank_lines"
        raw_lines = _list(entry, "unmatched_bank_lines", field)
        for line, item in zip(_cash_lines(entry, "unmatched_bank_lines", field), raw_lines, strict=True):
            quoted = {key: item[key] for key in _QUOTED_TEXT_FIELDS if isinstance(item.get(key), str) and item[key]}
            lines.append(UnmatchedBankLine(account, line, quoted, item.get("ledger_has_equal_amount") is True))
    return lines


def _unmatched_count(entry: Mapping[str, Any]) -> int:
    """An account result's unmatched bank lines: every bank line the matcher did not pair (its `unmatched_bank`
    lists them all for a whole reconciliation, the first LISTED_LINES for a paged one)."""
    return int(entry["bank_lines"]) - int(entry["matched"])


def explanation_inputs(
    payload: Mapping[str, Any], result: Mapping[str, Any], unmatched: Sequence[UnmatchedBankLine]
) -> tuple[dict[str, Any], list[str], list[Decimal]]:
    """Facts (numbers and ids), quoted book text, and the values the explanation may cite."""
    quoted: list[str] = []
    allowed: list[Decimal] = []
    accounts: list[dict[str, Any]] = []
    tolerance = Decimal(str(payload["unmatched_tolerance"]))
    for entry in result["accounts"]:
        if not entry["halt"]:
            continue
        lines = []
        for item in (line for line in unmatched if line.account == entry["account"]):
            pointers: dict[str, str] = {}
            for key, text in item.quoted.items():
                pointers[key] = f"data[{len(quoted)}]"
                quoted.append(text)
                allowed.extend(figure.value for figure in extract_figures(text))
            date = item.line.date
            allowed.extend([item.line.amount, Decimal(date.year), Decimal(date.month), Decimal(date.day)])
            lines.append(
                {
                    "id": item.line.id,
                    "date": date.isoformat(),
                    "amount": str(item.line.amount),
                    "ledger_has_equal_amount": item.gl_has_equal_amount,
                    **pointers,
                }
            )
        unmatched_count = _unmatched_count(entry)
        allowed.extend(
            [Decimal(entry[key]) for key in ("bank_lines", "gl_lines", "matched")] + [Decimal(unmatched_count)]
        )
        if unmatched_count > len(lines):
            allowed.append(Decimal(unmatched_count - len(lines)))
        allowed.extend(figure.value for figure in extract_figures(entry["account"]))
        allowed.append(Decimal(entry["unmatched_bank_amount"]))
        accounts.append(
            {
                "account": entry["account"],
                "bank_lines": entry["bank_lines"],
                "ledger_lines": entry["gl_lines"],
                "unmatched_bank_lines": unmatched_count,
                "matched": entry["matched"],
                "unmatched_bank_amount": entry["unmatched_bank_amount"],
                "unmatched_lines": lines,
            }
        )
    allowed.extend([tolerance * 100, Decimal(_non_negative_int(payload, "date_window_days", "date_window_days"))])
    facts = {
        "date_window_days": payload["date_window_days"],
        "unmatched_tolerance_percent": _format_percent(tolerance),
        "halted_accounts": accounts,
    }
    return facts, quoted, allowed


def draft_explanation(result: Mapping[str, Any], unmatched: Sequence[UnmatchedBankLine]) -> str:
    """The deterministic explanation: per halted account, the count and each unmatched line."""
    paragraphs = []
    for entry in result["accounts"]:
        if not entry["halt"]:
            continue
        described = [
            f"{item.line.id} on {item.line.date.isoformat()} for {_format_money(item.line.amount)}"
            + (f" (reference {item.quoted['reference']})" if "reference" in item.quoted else "")
            for item in unmatched
            if item.account == entry["account"]
        ]
        unlisted = _unmatched_count(entry) - len(described)
        paragraphs.append(
            f"Account {entry['account']}: {_unmatched_count(entry)} of {entry['bank_lines']} bank lines found "
            "no ledger line with the same amount and reference within the date window. Unmatched: "
            + "; ".join(described)
            + (f"; and {unlisted} more" if unlisted > 0 else "")
            + "."
        )
    return "\n".join(paragraphs)


# --- bank -------------------------------------------------------------------------------------------------


def _bank(payload: Mapping[str, Any]) -> dict[str, Any]:
    window_days = _non_negative_int(payload, "date_window_days", "date_window_days")
    tolerance = _share(payload, "unmatched_tolerance", "unmatched_tolerance")
    accounts = _list(payload, "accounts", "accounts")
    seen_accounts: set[str] = set()
    results: list[dict[str, Any]] = []
    all_matches: list[list[str]] = []
    reasons: list[str] = []
    for position, raw in enumerate(accounts):
        field = f"accounts[{position}]"
        entry = _object(raw, field)
        account = _text(entry, "account", f"{field}.account")
        if account in seen_accounts:
            raise SpecialistInputError(f"{field}.account", f"duplicate account {account!r}")
        seen_accounts.add(account)
        bank = _cash_lines(entry, "bank_lines", f"{field}.bank_lines")
        gl = _cash_lines(entry, "gl_lines", f"{field}.gl_lines")
        result = match_bank_lines(bank, gl, window_days)
        unmatched = len(result.unmatched_bank)
        share = Decimal(unmatched) / Decimal(len(bank)) if bank else Decimal(0)
        halt = Decimal(unmatched) > tolerance * Decimal(len(bank))
        unmatched_ids = set(result.unmatched_bank)
        unmatched_amount = sum((line.amount for line in bank if line.id in unmatched_ids), Decimal(0))
        results.append(
            {
                "account": account,
                "bank_lines": len(bank),
                "gl_lines": len(gl),
                "matched": len(result.matches),
                "unmatched_bank": result.unmatched_bank,
                "unmatched_gl": result.unmatched_gl,
                "unmatched_share": _format_share(share),
                "unmatched_bank_amount": _format_money(unmatched_amount),
                "halt": halt,
                **_carried(entry, field),
            }
        )
        all_matches.extend([bank_id, gl_id] for bank_id, gl_id in result.matches)
        if halt:
            reasons.append(
                f"account {account}: {unmatched} of {len(bank)} bank lines unmatched "
                f"(tolerance {_format_percent(tolerance)})"
            )
    return {
        "kind": "bank",
        "accounts": results,
        "matches": all_matches,
        "halted": bool(reasons),
        "halt_reason": "; ".join(reasons) if reasons else None,
    }


LISTED_LINES = 200
"""A paged reconciliation lists at most this many unmatched bank lines, and as many unmatched GL line ids, per
account (the first in the matcher's order); it counts and sums them all."""


def _bank_page(payload: Mapping[str, Any]) -> dict[str, Any]:
    """One page: whole matching groups (same account, amount and reference) matched exactly as `_bank` would."""
    window_days = _non_negative_int(payload, "date_window_days", "date_window_days")
    account = _text(payload, "account", "account")
    page = _non_negative_int(payload, "page", "page")
    lines: dict[str, Any] = {}
    for key in ("bank_rows", "gl_rows"):
        try:
            lines[key] = unpack_rows(payload.get(key))
        except ValueError as exc:
            raise SpecialistInputError(key, str(exc)) from None
    bank = _cash_lines(lines, "bank_rows", "bank_rows")
    gl = _cash_lines(lines, "gl_rows", "gl_rows")
    result = match_bank_lines(bank, gl, window_days)
    unmatched_ids = set(result.unmatched_bank)
    return {
        "kind": "bank_page",
        "account": account,
        "page": page,
        "bank_lines": len(bank),
        "gl_lines": len(gl),
        "matched": len(result.matches),
        "matches": [[bank_id, gl_id] for bank_id, gl_id in result.matches],
        "unmatched_bank": result.unmatched_bank,
        "unmatched_gl": result.unmatched_gl,
        "unmatched_bank_amount": _format_money(
            sum((line.amount for line in bank if line.id in unmatched_ids), Decimal(0))
        ),
    }


def _bank_pages(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The closing message of a paged reconciliation. Per account: the lines the engine's database decided (a group
    with one bank and one GL line, paired within the window or not; a group with no line on one side), the pages'
    figures (each page's result is stored under its own key), and the first unmatched lines. The control sums must
    hold (every line decided in the database or sent on a page); the halt is decided here, as for a whole one."""
    tolerance = _share(payload, "unmatched_tolerance", "unmatched_tolerance")
    _non_negative_int(payload, "date_window_days", "date_window_days")
    seen_accounts: set[str] = set()
    results: list[dict[str, Any]] = []
    reasons: list[str] = []
    for position, raw in enumerate(_list(payload, "accounts", "accounts")):
        field = f"accounts[{position}]"
        entry = _object(raw, field)
        account = _text(entry, "account", f"{field}.account")
        if account in seen_accounts:
            raise SpecialistInputError(f"{field}.account", f"duplicate account {account!r}")
        seen_accounts.add(account)
        counts = {key: _non_negative_int(entry, key, f"{field}.{key}") for key in _PAGED_COUNTS}
        matched_in_database = counts["matched_in_database"]
        for side, unmatched_side in (
            ("bank_lines", "unmatched_bank_in_database"),
            ("gl_lines", "unmatched_gl_in_database"),
        ):
            decided = matched_in_database + counts[unmatched_side]
            if decided + counts[f"paged_{side}"] != counts[side]:
                raise SpecialistInputError(
                    f"{field}.{side}",
                    f"{counts[side]} lines, but {decided} decided in the database and {counts[f'paged_{side}']} sent"
                    " on pages",
                )
        if counts["paged_matched"] > min(counts["paged_bank_lines"], counts["paged_gl_lines"]):
            raise SpecialistInputError(
                f"{field}.paged_matched", f"{counts['paged_matched']} exceeds the lines on pages"
            )
        bank_count = counts["bank_lines"]
        matched = matched_in_database + counts["paged_matched"]
        unmatched = bank_count - matched
        listed = _cash_lines(entry, "unmatched_bank_lines", f"{field}.unmatched_bank_lines")
        unmatched_gl = [
            _text({"id": item}, "id", f"{field}.unmatched_gl[{n}]")
            for n, item in enumerate(_list(entry, "unmatched_gl", f"{field}.unmatched_gl"))
        ]
        if len(listed) > min(unmatched, LISTED_LINES):
            raise SpecialistInputError(f"{field}.unmatched_bank_lines", f"lists more than the {unmatched} unmatched")
        if len(unmatched_gl) > min(counts["gl_lines"] - matched, LISTED_LINES):
            raise SpecialistInputError(f"{field}.unmatched_gl", "lists more GL lines than are unmatched")
        unmatched_amount = _money(
            entry, "unmatched_bank_amount_in_database", f"{field}.unmatched_bank_amount_in_database"
        ) + _money(entry, "paged_unmatched_bank_amount", f"{field}.paged_unmatched_bank_amount")
        share = Decimal(unmatched) / Decimal(bank_count) if bank_count else Decimal(0)
        halt = Decimal(unmatched) > tolerance * Decimal(bank_count)
        results.append(
            {
                "account": account,
                "bank_lines": bank_count,
                "gl_lines": counts["gl_lines"],
                "matched": matched,
                "unmatched_bank": [line.id for line in listed],
                "unmatched_gl": unmatched_gl,
                "unmatched_share": _format_share(share),
                "unmatched_bank_amount": _format_money(unmatched_amount),
                "halt": halt,
                "matched_in_database": matched_in_database,
                "pages": counts["pages"],
                "unmatched_gl_lines": counts["gl_lines"] - matched,
                **_carried(entry, field),
            }
        )
        if halt:
            reasons.append(
                f"account {account}: {unmatched} of {bank_count} bank lines unmatched "
                f"(tolerance {_format_percent(tolerance)})"
            )
    return {
        "kind": "bank",
        "accounts": results,
        "halted": bool(reasons),
        "halt_reason": "; ".join(reasons) if reasons else None,
    }


_PAGED_COUNTS = (
    "bank_lines",
    "gl_lines",
    "matched_in_database",
    "unmatched_bank_in_database",
    "unmatched_gl_in_database",
    "pages",
    "paged_bank_lines",
    "paged_gl_lines",
    "paged_matched",
)


def _carried(entry: Mapping[str, Any], field: str) -> dict[str, Any]:
    """An account's currency and its exchange-difference explanation, as the engine computed them: carried into the
    result unchanged (the engine checks they come back as sent), never used to match a line."""
    carried: dict[str, Any] = {}
    if "currency" in entry:
        carried["currency"] = _text(entry, "currency", f"{field}.currency")
    if "fx" in entry:
        carried["fx"] = dict(_object(entry["fx"], f"{field}.fx"))
    return carried


def _cash_lines(entry: Mapping[str, Any], key: str, field: str) -> list[CashLine]:
    lines: list[CashLine] = []
    ids: set[str] = set()
    for position, raw in enumerate(_list(entry, key, field)):
        line_field = f"{field}[{position}]"
        item = _object(raw, line_field)
        line_id = _text(item, "id", f"{line_field}.id")
        if line_id in ids:
            raise SpecialistInputError(f"{line_field}.id", f"duplicate id {line_id!r}")
        ids.add(line_id)
        reference = item.get("reference")
        if not isinstance(reference, str):
            raise SpecialistInputError(f"{line_field}.reference", f"expected a string, got {reference!r}")
        lines.append(
            CashLine(
                id=line_id,
                date=_date(item, "date", f"{line_field}.date"),
                amount=_money(item, "amount", f"{line_field}.amount"),
                reference=reference,
            )
        )
    return lines


# --- subledger and intercompany ---------------------------------------------------------------------------


def _subledger(payload: Mapping[str, Any]) -> dict[str, Any]:
    ledger = payload.get("ledger")
    if ledger not in ("ap", "ar"):
        raise SpecialistInputError("ledger", f"expected 'ap' or 'ar', got {ledger!r}")
    control_account = _text(payload, "control_account", "control_account")
    control_balance = _money(payload, "control_balance", "control_balance")
    subledger_total = _money(payload, "subledger_total", "subledger_total")
    _non_negative_int(payload, "items", "items")
    tolerance = _tolerance_amount(payload)
    difference = control_balance + subledger_total if ledger == "ap" else control_balance - subledger_total
    within = abs(difference) <= tolerance
    reason = None
    if not within:
        reason = (
            f"{ledger.upper()} control {control_account} differs from subledger by "
            f"{_format_money(abs(difference))} (tolerance {_format_money(tolerance)})"
        )
    return {
        "kind": "subledger",
        "ledger": ledger,
        "control_account": control_account,
        "control_balance": _format_money(control_balance),
        "subledger_total": _format_money(subledger_total),
        "difference": _format_money(difference),
        "within_tolerance": within,
        "halted": not within,
        "halt_reason": reason,
    }


def _intercompany(payload: Mapping[str, Any]) -> dict[str, Any]:
    tolerance = _tolerance_amount(payload)
    pairs: list[dict[str, Any]] = []
    reasons: list[str] = []
    for position, raw in enumerate(_list(payload, "pairs", "pairs")):
        field = f"pairs[{position}]"
        item = _object(raw, field)
        counterparty = _text(item, "counterparty", f"{field}.counterparty")
        account = _text(item, "account", f"{field}.account")
        ours = _money(item, "our_balance", f"{field}.our_balance")
        theirs = _money(item, "their_balance", f"{field}.their_balance")
        difference = ours - theirs
        within = abs(difference) <= tolerance
        pairs.append(
            {
                "counterparty": counterparty,
                "account": account,
                "our_balance": _format_money(ours),
                "their_balance": _format_money(theirs),
                "difference": _format_money(difference),
                "within_tolerance": within,
            }
        )
        if not within:
            reasons.append(
                f"intercompany {counterparty} on {account} differs by {_format_money(abs(difference))} "
                f"(tolerance {_format_money(tolerance)})"
            )
    return {
        "kind": "intercompany",
        "pairs": pairs,
        "halted": bool(reasons),
        "halt_reason": "; ".join(reasons) if reasons else None,
    }


def _tolerance_amount(payload: Mapping[str, Any]) -> Decimal:
    tolerance = _money(payload, "tolerance_amount", "tolerance_amount")
    if tolerance < 0:
        raise SpecialistInputError("tolerance_amount", f"must not be negative, got {tolerance}")
    return tolerance


# --- field parsing ----------------------------------------------------------------------------------------


def _object(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecialistInputError(field, f"expected an object, got {type(value).__name__}")
    return value


def _list(container: Mapping[str, Any], key: str, field: str) -> list[Any]:
    value = container.get(key)
    if not isinstance(value, list):
        raise SpecialistInputError(field, f"expected a list, got {type(value).__name__}")
    return value


def _text(container: Mapping[str, Any], key: str, field: str) -> str:
    value = container.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SpecialistInputError(field, f"expected a non-empty string, got {value!r}")
    return value


def _non_negative_int(container: Mapping[str, Any], key: str, field: str) -> int:
    value = container.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecialistInputError(field, f"expected a non-negative integer, got {value!r}")
    return value


def _money(container: Mapping[str, Any], key: str, field: str) -> Decimal:
    value = container.get(key)
    if not isinstance(value, str) or not _MONEY_PATTERN.fullmatch(value):
        raise SpecialistInputError(field, f"expected a decimal string like '-12.50', got {value!r}")
    return Decimal(value)


def _share(container: Mapping[str, Any], key: str, field: str) -> Decimal:
    value = container.get(key)
    if not isinstance(value, str) or not _SHARE_PATTERN.fullmatch(value):
        raise SpecialistInputError(field, f"expected a decimal string like '0.55', got {value!r}")
    share = Decimal(value)
    if share > 1:
        raise SpecialistInputError(field, f"must be between 0 and 1, got {value}")
    return share


def _date(container: Mapping[str, Any], key: str, field: str) -> dt.date:
    value = container.get(key)
    if not isinstance(value, str) or not _DATE_PATTERN.fullmatch(value):
        raise SpecialistInputError(field, f"expected a YYYY-MM-DD date, got {value!r}")
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise SpecialistInputError(field, f"not a calendar date: {value!r}") from exc


def _format_money(amount: Decimal) -> str:
    return format(amount.quantize(_CENT, rounding=ROUND_HALF_UP), "f")


def _format_share(share: Decimal) -> str:
    return format(share.quantize(_SHARE_PLACES, rounding=ROUND_HALF_UP), "f")


def _format_percent(share: Decimal) -> str:
    return format((share * 100).normalize(), "f") + "%"
