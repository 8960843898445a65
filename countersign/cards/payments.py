"""The payment-runs status card: one line per certificate of a month, for Slack Block Kit and Adaptive Card 1.5.

Input is the `countersign payments status --json` shape (`payment_run_status`,
countersign/engine/workflows/certificates/runs.py:
rows, one per submitted certificate, each with `certificate_id`, `contract_id`, `period`, `currency`,
`amount_to_certify` (a decimal string, or null before reconstruction), `stage`, `gate` ({tier, status} of the run's
latest gate, or null), `escalation` and `certified`), read strictly: an approver must never see a guessed amount,
so a malformed row raises `CardDataError` naming the field path (`runs[3].amount_to_certify`) and no card is
rendered.

Text from data (certificate and contract ids, stage, tier) is put on one line and cut to a cap. In Slack it is
escaped by countersign/cards/escape.py (&, <, > as entities, formatting characters as look-alikes) and sent with
`verbatim`, so
nothing can pose as a mention, a link or formatting; in Teams it goes into `TextRun`s, which Adaptive Cards never read
as markdown. The list is capped and ends in a visible "and N more".
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from countersign.cards.escape import slack_data, slack_own, teams_markdown
from countersign.cards.formatting import money, parse_date
from countersign.cards.model import CardDataError
from countersign.cards.platform_limits import (
    SLACK_BLOCKS_PER_MESSAGE,
    SLACK_FIELD_TEXT_CHARS,
    SLACK_HEADER_TEXT_CHARS,
    SLACK_SECTION_TEXT_CHARS,
    TEAMS_CARD_BYTES,
    TEAMS_TEXT_CHARS,
)
from countersign.cards.text import fit, one_line, slack_fit, slack_mrkdwn, units
from countersign.money.formatting import format_money
from countersign.policy.wording import in_words
from countersign.states import GateStatus

SOURCE = "payment runs"
SLACK_RUNS_SHOWN_MAX = 60
TEAMS_RUNS_SHOWN_MAX = 60
REFERENCE_MAX = 40  # certificate ids, contract ids, periods, stages, tiers, gate statuses
TEAMS_BYTES_RESERVED = 1_500  # kept for the "and N more" line and the card's envelope
SCHEMA_URL = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_VERSION = "1.5"
GATE_STATUSES = tuple(status.value for status in GateStatus)
LIST_HINT = "`countersign payments status --json` lists every one"

_DECIMAL = re.compile(r"-?\d{1,15}(\.\d{1,2})?")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,39}")
_CURRENCY = re.compile(r"[A-Z]{3}")

Block = dict[str, Any]
Element = dict[str, Any]
Message = dict[str, Any]
Cut = Callable[[str, int], str]  # data text -> safe one-line text within a limit


@dataclass(frozen=True)
class PaymentRunLine:
    certificate_id: str
    contract_id: str
    period: str
    currency: str | None
    amount_to_certify: Decimal | None  # None until reconstruction has computed it
    stage: str
    gate_tier: str | None
    gate_status: GateStatus | None  # None before the gate
    escalation: str | None  # the latest escalation reason, e.g. "suspected_injection"
    certified: bool
    final_date: dt.date | None = None  # the final date for payment, once the reconstruction computed it
    postponed_final_date: dt.date | None = None  # as the payee's default notice (s. 110B) postponed it


@dataclass(frozen=True)
class PaymentsCard:
    period: str | None  # None: every month
    runs: tuple[PaymentRunLine, ...]

    @property
    def certified(self) -> int:
        return sum(1 for run in self.runs if run.certified)

    @property
    def awaiting_decision(self) -> int:
        return sum(1 for run in self.runs if run.gate_status is GateStatus.OPEN)

    @property
    def escalated(self) -> int:
        return sum(1 for run in self.runs if run.escalation)


# --- reading ----------------------------------------------------------------------------------------------


def payments_card(rows: Sequence[Mapping[str, Any]], period: str | None = None) -> PaymentsCard:
    """Read the status rows; CardDataError names the first bad field."""
    if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
        raise CardDataError("runs", f"expected a list of runs, got {type(rows).__name__}", SOURCE)
    return PaymentsCard(period=period, runs=tuple(_run_line(row, f"runs[{i}]") for i, row in enumerate(rows)))


def _run_line(row: object, path: str) -> PaymentRunLine:
    if not isinstance(row, Mapping):
        raise CardDataError(path, f"expected an object, got {type(row).__name__}", SOURCE)

    def get(key: str) -> object:
        if key not in row:
            raise CardDataError(f"{path}.{key}", "missing", SOURCE)
        return row[key]

    def text(key: str) -> str:
        value = get(key)
        if not isinstance(value, str) or not value.strip():
            raise CardDataError(f"{path}.{key}", f"expected a non-empty string, got {value!r}", SOURCE)
        return value

    def optional(key: str, pattern: re.Pattern[str] | None, expected: str) -> str | None:
        value = row.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise CardDataError(f"{path}.{key}", f"expected {expected} or null, got {value!r}", SOURCE)
        if pattern is not None and pattern.fullmatch(value) is None:
            raise CardDataError(f"{path}.{key}", f"expected {expected}, got {value!r}", SOURCE)
        return value

    amount = row.get("amount_to_certify")
    if amount is not None and (not isinstance(amount, str) or _DECIMAL.fullmatch(amount) is None):
        where = f"{path}.amount_to_certify"
        raise CardDataError(where, f"expected a decimal string such as '1234.56' or null, got {amount!r}", SOURCE)
    gate = row.get("gate")
    if gate is not None and (
        not isinstance(gate, Mapping)
        or not isinstance(gate.get("tier"), str)
        or not isinstance(gate.get("status"), str)
    ):
        raise CardDataError(f"{path}.gate", f"expected {{tier, status}} or null, got {gate!r}", SOURCE)
    if gate is not None and gate["status"] not in GATE_STATUSES:
        where = f"{path}.gate.status"
        raise CardDataError(where, f"expected one of {', '.join(GATE_STATUSES)}, got {gate['status']!r}", SOURCE)
    certified = get("certified")
    if not isinstance(certified, bool):
        raise CardDataError(f"{path}.certified", f"expected true or false, got {certified!r}", SOURCE)
    return PaymentRunLine(
        certificate_id=text("certificate_id"),
        contract_id=text("contract_id"),
        period=text("period"),
        currency=optional("currency", _CURRENCY, "a three-letter currency code"),
        amount_to_certify=None if amount is None else Decimal(amount),
        stage=text("stage"),
        gate_tier=None if gate is None else one_line(gate["tier"]) or None,
        gate_status=None if gate is None else GateStatus(gate["status"]),
        escalation=optional("escalation", _IDENTIFIER, "a snake_case reason"),
        certified=certified,
        final_date=_optional_date(row, f"{path}.final_date", "final_date"),
        postponed_final_date=_optional_date(row, f"{path}.postponed_final_date", "postponed_final_date"),
    )


def _optional_date(row: Mapping[str, Any], where: str, key: str) -> dt.date | None:
    """An ISO date (YYYY-MM-DD), or None when absent or null (rows written before the column existed)."""
    value = row.get(key)
    if value is None:
        return None
    parsed = parse_date(value)
    if parsed is None:
        raise CardDataError(where, f"expected a date YYYY-MM-DD or null, got {value!r}", SOURCE)
    return parsed


# --- wording shared by both platforms ---------------------------------------------------------------------


def _headline(card: PaymentsCard) -> str:
    return f"Payment runs {card.period}" if card.period else "Payment runs"


def _overview(card: PaymentsCard) -> list[tuple[str, str]]:
    return [
        ("Certificates", str(len(card.runs))),
        ("Certified", str(card.certified)),
        ("Awaiting a decision", str(card.awaiting_decision)),
        ("Escalated", str(card.escalated)),
    ]


def _amount(run: PaymentRunLine, locale: str | None) -> str:
    if run.amount_to_certify is None:
        return "amount not yet computed"
    if run.currency is None:
        return money(run.amount_to_certify)
    return format_money(run.amount_to_certify, run.currency, locale=locale)


def _gate(run: PaymentRunLine, cut: Cut) -> str:
    if run.gate_status is None:
        return "no gate yet"
    tier = f" {cut(run.gate_tier, REFERENCE_MAX)}" if run.gate_tier else ""
    return f"gate{tier}: {cut(in_words(run.gate_status), REFERENCE_MAX)}"


def final_date_words(run: PaymentRunLine) -> str | None:
    """When it must be paid by: the final date for payment, or the day the payee's default notice moved it to."""
    if run.postponed_final_date is not None:
        was = "" if run.final_date is None else f" from {run.final_date.isoformat()}"
        return f"{run.postponed_final_date.isoformat()} (postponed{was} by the payee's default notice)"
    return None if run.final_date is None else run.final_date.isoformat()


def _certified(run: PaymentRunLine) -> str:
    return "certified" if run.certified else "not certified"


def _more(hidden: int) -> str:
    return f"and {hidden} more certificates; {LIST_HINT}"


# --- Slack ------------------------------------------------------------------------------------------------


def slack_payments_message(card: PaymentsCard, *, locale: str | None = None) -> Message:
    """At most SLACK_BLOCKS_PER_MESSAGE blocks, each inside Slack's text limits; every data text escaped; amounts in
    the CLDR `locale` (None: en_GB)."""
    headline = _headline(card)
    blocks: list[Block] = [
        {"type": "header", "text": {"type": "plain_text", "text": fit(headline, SLACK_HEADER_TEXT_CHARS)}},
        {
            "type": "section",
            "fields": [slack_mrkdwn(f"*{label}*\n{value}", SLACK_FIELD_TEXT_CHARS) for label, value in _overview(card)],
        },
    ]
    if not card.runs:
        blocks.append(_section("_No payment runs started._"))
    sections: list[list[str]] = []
    for line in (_slack_line(run, locale) for run in card.runs[:SLACK_RUNS_SHOWN_MAX]):
        if sections and units("\n".join([*sections[-1], line])) <= SLACK_SECTION_TEXT_CHARS:
            sections[-1].append(line)
        else:
            sections.append([line])
    kept = sections[: SLACK_BLOCKS_PER_MESSAGE - len(blocks) - 1]  # one block kept for the "and N more" line
    blocks += [_section("\n".join(lines)) for lines in kept]
    shown = sum(len(lines) for lines in kept)
    hidden = len(card.runs) - shown
    if hidden > 0:
        blocks.append(
            {"type": "context", "elements": [slack_mrkdwn(f"_{slack_own(_more(hidden))}_", SLACK_FIELD_TEXT_CHARS)]}
        )
    fallback = f"{headline}: {len(card.runs)} certificates, {card.certified} certified"
    fallback += f", {card.awaiting_decision} awaiting a decision"
    return {"text": fit(slack_data(fallback), SLACK_SECTION_TEXT_CHARS), "blocks": blocks}


def _slack_line(run: PaymentRunLine, locale: str | None) -> str:
    mark = (
        ":white_check_mark:"
        if run.certified
        else (":hourglass:" if run.gate_status is GateStatus.OPEN else ":black_small_square:")
    )
    parts = [
        f"{mark} *{slack_fit(run.certificate_id, REFERENCE_MAX)}*",
        slack_fit(run.contract_id, REFERENCE_MAX),
        _amount(run, locale),
        f"stage {slack_fit(run.stage, REFERENCE_MAX)}",
        _gate(run, slack_fit),
    ]
    if run.escalation:
        parts.append(f":rotating_light: escalated: {in_words(run.escalation)}")
    if (final := final_date_words(run)) is not None:
        parts.append(f"final date {final}")
    parts.append(_certified(run))
    return " · ".join(parts)


def _section(text: str) -> Block:
    return {"type": "section", "text": slack_mrkdwn(text, SLACK_SECTION_TEXT_CHARS)}


# --- Teams ------------------------------------------------------------------------------------------------


def teams_payments_card(card: PaymentsCard, *, locale: str | None = None) -> dict[str, Any]:
    """An Adaptive Card 1.5 of at most TEAMS_CARD_BYTES bytes; data only in TextRuns; amounts in the CLDR `locale`."""
    headline = _headline(card)
    body: list[Element] = [
        {"type": "TextBlock", "text": fit(headline, 150), "size": "large", "weight": "bolder", "wrap": True},
        {"type": "FactSet", "facts": [{"title": label, "value": value} for label, value in _overview(card)]},
    ]
    if not card.runs:
        body.append(_teams_text("No payment runs started.", isSubtle=True))
    result: dict[str, Any] = {
        "$schema": SCHEMA_URL,
        "type": "AdaptiveCard",
        "version": CARD_VERSION,
        "fallbackText": fit(
            teams_markdown(f"{headline}: {len(card.runs)} certificates, {card.certified} certified"), TEAMS_TEXT_CHARS
        ),
        "body": body,
    }
    shown = 0
    for run in card.runs[:TEAMS_RUNS_SHOWN_MAX]:
        body.append(_teams_line(run, locale))
        if _json_bytes(result) + TEAMS_BYTES_RESERVED > TEAMS_CARD_BYTES:
            body.pop()
            break
        shown += 1
    hidden = len(card.runs) - shown
    if hidden > 0:
        body.append(_teams_text(_more(hidden).replace("`", ""), isSubtle=True, weight="bolder"))
    return result


def _teams_line(run: PaymentRunLine, locale: str | None) -> Element:
    details = [
        _plain(run.contract_id),
        _amount(run, locale),
        f"stage {_plain(run.stage)}",
        _gate(run, lambda raw, limit: fit(one_line(raw), limit)),
    ]
    if run.escalation:
        details.append(f"escalated: {in_words(run.escalation)}")
    if (final := final_date_words(run)) is not None:
        details.append(f"final date {final}")
    details.append(_certified(run))
    runs: list[Element] = [
        {"type": "TextRun", "text": _plain(run.certificate_id), "weight": "bolder", "fontType": "monospace"},
        {"type": "TextRun", "text": "  " + " · ".join(details)},
    ]
    if run.escalation:
        runs[1]["color"] = "attention"
    return {"type": "RichTextBlock", "inlines": runs, "separator": True, "spacing": "small"}


def _plain(raw: str) -> str:
    return fit(one_line(raw), REFERENCE_MAX) or " "


def _teams_text(text: str, **options: Any) -> Element:
    """Text we wrote ourselves."""
    return {"type": "TextBlock", "text": fit(text, TEAMS_TEXT_CHARS), "wrap": True, **options}


def _json_bytes(value: Mapping[str, Any]) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
