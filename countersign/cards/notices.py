"""Plain-text notices posted in a close's channels (or to one person), rendered from facts the deliverer read from
the tables.

The outbox names a template (`gate_overdue`, `checkpoint`, `passkey_enrolled`) and its ids and numbers; these
functions are the only place the words come from.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Protocol

from countersign.cards.escape import slack_data, slack_own, teams_markdown
from countersign.cards.platform_limits import SLACK_SECTION_TEXT_CHARS
from countersign.cards.text import fit, one_line
from countersign.money.formatting import format_money
from countersign.states import NoticeKind


def _utc(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def overdue_reminder(
    *,
    task_title: str,
    entity: str,
    period: str,
    role: str,
    missing: int,
    due_at: dt.datetime,
    expires_at: dt.datetime | None,
) -> str:
    expiry = f" If nobody decides by {_utc(expires_at)}, it expires and the task runs again." if expires_at else ""
    text = (
        f"Reminder for role {role}: the {task_title} gate of {entity} {period} was due {_utc(due_at)} and still"
        f" needs {max(missing, 0)} approval(s). Waiting never approves it.{expiry}"
    )
    return fit(text, SLACK_SECTION_TEXT_CHARS)


class OverdueGate(Protocol):
    """What a reminder names, read from a gate row (`countersign.store.gates.GateRecord` has these attributes)."""

    @property
    def task(self) -> str: ...
    @property
    def title(self) -> str | None: ...
    @property
    def entity(self) -> str: ...
    @property
    def period(self) -> str: ...
    @property
    def approver_role(self) -> str: ...
    @property
    def missing(self) -> int: ...
    @property
    def due_at(self) -> dt.datetime: ...
    @property
    def expires_at(self) -> dt.datetime | None: ...


def overdue_reminder_for(gate: OverdueGate) -> str:
    """The reminder for one overdue gate: the words the channel gets and the trace records."""
    return overdue_reminder(
        task_title=gate.title or gate.task,
        entity=gate.entity,
        period=gate.period,
        role=gate.approver_role,
        missing=gate.missing,
        due_at=gate.due_at,
        expires_at=gate.expires_at,
    )


def checkpoint_notice(*, note: str, entity: str | None, period: str | None) -> str:
    after = f" after sign-off of {entity} {period}" if entity and period else ""
    return fit(
        f"Close trace checkpoint{after}. Keep this message: it witnesses the log.\n```\n{note}```",
        SLACK_SECTION_TEXT_CHARS,
    )


def passkey_enrolled_notice(*, label: str, created_at: dt.datetime, board_url: str) -> str:
    """The direct message telling a person a passkey was enrolled for them; the label is Slack data, on one line."""
    passkeys_url = slack_own(f"{board_url.rstrip('/')}/board/passkeys")
    return fit(
        f"A passkey named “{one_line(slack_data(label))}” was enrolled for you on the Close Board at"
        f" {_utc(created_at)}. If this was not you, revoke it at {passkeys_url} and tell your Countersign owner.",
        SLACK_SECTION_TEXT_CHARS,
    )


# Each notice's words: what its head says of the sum, and what being late means (HGCRA 1996 ss. 110B and 111).
_NOTICE_WORDS = {
    NoticeKind.PAYMENT: ("Payment notice", "the sum considered due is", "the payee may give a default notice"),
    NoticeKind.PAY_LESS: ("Pay-less notice", "pays", "the notified sum is payable in full"),
}


def notice_post(
    kind: NoticeKind,
    *,
    certificate_id: str,
    currency: str,
    notified_sum: Decimal,
    sum_to_pay: Decimal,
    deadline: dt.date,
    served_in_time: bool,
    sha256: str,
    document: str,
    locale: str | None = None,
) -> str:
    """The channel's copy of a payment or pay-less notice: the sum it states, by when it had to be given, then the
    document itself."""
    title, states, late = _NOTICE_WORDS[kind]
    when = (
        f"given in time (deadline {deadline.isoformat()})"
        if served_in_time
        else f"given LATE (deadline {deadline.isoformat()}): {late}"
    )
    head = (
        f"{title} for certificate {one_line(certificate_id)}: {states}"
        f" {format_money(sum_to_pay, currency, locale=locale)} of the"
        f" {format_money(notified_sum, currency, locale=locale)} applied for, {when}. Document SHA-256 {sha256[:16]}…"
    )
    return fit(f"{head}\n```\n{document}```", SLACK_SECTION_TEXT_CHARS)


def payee_default_notice_post(
    *,
    certificate_id: str,
    currency: str,
    stated_sum: Decimal,
    claimed_sum: Decimal | None,
    basis: str,
    given_on: dt.date,
    payment_notice_deadline: dt.date,
    payment_notice_given_late: bool,
    days_late: int,
    final_date: dt.date,
    postponed_final_date: dt.date,
    locale: str | None = None,
    platform: str | None = None,
) -> str:
    """The words of the payee's default notice (HGCRA 1996 s. 110B): the sum the payee states and its basis, why it
    could be given, and the final date for payment it postpones. The basis is the payee's own words: inert data on
    `platform` ("slack" or "teams"; none for a terminal)."""
    data = {"slack": slack_data, "teams": teams_markdown}.get(platform or "", str)
    missing = "was given late" if payment_notice_given_late else "was not given"
    claim = (
        f" (the application claimed {format_money(claimed_sum, currency, locale=locale)})"
        if claimed_sum is not None and claimed_sum != stated_sum
        else ""
    )
    day_word = "day" if days_late == 1 else "days"
    text = (
        f"Payee's default notice for certificate {one_line(certificate_id)}, given {given_on.isoformat()}: the"
        f" payment notice due by {payment_notice_deadline.isoformat()} {missing}, so the payee states"
        f" {format_money(stated_sum, currency, locale=locale)} is due{claim}. Basis: {one_line(data(basis))}. The final"
        f" date for payment moves from {final_date.isoformat()} to {postponed_final_date.isoformat()}"
        f" ({days_late} {day_word} later)."
    )
    return fit(text, SLACK_SECTION_TEXT_CHARS)


def _day(moment: dt.datetime) -> str:
    """An exclusive end as the last day a person is away: 2026-12-15T00:00Z is "14 Dec 2026"."""
    last = (moment.astimezone(dt.UTC) - dt.timedelta(microseconds=1)).date()
    return f"{last.day} {last.strftime('%b %Y')}"


def gate_routed_notice(
    *,
    platform: str,
    task_title: str,
    entity: str,
    period: str,
    due_at: dt.datetime,
    away_name: str | None,
    away_until: dt.datetime | None,
    gate_url: str,
) -> str:
    """The direct message to a person an overdue gate was routed to: why it came to them, and where to decide it."""
    data = slack_data if platform == "slack" else teams_markdown
    title, where = one_line(data(task_title)), f"{one_line(data(entity))} {one_line(data(period))}"
    if away_name and away_until:
        why = f"{one_line(data(away_name))} is away until {_day(away_until)}; this approval was routed to you."
    else:
        why = "This approval is overdue and you are one of the people who may decide it."
    link = f"<{slack_own(gate_url)}|Open it in the Close Board>" if platform == "slack" else f"Open it: {gate_url}"
    text = (
        f"{why} The {title} gate of {where} was due {_utc(due_at)}. Being asked does not change who may decide:"
        f" the gate still needs its role and a person who did not prepare the work. {link}"
    )
    return fit(text, SLACK_SECTION_TEXT_CHARS)
