"""The words of a voided sign-off (docs/adr/0046): one sentence per change that voided a gate's approval, shown on the
gate's card, on the board and in the close's trace. Pure: no I/O."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Protocol

from countersign.money.formatting import format_money


class VoidingChange(Protocol):
    """What a sentence names, read from a void row (`countersign.store.sign_off_voids.SignOffVoid` has these)."""

    @property
    def change_table(self) -> str: ...
    @property
    def change_ref(self) -> str: ...
    @property
    def change_line(self) -> str: ...
    @property
    def account(self) -> str: ...
    @property
    def account_name(self) -> str | None: ...
    @property
    def description(self) -> str: ...
    @property
    def amount(self) -> Decimal: ...
    @property
    def currency(self) -> str: ...
    @property
    def changed_at(self) -> dt.datetime: ...


def _utc(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _account(change: VoidingChange) -> str:
    return f"{change.account} {change.account_name}" if change.account_name else change.account


def void_sentence(change: VoidingChange, *, locale: str | None = None) -> str:
    """`Sign-off voided: journal JE-0042 posted GBP 1,250.00 to 1010 Bank after approval (2026-10-31 17:02 UTC).`"""
    money = format_money(change.amount, change.currency, locale=locale)
    when = _utc(change.changed_at)
    if change.change_table == "journal_line":
        what = f"ledger journal {change.change_ref} ({change.description}) posted {money} to {_account(change)}"
    elif change.change_table == "book_gl_line":
        what = f"journal {change.change_ref} posted {money} to {_account(change)}"
    elif change.change_table == "book_bank_line":
        what = f"bank line {change.change_ref} of bank {change.change_line} moved {money} on {_account(change)}"
    elif change.change_table == "certified_accrual":
        what = (
            f"certificate {change.change_ref} ({change.description}) certified {money} to accrue on {_account(change)}"
        )
    else:
        what = (
            f"a new version of certificate {change.change_ref} ({change.description}, {change.change_line}) claims"
            f" {money} on contract {change.account}"
        )
    return f"Sign-off voided: {what} after approval ({when})."
