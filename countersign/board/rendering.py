"""The board's Jinja2 environment: templates from countersign/board/templates/, every value HTML-escaped, and the
filters that
write amounts with their currency, codes in words and times in UTC.

Escaping is on for every template (`autoescape=True`), so text from the books, the agents or a person's reason can
never become markup; the templates carry no inline script or style (the board's Content-Security-Policy forbids
both), only the stylesheet at /board/static/board.css.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from countersign.certificates.amendment import from_minor
from countersign.money.formatting import format_money
from countersign.policy.wording import in_words

TEMPLATES = Path(__file__).parent / "templates"
DASH = "—"


def money_filter(locale: str) -> Callable[[Decimal | str | int | None, str], str]:
    def money(amount: Decimal | str | int | None, currency: str) -> str:
        """An amount with its currency in the board's locale; a missing amount is a dash."""
        if amount is None or amount == "":
            return DASH
        return format_money(Decimal(str(amount)), currency, locale=locale)

    return money


def minor_money_filter(locale: str) -> Callable[[int | None, str | None], str]:
    def minor_money(minor: int | None, currency: str | None) -> str:
        """An amount in the currency's minor units (an approval with edits' sums) with its currency."""
        if minor is None or not currency:
            return DASH
        return format_money(from_minor(minor, currency.strip()), currency.strip(), locale=locale)

    return minor_money


def utc_time(value: datetime | str | None) -> str:
    """`2026-10-31T14:05:09Z` -> `2026-10-31 14:05:09 UTC`; a missing time is a dash."""
    if value is None or value == "":
        return DASH
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def share(value: Decimal | None) -> str:
    """A share from 0 to 1 as a percentage with one decimal: `Decimal("0.0456")` -> `4.6%`."""
    if value is None:
        return DASH
    return f"{value * 100:.1f}%"


def words(code: str | None) -> str:
    return DASH if code is None else in_words(str(code))


def board_environment(locale: str) -> Environment:
    """The environment every board page renders with, amounts in `locale` (a CLDR name such as en_GB)."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["money"] = money_filter(locale)
    env.filters["minor_money"] = minor_money_filter(locale)
    env.filters["words"] = words
    env.filters["utc"] = utc_time
    env.filters["share"] = share
    return env
