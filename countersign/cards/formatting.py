"""How figures, times and quorum read on a card. Money arrives as decimal strings and stays Decimal."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation

from countersign.cards.model import DecisionLine, GateCard
from countersign.money.formatting import format_amount, format_money


def money(value: object, currency: str | None = None, *, locale: str | None = None) -> str:
    """`("82213.52", "GBP")` -> `"GBP 82,213.52"`, written in `locale` (None: en_GB) by `countersign.money.formatting`;
    without a
    currency (a summary written before summaries carried one) the figure alone, `"82,213.52"`; anything not a decimal
    is shown as it came."""
    amount = _decimal(value)
    if amount is None:
        return "—" if value is None else str(value)
    return format_amount(amount) if currency is None else format_money(amount, currency, locale=locale)


def share_percent(value: object) -> str:
    """A share such as `"0.5500"` -> `"55.0%"`."""
    share = _decimal(value)
    if share is None:
        return "—" if value is None else str(value)
    return f"{share * 100:.1f}%"


def count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_date(value: object) -> dt.date | None:
    """`"2026-12-18"` -> that date; anything else (another shape, a day that does not exist, not text) -> None."""
    if not isinstance(value, str) or _ISO_DATE.fullmatch(value) is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


def parse_time(value: str) -> dt.datetime | None:
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def utc_time(value: str) -> str:
    """`"2026-12-01T04:11:30.22+00:00"` -> `"2026-12-01 04:11 UTC"`; unparseable text is returned unchanged."""
    parsed = parse_time(value)
    return value if parsed is None else parsed.strftime("%Y-%m-%d %H:%M UTC")


def quorum_progress(card: GateCard) -> str:
    noun = "approval" if card.quorum == 1 else "approvals"
    return f"{card.approvals} of {card.quorum} {noun}, role {card.approver_role}"


def waiting_on(card: GateCard) -> str:
    missing = card.approvals_missing
    noun = "approval" if missing == 1 else "approvals"
    return f"waiting on role {card.approver_role}: {missing} more {noun} needed ({card.approvals} of {card.quorum})"


def decision_verb(decision: str) -> str:
    return "approved" if decision == "approve" else "rejected"


def amended_sums(d: DecisionLine) -> str:
    """An approval with edits in words, both sums: "Certified GBP 41,250.00 (proposed GBP 45,000.00)"; "" for a
    decision that certifies what was proposed."""
    if not d.certified:
        return ""
    currency = d.currency or None
    return f"Certified {money(d.certified, currency)} (proposed {money(d.proposed, currency)})"


STATUS_HEADLINES = {
    "open": "Awaiting decision",
    "approved": "Approved",
    "rejected": "Rejected",
    "expired": "Expired",
    "cancelled": "Cancelled",
    "voided": "Sign-off voided",
}


def _decimal(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        return None
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    return amount if amount.is_finite() else None
