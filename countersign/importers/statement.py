"""A bank statement as every importer reads it, whatever the bank wrote: camt.053, MT940, OFX or CSV.

Amounts are signed Decimals in the statement's currency: a credit to the account (money in) is positive, a debit
(money out) negative. Only booked entries are kept; pending and information-only entries are not movements.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from enum import StrEnum


class StatementFormat(StrEnum):
    CAMT053 = "camt053"
    MT940 = "mt940"
    OFX = "ofx"
    CSV = "csv"


@dataclass(frozen=True)
class StatementEntry:
    """One booked movement on the account."""

    entry_id: str
    """Unique within the file: the bank's own reference for the entry (camt AcctSvcrRef, MT940 bank reference,
    OFX FITID) where it gives one, else `<statement_id>-<n>` counted from 1 in file order."""
    booking_date: date
    value_date: date | None
    amount: Decimal
    """Signed, in the statement's currency: credit positive, debit negative. Never -0 (normalised to 0)."""
    reference: str
    """What the payer or payee wrote to identify the payment: end-to-end id, customer reference, cheque number."""
    bank_reference: str
    """The bank's reference for the booking (camt AcctSvcrRef, MT940 `//` bank reference, OFX FITID); may be empty."""
    description: str
    """Remittance information or the bank's narrative, one line."""
    reversal: bool = False
    """The bank marks this entry as reversing an earlier one (camt RvslInd, MT940 RC/RD)."""
    transactions: int = 1
    """How many transactions a batch booking carries (camt NtryDtls/Btch or TxDtls count); 1 when single."""


@dataclass(frozen=True)
class BankStatement:
    """One statement of one account: its balances and the booked entries between them.

    Every importer checks `opening_balance + sum(entries) == closing_balance` before returning one.
    """

    statement_id: str
    bank_account: str
    """The account as the bank names it: an IBAN, or a sort code and number, or the OFX ACCTID."""
    currency: str
    from_date: date
    to_date: date
    opening_balance: Decimal
    closing_balance: Decimal
    entries: tuple[StatementEntry, ...]
    source: str
    """The file the statement came from (its name, never a path)."""
    format: StatementFormat
    opening_stated: bool = True
    """False when the file states only the closing balance (OFX LEDGERBAL) and the opening was derived from it: the
    statement's own arithmetic then proves nothing, and the loader checks the opening against the account's
    previous statement instead."""

    @property
    def movements(self) -> Decimal:
        return sum((entry.amount for entry in self.entries), Decimal("0"))
