"""Bank statements derived from the GL cash lines, plus the planted wrong-export feed."""

import random
from dataclasses import dataclass

from countersign.synthetic.gl import CashGlLine
from countersign.synthetic.money import format_minor

BANK_HEADER = ("bank_line_id", "account", "date", "amount", "reference", "description")
# (bank_line_id, account, date, amount, reference, description)
BankRow = tuple[str, str, str, str, str, str]

OUTSTANDING_WINDOW_DAYS = 3
_LOWERCASE_REFERENCE_SHARE = 0.1


@dataclass(frozen=True)
class BankFeeds:
    statements: dict[str, list[BankRow]]
    """The true statement per bank account (what corrected/bank_lines.csv holds)."""
    outstanding_line_numbers: dict[str, list[int]]
    """GL cash lines near period end that are not yet on the statement, per account."""
    wrong_exports: dict[str, list[BankRow]]
    """Per account with a bank_feed_mismatch: the lines of the wrong export that replace its statement."""

    def rows(self, *, corrected: bool) -> list[BankRow]:
        rows: list[BankRow] = []
        for account in sorted(self.statements):
            if not corrected and account in self.wrong_exports:
                rows.extend(self.wrong_exports[account])
            else:
                rows.extend(self.statements[account])
        return rows


def build_bank_feeds(
    rng: random.Random,
    *,
    cash_lines: list[CashGlLine],
    excluded_line_numbers: frozenset[int],
    bank_accounts: tuple[str, ...],
    bank_lag_days: int,
    outstanding_items: int,
    day_labels: list[str],
    wrong_export_lines: dict[str, int],
) -> BankFeeds:
    by_account: dict[str, list[CashGlLine]] = {account: [] for account in bank_accounts}
    for line in cash_lines:
        if line[1] in by_account and line[0] not in excluded_line_numbers:
            by_account[line[1]].append(line)

    last_day = len(day_labels) - 1
    statements: dict[str, list[BankRow]] = {}
    outstanding: dict[str, list[int]] = {}
    wrong_exports: dict[str, list[BankRow]] = {}
    random_ = rng.random
    for account in sorted(by_account):
        lines = by_account[account]
        late = [index for index, line in enumerate(lines) if line[2] > last_day - OUTSTANDING_WINDOW_DAYS]
        skipped = set(rng.sample(late, min(outstanding_items, len(late))))
        outstanding[account] = sorted(lines[index][0] for index in skipped)
        entries: list[tuple[int, int, int, str, str]] = []
        for index, (line_number, _, day, amount, reference, description) in enumerate(lines):
            if index in skipped:
                continue
            bank_day = min(last_day, day + int(random_() * (bank_lag_days + 1)))
            shown = reference.lower() if random_() < _LOWERCASE_REFERENCE_SHARE else reference
            entries.append((bank_day, line_number, amount, shown, description))
        entries.sort()
        statements[account] = [
            (
                f"BNK-{account}-{position:07d}",
                account,
                day_labels[day],
                format_minor(amount),
                shown,
                description,
            )
            for position, (day, _, amount, shown, description) in enumerate(entries, start=1)
        ]
        if account in wrong_export_lines:
            gl_amounts = {line[3] for line in lines}
            wrong_exports[account] = _wrong_export(rng, account, wrong_export_lines[account], gl_amounts, day_labels)
    return BankFeeds(statements=statements, outstanding_line_numbers=outstanding, wrong_exports=wrong_exports)


def _wrong_export(
    rng: random.Random, account: str, count: int, gl_amounts: set[int], day_labels: list[str]
) -> list[BankRow]:
    """Lines exported from another bank account: `EXT-` references and amounts the GL account never saw."""
    entries: list[tuple[int, int, int, str, str]] = []
    references: set[str] = set()
    while len(entries) < count:
        magnitude = 1_000 + int(rng.random() * 2_499_000)
        amount = -magnitude if rng.random() < 0.6 else magnitude
        reference = f"EXT-{int(rng.random() * 100_000_000):08d}"
        if amount in gl_amounts or reference in references:
            continue
        references.add(reference)
        description = "FASTER PAYMENT OUT" if amount < 0 else "BACS CREDIT"
        entries.append((int(rng.random() * len(day_labels)), len(entries), amount, reference, description))
    entries.sort()
    return [
        (
            f"BNK-{account}-E{position:06d}",
            account,
            day_labels[day],
            format_minor(amount),
            reference,
            description,
        )
        for position, (day, _, amount, reference, description) in enumerate(entries, start=1)
    ]
