"""A payment certificate on a gate card: the shape the engine writes into `summary["certificate"]`, and its pieces
for the Slack and Teams gate cards.

The rest of a summary is read leniently (countersign/cards/evidence.py); a certificate is read strictly, because an
approver
must never see a guessed amount: a malformed one raises `CardDataError` naming the field path, and no card is
rendered. Amounts are decimal strings with at most two places (never floats) and stay `Decimal`. Identifiers
(invariant names, amount names, hold kinds, escalation reasons) must be snake_case, so they are safe anywhere.

Text from data (contract title, invariant titles, explanations, clause ids and titles, line and hold references) is
put on one line, so it cannot pose as one of the card's own lines. In Slack it is escaped by
countersign/cards/escape.py (&, <, >
as entities, Slack's formatting characters as look-alikes) and sent with `verbatim`, so Slack does not auto-link bare
URLs or channel names either; in Teams it goes into `TextRun`s, which Adaptive Cards never read as markdown. Lists
are capped and end in a visible "and N more".
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any

from countersign.cards.formatting import parse_date
from countersign.cards.model import CardDataError
from countersign.cards.platform_limits import SLACK_FIELD_TEXT_CHARS, SLACK_SECTION_TEXT_CHARS
from countersign.cards.text import fit, one_line, slack_fit, slack_mrkdwn
from countersign.money.formatting import format_money
from countersign.policy.wording import in_words

CERTIFICATE_KEY = "certificate"
SOURCE = "gate summary"
EXPLANATION_SOURCES = ("model", "fallback")
BASES = ("claimed", "reconstructed")
CORRECTIONS_SHOWN_MAX = 8

VIOLATIONS_SHOWN_MAX = 10
HOLDS_SHOWN_MAX = 10
AMOUNTS_SHOWN_MAX = 6
LINES_SHOWN_MAX = 10
CLAUSES_SHOWN_MAX = 6
TITLE_MAX = 200  # contract and invariant titles
EXPLANATION_MAX = 800
REFERENCE_MAX = 40  # contract ids, periods, line ids, clause ids, hold references
CLAUSE_TITLE_MAX = 100
TEAMS_SECTION_BYTES_MAX = (
    12_000  # the whole certificate container, of the card's TEAMS_CARD_BYTES (countersign/cards/platform_limits.py)
)

FALLBACK_FLAG = "Deterministic explanation, flagged for review"
FALLBACK_DETAIL = (
    "The model's explanation was not used: the explanations below are the invariants' own, and a person should"
    " read them before deciding."
)
ESCALATION_WORDING = {
    "suspected_injection": (
        "Text in this certificate appears to carry instructions to the system. The amounts and verdicts come from"
        " the arithmetic, not from that text; read the certificate's prose with suspicion."
    ),
    "missing_contract_parameter": "A contract parameter the checks need is missing, so some invariants could not run.",
    "missing_parameter": "A parameter the checks need is missing, so some invariants could not run.",
    "contradictory_evidence": "The certificate's evidence contradicts itself, so no verdict could stand on it alone.",
    "budget_exhausted": "The model ran out of budget before its work was complete.",
    "model_unavailable": "The model server did not answer through every retry its time allowed.",
}

_DECIMAL = re.compile(r"-?\d{1,15}(\.\d{1,2})?")
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,63}")
_CURRENCY = re.compile(r"[A-Z]{3}")

Block = dict[str, Any]
Element = dict[str, Any]
Cut = Callable[[str, int], str]  # data text -> safe one-line text within a limit


@dataclass(frozen=True)
class ClauseRef:
    id: str
    title: str


@dataclass(frozen=True)
class Violation:
    invariant: str
    title: str
    explanation: str
    amounts: tuple[tuple[str, Decimal], ...]  # (name, amount) in the order the summary gave them
    lines: tuple[str, ...]
    clauses: tuple[ClauseRef, ...]


@dataclass(frozen=True)
class Hold:
    kind: str
    other: str  # the other certificate line, e.g. "C-0003/4 line BOQ-2"
    overlap: Decimal


@dataclass(frozen=True)
class Correction:
    invariant: str
    description: str
    amount: Decimal  # by how much the claim is reduced (negative: increased) on this ground


@dataclass(frozen=True)
class PaymentDates:
    due_date: dt.date
    final_date: dt.date
    pay_less_notice_by: dt.date
    payment_notice_by: dt.date | None = None  # absent from summaries written before the payment notice proper


@dataclass(frozen=True)
class CertificateSummary:
    contract_id: str
    contract_title: str
    certificate_no: int
    period: str
    currency: str
    amount_to_certify: Decimal
    previously_certified: Decimal
    gross_to_date: Decimal
    retention_to_date: Decimal
    advance_repaid_to_date: Decimal
    violations: tuple[Violation, ...]
    holds: tuple[Hold, ...]
    escalation: str | None
    explanation_source: str  # "model" | "fallback"
    claimed_amount: Decimal | None = None  # the contractor's claim, when the summary gives it
    basis: str | None = None  # "claimed" | "reconstructed": which sum approval certifies
    corrections: tuple[Correction, ...] = ()
    previously_certified_reconstructed: Decimal | None = None  # from the documents alone, when it differs
    payment_dates: PaymentDates | None = None
    notes: tuple[str, ...] = ()  # what the checks accepted and the approver should see (a variation revalued)
    questions: tuple[str, ...] = ()  # what the contract's documents could not show (a convention), asked in words

    @property
    def corrected(self) -> bool:
        return self.basis == "reconstructed" and self.claimed_amount not in (None, self.amount_to_certify)

    def notice_deadline_passed(self, today: dt.date) -> bool:
        return self.payment_dates is not None and today > self.payment_dates.pay_less_notice_by

    @property
    def explanation_is_fallback(self) -> bool:
        return self.explanation_source == "fallback"


# --- reading ----------------------------------------------------------------------------------------------


def certificate_summary(summary: Mapping[str, Any]) -> CertificateSummary | None:
    """The certificate in a gate summary, or None when it has none.

    An escalation gate's summary wraps the task's as `{"reason": ..., "result": {...}}`; the certificate is looked
    for there too, and error paths then start `result.certificate`.
    """
    path = CERTIFICATE_KEY
    if CERTIFICATE_KEY in summary:
        raw = summary[CERTIFICATE_KEY]
    else:
        result = summary.get("result")
        if not isinstance(result, Mapping) or CERTIFICATE_KEY not in result:
            return None
        raw, path = result[CERTIFICATE_KEY], f"result.{CERTIFICATE_KEY}"
    c = _Fields(raw, path)
    return CertificateSummary(
        contract_id=c.text("contract_id"),
        contract_title=c.text("contract_title"),
        certificate_no=c.integer("certificate_no", minimum=1),
        period=c.text("period"),
        currency=c.matching("currency", _CURRENCY, "a three-letter currency code such as GBP"),
        amount_to_certify=c.decimal("amount_to_certify"),
        previously_certified=c.decimal("previously_certified"),
        gross_to_date=c.decimal("gross_to_date"),
        retention_to_date=c.decimal("retention_to_date"),
        advance_repaid_to_date=c.decimal("advance_repaid_to_date"),
        violations=tuple(_violation(v) for v in c.objects("violations")),
        holds=tuple(_hold(h) for h in c.objects("holds")),
        escalation=c.optional_identifier("escalation"),
        explanation_source=c.choice("explanation_source", EXPLANATION_SOURCES),
        claimed_amount=c.optional_decimal("claimed_amount"),
        basis=c.choice("basis", BASES) if c.has("basis") else None,
        corrections=tuple(
            Correction(
                invariant=k.identifier("invariant"), description=k.text("description"), amount=k.decimal("amount")
            )
            for k in (c.objects("corrections") if c.has("corrections") else [])
        ),
        previously_certified_reconstructed=c.optional_decimal("previously_certified_reconstructed"),
        payment_dates=_dates(c.optional_object("payment_dates")),
        notes=c.texts("notes") if c.has("notes") else (),
        questions=c.texts("questions") if c.has("questions") else (),
    )


def _dates(d: _Fields | None) -> PaymentDates | None:
    if d is None:
        return None
    return PaymentDates(
        due_date=d.date("due_date"),
        final_date=d.date("final_date"),
        pay_less_notice_by=d.date("pay_less_notice_by"),
        payment_notice_by=d.date("payment_notice_by") if d.has("payment_notice_by") else None,
    )


def _violation(v: _Fields) -> Violation:
    return Violation(
        invariant=v.identifier("invariant"),
        title=v.text("title"),
        explanation=v.text("explanation"),
        amounts=v.amounts("amounts"),
        lines=v.texts("lines"),
        clauses=tuple(ClauseRef(id=c.text("id"), title=c.text("title")) for c in v.objects("clauses")),
    )


def _hold(h: _Fields) -> Hold:
    return Hold(kind=h.identifier("kind"), other=h.text("other"), overlap=h.decimal("overlap"))


class _Fields:
    """Strict typed access to one JSON object of the certificate, naming the field path in every error."""

    def __init__(self, value: object, path: str) -> None:
        if not isinstance(value, Mapping):
            raise CardDataError(path, f"expected an object, got {type(value).__name__}", SOURCE)
        self._value: Mapping[str, Any] = value
        self._path = path

    def _where(self, key: str) -> str:
        return f"{self._path}.{key}"

    def _get(self, key: str) -> object:
        if key not in self._value:
            raise CardDataError(self._where(key), "missing", SOURCE)
        return self._value[key]

    def text(self, key: str) -> str:
        return _text_at(self._get(key), self._where(key))

    def has(self, key: str) -> bool:
        return self._value.get(key) is not None

    def optional_decimal(self, key: str) -> Decimal | None:
        return self.decimal(key) if self.has(key) else None

    def optional_object(self, key: str) -> _Fields | None:
        return _Fields(self._value[key], self._where(key)) if self.has(key) else None

    def date(self, key: str) -> dt.date:
        value = self._get(key)
        parsed = parse_date(value)
        if parsed is None:
            raise CardDataError(self._where(key), f"expected an ISO date, got {value!r}", SOURCE)
        return parsed

    def integer(self, key: str, minimum: int) -> int:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise CardDataError(self._where(key), f"expected an integer, got {value!r}", SOURCE)
        if value < minimum:
            raise CardDataError(self._where(key), f"must be at least {minimum}, got {value}", SOURCE)
        return value

    def decimal(self, key: str) -> Decimal:
        return _decimal_at(self._get(key), self._where(key))

    def matching(self, key: str, pattern: re.Pattern[str], expected: str) -> str:
        value = self._get(key)
        if not isinstance(value, str) or pattern.fullmatch(value) is None:
            raise CardDataError(self._where(key), f"expected {expected}, got {value!r}", SOURCE)
        return value

    def identifier(self, key: str) -> str:
        return self.matching(key, _IDENTIFIER, "a snake_case identifier of at most 64 characters")

    def optional_identifier(self, key: str) -> str | None:
        if self._value.get(key) is None:
            return None
        return self.identifier(key)

    def choice(self, key: str, allowed: tuple[str, ...]) -> str:
        value = self._get(key)
        if value not in allowed:
            raise CardDataError(self._where(key), f"expected one of {allowed}, got {value!r}", SOURCE)
        return str(value)

    def texts(self, key: str) -> tuple[str, ...]:
        where = self._where(key)
        return tuple(_text_at(item, f"{where}[{i}]") for i, item in enumerate(self._list(key)))

    def objects(self, key: str) -> list[_Fields]:
        where = self._where(key)
        return [_Fields(item, f"{where}[{i}]") for i, item in enumerate(self._list(key))]

    def amounts(self, key: str) -> tuple[tuple[str, Decimal], ...]:
        value = self._get(key)
        where = self._where(key)
        if not isinstance(value, Mapping):
            raise CardDataError(where, f"expected an object of named amounts, got {type(value).__name__}", SOURCE)
        named: list[tuple[str, Decimal]] = []
        for name, amount in value.items():
            if not isinstance(name, str) or _IDENTIFIER.fullmatch(name) is None:
                raise CardDataError(where, f"amount name {name!r} is not a snake_case identifier", SOURCE)
            named.append((name, _decimal_at(amount, f"{where}.{name}")))
        return tuple(named)

    def _list(self, key: str) -> list[Any]:
        value = self._get(key)
        if not isinstance(value, list):
            raise CardDataError(self._where(key), f"expected a list, got {type(value).__name__}", SOURCE)
        return value


def _text_at(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CardDataError(where, f"expected a non-empty string, got {value!r}", SOURCE)
    return value


def _decimal_at(value: object, where: str) -> Decimal:
    """A decimal string such as "123456.78": never a float or a bare number, at most two decimal places."""
    if not isinstance(value, str) or _DECIMAL.fullmatch(value) is None:
        raise CardDataError(where, f"expected a decimal string such as '1234.56', got {value!r}", SOURCE)
    return Decimal(value)


# --- wording shared by both platforms ---------------------------------------------------------------------


def _label(identifier: str) -> str:
    """`"advance_repaid_to_date"` -> `"Advance repaid to date"`."""
    words = identifier.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def escalation_headline(reason: str) -> str:
    return f"Escalated: {in_words(reason)}"


def escalation_wording(reason: str) -> str:
    return ESCALATION_WORDING.get(reason, "A person must look before this certificate can be decided.")


def _overview_facts(cs: CertificateSummary, locale: str | None) -> list[tuple[str, str]]:
    """At most nine facts (a Slack section holds ten fields)."""
    money = partial(format_money, currency=cs.currency, locale=locale)
    to_certify = money(cs.amount_to_certify) + (" (the reconstructed sum)" if cs.corrected else "")
    facts = [("Amount to certify", to_certify)]
    if cs.claimed_amount is not None and cs.claimed_amount != cs.amount_to_certify:
        facts.append(("Claimed", money(cs.claimed_amount)))
    facts.append(("Previously certified", money(cs.previously_certified)))
    if cs.previously_certified_reconstructed is not None:
        facts.append(("Previously certified by the documents", money(cs.previously_certified_reconstructed)))
    facts += [
        ("Gross to date", money(cs.gross_to_date)),
        ("Retention to date", money(cs.retention_to_date)),
        ("Advance repaid to date", money(cs.advance_repaid_to_date)),
        ("Invariants violated", str(len(cs.violations)) if cs.violations else "none"),
        ("Holds", str(len(cs.holds)) if cs.holds else "none"),
    ]
    return facts


def payment_terms_line(cs: CertificateSummary) -> str | None:
    d = cs.payment_dates
    if d is None:
        return None
    payment_notice = "" if d.payment_notice_by is None else f"payment notice by {d.payment_notice_by.isoformat()} · "
    return (
        f"Payment due {d.due_date.isoformat()} · {payment_notice}final date for payment {d.final_date.isoformat()} · "
        f"a pay-less notice must be given by {d.pay_less_notice_by.isoformat()}"
    )


def deadline_warning(cs: CertificateSummary, today: dt.date, locale: str | None) -> str | None:
    """Once the pay-less deadline has passed, paying less than the notified sum is no longer open to the payer."""
    if cs.payment_dates is None or not cs.notice_deadline_passed(today):
        return None
    notified = cs.claimed_amount if cs.claimed_amount is not None else cs.amount_to_certify
    return (
        f"The pay-less notice deadline ({cs.payment_dates.pay_less_notice_by.isoformat()}) has passed: the notified"
        f" sum {format_money(notified, cs.currency, locale=locale)} is payable in full by"
        f" {cs.payment_dates.final_date.isoformat()}."
    )


NOTES_SHOWN_MAX = 5


def noted_sections(cs: CertificateSummary, cut: Cut) -> list[tuple[str, list[str]]]:
    """(heading, lines) for what the checks accepted and what the approver is asked to confirm, each capped."""
    sections = []
    for heading, lines, what in (
        ("Accepted by the checks", cs.notes, "notes"),
        ("Please confirm", cs.questions, "questions"),
    ):
        if lines:
            shown = [cut(line, EXPLANATION_MAX) for line in lines[:NOTES_SHOWN_MAX]]
            hidden = len(lines) - NOTES_SHOWN_MAX
            sections.append((heading, shown + ([_more(hidden, what)] if hidden > 0 else [])))
    return sections


def correction_lines(cs: CertificateSummary, cut: Cut, locale: str | None) -> list[str]:
    """Why the amount to certify differs from the claim, ground by ground."""
    if not cs.corrected:
        return []
    lines = [
        f"{cut(c.description, EXPLANATION_MAX)}: {format_money(-c.amount, cs.currency, locale=locale)}"
        for c in cs.corrections[:CORRECTIONS_SHOWN_MAX]
    ]
    hidden = len(cs.corrections) - CORRECTIONS_SHOWN_MAX
    return lines + ([_more(hidden, "corrections")] if hidden > 0 else [])


def _plain(raw: str, limit: int) -> str:
    """Data on one line within `limit` units, for a Teams TextRun."""
    return fit(one_line(raw), limit)


def _contract_line(cs: CertificateSummary, cut: Cut) -> str:
    """`cut` makes data safe for the platform: `slack_fit` or `_plain`."""
    contract = f"{cut(cs.contract_id, REFERENCE_MAX)} {cut(cs.contract_title, TITLE_MAX)}"
    return f"Contract {contract} · period {cut(cs.period, REFERENCE_MAX)}"


def _hold_line(hold: Hold, currency: str, cut: Cut, locale: str | None) -> str:
    other = cut(hold.other, REFERENCE_MAX)
    return f"{_label(hold.kind)}: {other}, overlap {format_money(hold.overlap, currency, locale=locale)}"


def _more(hidden: int, noun: str) -> str:
    return f"and {hidden} more {noun}"


def _listed(items: Sequence[str], shown_max: int, noun: str, separator: str) -> str:
    text = separator.join(items[:shown_max])
    hidden = len(items) - shown_max
    return f"{text} {_more(hidden, noun)}" if hidden > 0 else text


# --- Slack ------------------------------------------------------------------------------------------------


def slack_certificate_section(
    summary: Mapping[str, Any], *, locale: str | None = None, today: dt.date | None = None
) -> list[Block]:
    """The certificate's blocks for a gate card's summary; none when the summary carries no certificate."""
    cs = certificate_summary(summary)
    return slack_certificate_blocks(cs, locale=locale, today=today) if cs else []


def slack_certificate_blocks(
    cs: CertificateSummary, *, locale: str | None = None, today: dt.date | None = None
) -> list[Block]:
    """At most 7 + VIOLATIONS_SHOWN_MAX + 1 blocks, each inside Slack's text limits; amounts in the CLDR `locale`;
    deadlines judged against `today` (default: today in UTC)."""
    heading = f"*Payment certificate {cs.certificate_no}*\n{_contract_line(cs, slack_fit)}"
    overview: Block = {
        "type": "section",
        "text": slack_mrkdwn(heading, SLACK_SECTION_TEXT_CHARS),
        "fields": [
            slack_mrkdwn(f"*{label}*\n{value}", SLACK_FIELD_TEXT_CHARS) for label, value in _overview_facts(cs, locale)
        ],
    }
    blocks = [overview]
    warning = deadline_warning(cs, today or dt.datetime.now(dt.UTC).date(), locale)
    if warning:
        blocks.append(_slack_section(f":alarm_clock: *{warning}*"))
    terms = payment_terms_line(cs)
    if terms:
        blocks.append({"type": "context", "elements": [slack_mrkdwn(terms, SLACK_FIELD_TEXT_CHARS)]})
    corrections = correction_lines(cs, slack_fit, locale)
    if corrections:
        heading = "*Why the amount to certify differs from the claim*"
        blocks.append(_slack_section("\n".join([heading, *(f"• {line}" for line in corrections)])))
    noted = noted_sections(cs, slack_fit)
    if noted:
        text = "\n".join(line for title, lines in noted for line in [f"*{title}*", *(f"• {x}" for x in lines)])
        blocks.append(_slack_section(text))
    if cs.escalation:
        reason = f":rotating_light: *{escalation_headline(cs.escalation)}*\n{escalation_wording(cs.escalation)}"
        blocks.append(_slack_section(reason))
    if cs.explanation_is_fallback:
        blocks.append(_slack_section(f":warning: *{FALLBACK_FLAG}*\n{FALLBACK_DETAIL}"))
    if cs.holds:
        lines = [f"• {_hold_line(h, cs.currency, slack_fit, locale)}" for h in cs.holds[:HOLDS_SHOWN_MAX]]
        hidden = len(cs.holds) - HOLDS_SHOWN_MAX
        lines += [f"_{_more(hidden, 'holds')}_"] if hidden > 0 else []
        blocks.append(_slack_section("\n".join(["*Holds*", *lines])))
    blocks += [_slack_violation(v, cs.currency, locale) for v in cs.violations[:VIOLATIONS_SHOWN_MAX]]
    hidden = len(cs.violations) - VIOLATIONS_SHOWN_MAX
    if hidden > 0:
        more = f"_{_more(hidden, 'violated invariants not shown here; the trace records every one')}_"
        blocks.append({"type": "context", "elements": [slack_mrkdwn(more, SLACK_FIELD_TEXT_CHARS)]})
    return blocks


def _slack_violation(v: Violation, currency: str, locale: str | None) -> Block:
    lines = [
        f":no_entry: *{slack_fit(v.title, TITLE_MAX)}* `{v.invariant}`",
        slack_fit(v.explanation, EXPLANATION_MAX),
    ]
    if v.amounts:
        amounts = [f"{_label(name)} {format_money(value, currency, locale=locale)}" for name, value in v.amounts]
        lines.append(f"*Amounts:* {_listed(amounts, AMOUNTS_SHOWN_MAX, 'amounts', ' · ')}")
    if v.lines:
        refs = [slack_fit(line, REFERENCE_MAX) for line in v.lines]
        lines.append(f"*Lines:* {_listed(refs, LINES_SHOWN_MAX, 'lines', ', ')}")
    clauses = [f"{slack_fit(c.id, REFERENCE_MAX)} {slack_fit(c.title, CLAUSE_TITLE_MAX)}" for c in v.clauses]
    lines.append(f"*Clauses:* {_listed(clauses, CLAUSES_SHOWN_MAX, 'clauses', '; ') if clauses else 'none cited'}")
    return _slack_section("\n".join(lines))


def _slack_section(text: str) -> Block:
    return {"type": "section", "text": slack_mrkdwn(text, SLACK_SECTION_TEXT_CHARS)}


# --- Teams ------------------------------------------------------------------------------------------------


def teams_certificate_section(
    summary: Mapping[str, Any], *, locale: str | None = None, today: dt.date | None = None
) -> list[Element]:
    """The certificate's elements for a gate card's summary; none when the summary carries no certificate."""
    cs = certificate_summary(summary)
    return teams_certificate_elements(cs, locale=locale, today=today) if cs else []


def teams_certificate_elements(
    cs: CertificateSummary, *, locale: str | None = None, today: dt.date | None = None
) -> list[Element]:
    """One Container (so it stays whole), at most TEAMS_SECTION_BYTES_MAX bytes of JSON; amounts in the CLDR
    `locale`."""
    items: list[Element] = [
        _teams_text(f"Payment certificate {cs.certificate_no}", weight="bolder", size="medium"),
        _teams_runs([_run(_contract_line(cs, _plain), isSubtle=True)], spacing="none"),
        _teams_facts(_overview_facts(cs, locale)),
    ]
    warning = deadline_warning(cs, today or dt.datetime.now(dt.UTC).date(), locale)
    if warning:
        items.append(_teams_text(warning, weight="bolder", color="attention"))
    terms = payment_terms_line(cs)
    if terms:
        items.append(_teams_text(terms, isSubtle=True, spacing="none"))
    corrections = correction_lines(cs, _plain, locale)
    if corrections:
        items.append(
            {
                "type": "Container",
                "items": [
                    _teams_text("Why the amount to certify differs from the claim", weight="bolder"),
                    *(_teams_runs([_run(line)], spacing="none") for line in corrections),
                ],
            }
        )
    for title, lines in noted_sections(cs, _plain):
        items.append(
            {
                "type": "Container",
                "items": [
                    _teams_text(title, weight="bolder"),
                    *(_teams_runs([_run(line)], spacing="none") for line in lines),
                ],
            }
        )
    if cs.escalation:
        items.append(
            {
                "type": "Container",
                "style": "attention",
                "items": [
                    _teams_text(escalation_headline(cs.escalation), weight="bolder", color="attention"),
                    _teams_text(escalation_wording(cs.escalation), spacing="none"),
                ],
            }
        )
    if cs.explanation_is_fallback:
        items.append(_teams_text(FALLBACK_FLAG, weight="bolder", color="warning"))
        items.append(_teams_text(FALLBACK_DETAIL, isSubtle=True, spacing="none"))
    if cs.holds:
        holds = [_teams_runs([_run(_hold_line(h, cs.currency, _plain, locale))]) for h in cs.holds[:HOLDS_SHOWN_MAX]]
        hidden = len(cs.holds) - HOLDS_SHOWN_MAX
        holds += [_teams_text(_more(hidden, "holds"), isSubtle=True)] if hidden > 0 else []
        items.append({"type": "Container", "items": [_teams_text("Holds", weight="bolder"), *holds]})
    section: Element = {"type": "Container", "items": items, "spacing": "large", "separator": True}
    shown = 0
    for violation in cs.violations[:VIOLATIONS_SHOWN_MAX]:
        items.append(_teams_violation(violation, cs.currency, locale))
        # Room is kept for the "and N more" line, so the cap holds once it is added.
        if _json_bytes(section) + 300 > TEAMS_SECTION_BYTES_MAX:
            items.pop()
            break
        shown += 1
    hidden = len(cs.violations) - shown
    if hidden > 0:
        more = _more(hidden, "violated invariants not shown here; the trace records every one")
        items.append(_teams_text(more, isSubtle=True, weight="bolder"))
    return [section]


def _teams_violation(v: Violation, currency: str, locale: str | None) -> Element:
    items: list[Element] = [
        _teams_runs(
            [
                _run(_plain(v.title, TITLE_MAX), weight="bolder"),
                _run(f"  {v.invariant}", fontType="monospace", isSubtle=True),
            ]
        ),
        _teams_runs([_run(_plain(v.explanation, EXPLANATION_MAX))], spacing="small"),
    ]
    if v.amounts:
        facts = [
            (_label(name), format_money(value, currency, locale=locale))
            for name, value in v.amounts[:AMOUNTS_SHOWN_MAX]
        ]
        hidden = len(v.amounts) - AMOUNTS_SHOWN_MAX
        items.append(_teams_facts(facts + ([("…", _more(hidden, "amounts"))] if hidden > 0 else [])))
    if v.lines:
        refs = [_plain(line, REFERENCE_MAX) for line in v.lines]
        items.append(_teams_runs([_run(f"Lines: {_listed(refs, LINES_SHOWN_MAX, 'lines', ', ')}")]))
    clauses = [
        _teams_runs(
            [
                _run(_plain(c.id, REFERENCE_MAX), fontType="monospace"),
                _run(f"  {_plain(c.title, CLAUSE_TITLE_MAX)}"),
            ],
            spacing="none",
        )
        for c in v.clauses[:CLAUSES_SHOWN_MAX]
    ]
    hidden = len(v.clauses) - CLAUSES_SHOWN_MAX
    clauses += [_teams_text(_more(hidden, "clauses"), isSubtle=True, spacing="none")] if hidden > 0 else []
    items.append(_teams_text("Clauses cited" if clauses else "No clauses cited", weight="bolder", spacing="small"))
    items += clauses
    return {"type": "Container", "style": "attention", "items": items, "spacing": "medium"}


def _teams_text(text: str, **options: Any) -> Element:
    """Text we wrote ourselves (no data in it except identifiers and formatted amounts)."""
    return {"type": "TextBlock", "text": text, "wrap": True, **options}


def _run(text: str, **options: Any) -> Element:
    return {"type": "TextRun", "text": text or " ", **options}


def _teams_runs(runs: list[Element], **options: Any) -> Element:
    """Data: TextRuns are never read as markdown."""
    return {"type": "RichTextBlock", "inlines": runs, **options}


def _teams_facts(facts: Sequence[tuple[str, str]]) -> Element:
    """Labels are our words or humanised identifiers, values formatted amounts: no data text goes in a FactSet."""
    return {"type": "FactSet", "facts": [{"title": title, "value": value} for title, value in facts]}


def _json_bytes(element: Element) -> int:
    return len(json.dumps(element, ensure_ascii=False).encode("utf-8"))
