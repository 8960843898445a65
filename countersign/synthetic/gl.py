"""The general ledger stream: journals written straight to CSV, with the state the other files need."""

import bisect
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Protocol

from countersign.synthetic import chart
from countersign.synthetic.money import format_minor
from countersign.synthetic.profile import IntercompanyPair

# (invoice_id, party, invoice_date, due_date, amount_minor)
OpenItem = tuple[str, str, str, str, int]
# (line_number, account, day_index, amount_minor, reference, description)
CashGlLine = tuple[int, str, int, int, str, str]

GL_HEADER = ("line_id", "journal_id", "date", "account", "amount", "reference", "description")
PAYMENT_TERMS_DAYS = 30
EMPLOYEES = 60
_FLUSH_ROWS = 20_000
_PROGRESS_EVERY_LINES = 100_000

_KINDS = (
    "sales_invoice",
    "customer_receipt",
    "vendor_bill",
    "vendor_payment",
    "payroll",
    "payroll_funding",
    "direct_debit",
)
_KIND_WEIGHTS = (22, 18, 22, 18, 8, 2, 10)
_BILL_ACCOUNTS = ("5000", "5000", "5000", "5000", "6100", "6300", "6400", "6400", "6600", "6600")
_DIRECT_DEBITS = (
    ("6200", "CloudDesk Software"),
    ("6200", "LedgerLine SaaS"),
    ("6500", "British Power Co"),
    ("6500", "Thames Water Services"),
    ("6300", "RailPass Travel"),
)
_THREE_LINE_BILL_SHARE = 0.25


class RowWriter(Protocol):
    def writerow(self, row: Iterable[Any], /) -> Any: ...

    def writerows(self, rows: Iterable[Iterable[Any]], /) -> None: ...


def gl_line_id(line_number: int) -> str:
    return f"GL-{line_number:07d}"


@dataclass
class GlResult:
    line_count: int
    journal_count: int
    balances: dict[str, int]
    cash_lines: list[CashGlLine]
    opening_line_numbers: frozenset[int]
    open_ar: list[OpenItem]
    open_ap: list[OpenItem]


@dataclass
class _Stream:
    writer: RowWriter
    days: list[str]
    total_lines: int
    progress: Callable[[int, int], None] | None
    rows: list[tuple[str, str, str, str, str, str, str]] = field(default_factory=list)
    balances: dict[str, int] = field(default_factory=lambda: {a.code: 0 for a in chart.ACCOUNTS})
    cash_lines: list[CashGlLine] = field(default_factory=list)
    line_count: int = 0
    journal_count: int = 0
    next_progress: int = _PROGRESS_EVERY_LINES

    def journal(self, day: int, reference: str, description: str, lines: list[tuple[str, int]]) -> None:
        if sum(amount for _, amount in lines) != 0:
            raise AssertionError(f"unbalanced journal {reference}: {lines}")
        self.journal_count += 1
        journal_id = f"JE-{self.journal_count:06d}"
        on_date = self.days[day]
        rows = self.rows
        balances = self.balances
        for account, amount in lines:
            self.line_count += 1
            rows.append(
                (
                    gl_line_id(self.line_count),
                    journal_id,
                    on_date,
                    account,
                    format_minor(amount),
                    reference,
                    description,
                )
            )
            balances[account] += amount
            if account in chart.CASH_ACCOUNTS:
                self.cash_lines.append((self.line_count, account, day, amount, reference, description))
        if len(rows) >= _FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        self.writer.writerows(self.rows)
        self.rows.clear()
        if self.progress is not None and self.line_count >= self.next_progress:
            self.progress(self.line_count, self.total_lines)
            self.next_progress = (self.line_count // _PROGRESS_EVERY_LINES + 1) * _PROGRESS_EVERY_LINES


def _between(rng: random.Random, low_minor: int, high_minor: int) -> int:
    return low_minor + int(rng.random() * (high_minor - low_minor + 1))


def opening_items(
    rng: random.Random, prefix: str, count: int, parties: list[str], period_start: date
) -> list[OpenItem]:
    items: list[OpenItem] = []
    for index in range(count):
        invoice_date = period_start - timedelta(days=1 + int(rng.random() * 60))
        due_date = invoice_date + timedelta(days=PAYMENT_TERMS_DAYS)
        party = parties[int(rng.random() * len(parties))]
        amount = _between(rng, 50_000, 2_000_000)
        items.append((f"{prefix}-OB-{index + 1:05d}", party, invoice_date.isoformat(), due_date.isoformat(), amount))
    return items


def write_gl(
    rng: random.Random,
    out: RowWriter,
    *,
    days: list[date],
    period: str,
    total_lines: int,
    customers: list[str],
    vendors: list[str],
    opening_ar: list[OpenItem],
    opening_ap: list[OpenItem],
    intercompany: tuple[IntercompanyPair, ...],
    progress: Callable[[int, int], None] | None,
) -> GlResult:
    out.writerow(GL_HEADER)
    day_labels = [d.isoformat() for d in days]
    due_labels = [(d + timedelta(days=PAYMENT_TERMS_DAYS)).isoformat() for d in days]
    stream = _Stream(writer=out, days=day_labels, total_lines=total_lines, progress=progress)

    opening = _opening_lines(rng, opening_ar, opening_ap, intercompany)
    stream.journal(0, f"OB-{period}", "Opening balances brought forward", opening)
    opening_line_numbers = frozenset(range(1, stream.line_count + 1))

    pending_intercompany = list(intercompany)
    fixed_pending = 2 * len(pending_intercompany)
    if total_lines - stream.line_count - fixed_pending < 2:
        raise ValueError(f"gl_lines {total_lines} is too small for the fixed journals")

    open_ar = list(opening_ar)
    open_ap = list(opening_ap)
    cumulative: list[float] = []
    running = 0
    for weight in _KIND_WEIGHTS:
        running += weight
        cumulative.append(running / sum(_KIND_WEIGHTS))
    cumulative[-1] = 1.0
    counters = dict.fromkeys(_KINDS, 0)
    day_count = len(days)
    random_ = rng.random

    while True:
        remaining = total_lines - stream.line_count - fixed_pending
        day = min(day_count - 1, stream.line_count * day_count // total_lines)
        if pending_intercompany and (remaining == 0 or stream.line_count >= total_lines // 2):
            pair = pending_intercompany.pop(0)
            fixed_pending -= 2
            stream.journal(day, f"IC-{pair.counterparty}-{period}", *_intercompany_journal(rng, pair))
            continue
        if remaining <= 0:
            break
        if remaining == 3:
            kind, lines_wanted = "vendor_bill", 3
        else:
            kind = _KINDS[bisect.bisect_right(cumulative, random_())]
            lines_wanted = 2
            if kind == "vendor_bill" and remaining >= 5 and random_() < _THREE_LINE_BILL_SHARE:
                lines_wanted = 3
        if kind == "customer_receipt" and not open_ar:
            kind = "sales_invoice"
        if kind == "vendor_payment" and not open_ap:
            kind = "vendor_bill"

        counters[kind] += 1
        number = counters[kind]
        if kind == "sales_invoice":
            customer = customers[int(random_() * len(customers))]
            amount = _between(rng, 50_000, 2_000_000)
            revenue = chart.PRODUCT_REVENUE if random_() < 0.7 else chart.SERVICE_REVENUE
            invoice_id = f"SI-{number:07d}"
            open_ar.append((invoice_id, customer, day_labels[day], due_labels[day], amount))
            stream.journal(
                day,
                invoice_id,
                f"Sales invoice {invoice_id} to {customer}",
                [(chart.RECEIVABLE_CONTROL, amount), (revenue, -amount)],
            )
        elif kind == "customer_receipt":
            invoice_id, customer, _, _, amount = _pop_random(rng, open_ar)
            stream.journal(
                day,
                f"RCPT-{number:07d}",
                f"Receipt from {customer} for {invoice_id}",
                [(chart.OPERATING_CASH, amount), (chart.RECEIVABLE_CONTROL, -amount)],
            )
        elif kind == "vendor_bill":
            vendor = vendors[int(random_() * len(vendors))]
            amount = _between(rng, 10_000, 1_500_000)
            first = _BILL_ACCOUNTS[int(random_() * len(_BILL_ACCOUNTS))]
            bill_id = f"PI-{number:07d}"
            open_ap.append((bill_id, vendor, day_labels[day], due_labels[day], amount))
            if lines_wanted == 3:
                second = _BILL_ACCOUNTS[int(random_() * len(_BILL_ACCOUNTS))]
                part = amount * (20 + int(random_() * 61)) // 100
                lines = [(first, part), (second, amount - part), (chart.PAYABLE_CONTROL, -amount)]
            else:
                lines = [(first, amount), (chart.PAYABLE_CONTROL, -amount)]
            stream.journal(day, bill_id, f"Invoice {bill_id} from {vendor}", lines)
        elif kind == "vendor_payment":
            bill_id, vendor, _, _, amount = _pop_random(rng, open_ap)
            stream.journal(
                day,
                f"PAY-{number:07d}",
                f"Payment to {vendor} for {bill_id}",
                [(chart.PAYABLE_CONTROL, amount), (chart.OPERATING_CASH, -amount)],
            )
        elif kind == "payroll":
            employee = f"EMP-{int(random_() * EMPLOYEES) + 1:04d}"
            amount = _between(rng, 150_000, 600_000)
            stream.journal(
                day,
                f"SAL-{number:07d}",
                f"Salary payment {employee}",
                [(chart.SALARIES, amount), (chart.PAYROLL_CASH, -amount)],
            )
        elif kind == "payroll_funding":
            amount = _between(rng, 1_000_000, 3_000_000)
            stream.journal(
                day,
                f"TRF-{number:07d}",
                "Transfer from operating to payroll account",
                [(chart.PAYROLL_CASH, amount), (chart.OPERATING_CASH, -amount)],
            )
        else:
            account, supplier = _DIRECT_DEBITS[int(random_() * len(_DIRECT_DEBITS))]
            amount = _between(rng, 2_000, 500_000)
            stream.journal(
                day,
                f"DD-{number:07d}",
                f"Direct debit {supplier}",
                [(account, amount), (chart.OPERATING_CASH, -amount)],
            )

    stream.flush()
    if progress is not None:
        progress(stream.line_count, total_lines)
    if stream.line_count != total_lines:
        raise AssertionError(f"wrote {stream.line_count} GL lines, wanted {total_lines}")
    return GlResult(
        line_count=stream.line_count,
        journal_count=stream.journal_count,
        balances=stream.balances,
        cash_lines=stream.cash_lines,
        opening_line_numbers=opening_line_numbers,
        open_ar=open_ar,
        open_ap=open_ap,
    )


def _pop_random(rng: random.Random, items: list[OpenItem]) -> OpenItem:
    index = int(rng.random() * len(items))
    items[index], items[-1] = items[-1], items[index]
    return items.pop()


def _opening_lines(
    rng: random.Random,
    opening_ar: list[OpenItem],
    opening_ap: list[OpenItem],
    intercompany: tuple[IntercompanyPair, ...],
) -> list[tuple[str, int]]:
    lines = [
        (chart.OPERATING_CASH, _between(rng, 15_000_000, 40_000_000)),
        (chart.PAYROLL_CASH, _between(rng, 4_000_000, 8_000_000)),
    ]
    ar_total = sum(item[4] for item in opening_ar)
    if ar_total:
        lines.append((chart.RECEIVABLE_CONTROL, ar_total))
    ap_total = sum(item[4] for item in opening_ap)
    if ap_total:
        lines.append((chart.PAYABLE_CONTROL, -ap_total))
    lines.append((chart.ACCRUED_LIABILITIES, -_between(rng, 1_000_000, 5_000_000)))
    for pair in intercompany:
        amount = _between(rng, 2_000_000, 12_000_000)
        sign = 1 if pair.account == chart.INTERCOMPANY_RECEIVABLE else -1
        lines.append((pair.account, sign * amount))
    lines.append((chart.RETAINED_EARNINGS, -sum(amount for _, amount in lines)))
    return lines


def _intercompany_journal(rng: random.Random, pair: IntercompanyPair) -> tuple[str, list[tuple[str, int]]]:
    amount = _between(rng, 500_000, 5_000_000)
    if pair.account == chart.INTERCOMPANY_RECEIVABLE:
        return (
            f"Intercompany service recharge to {pair.counterparty}",
            [(pair.account, amount), (chart.SERVICE_REVENUE, -amount)],
        )
    return (
        f"Management fee from {pair.counterparty}",
        [(chart.PROFESSIONAL_FEES, amount), (pair.account, -amount)],
    )
