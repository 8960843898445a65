"""A bank reconciliation too large for one message: exact matches in SQL, the rest to the specialist in pages.

docs/adr/0041. The specialist's matcher pairs a bank line only with a GL line of the same account, amount and
normalised reference, so the lines split into independent matching groups. PostgreSQL pairs every group that holds
exactly one bank line and one GL line within the date window (a set-based query over the loaded lines; by far the
most lines of real books). Every other line (the residue) streams out of a server-side cursor, whole groups at a
time, into pages of at most PAGE_LINES lines and PAGE_BYTES bytes; each page is its own A2A message under its own
idempotency key, and the specialist matches it exactly as it would have matched the whole account. A closing
message carries each account's totals, the pages' figures and the first unmatched lines; the specialist decides the
halt and writes the explanation from what it received there. No message holds a whole account.

The queries (the sizes, the classifying pass and its server-side cursor) live in `countersign.store.bank_lines`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

import orjson
from psycopg import AsyncConnection

from countersign.engine.close_session import CloseSession
from countersign.engine.dispatch import (
    DispatchConflict,
    SpecialistCall,
    dispatch_once,
)
from countersign.engine.leases import Connect
from countersign.engine.workflows.base import Escalate, TaskContext
from countersign.engine.workflows.close import inputs
from countersign.policy import EscalationReason
from countersign.specialists.reconciliation import LISTED_LINES
from countersign.specialists.wire import pack_rows
from countersign.store import bank_lines as bank_lines_store
from countersign.store.bank_lines import CURSOR_ROWS as CURSOR_ROWS
from countersign.store.bank_lines import WORK_MEM as WORK_MEM
from countersign.store.bank_lines import CashAccountSize as CashAccountSize
from countersign.store.bank_lines import DecidedRow as DecidedRow
from countersign.store.bank_lines import ResidueLine as ResidueLine

PAGE_LINES = 2_000
"""Lines (bank and GL together) on one page: about 200 KB of JSON with ordinary references."""
PAGE_BYTES = 1024 * 1024
"""No page's lines exceed this many bytes of JSON, whatever the references hold: 1/16 of the specialists' 16 MiB
request limit. A constant, not a setting: the bound on the largest message must not move with configuration."""

Say = Callable[[str], None]
_progress: ContextVar[Say | None] = ContextVar("bank_pages_progress", default=None)


@contextmanager
def progress_to(say: Say) -> Iterator[None]:
    """Send the phrases of a paged reconciliation (which page of which account) to `say` while the block runs
    (a command's spinner: `with spinner(...) as say, progress_to(say): ...`)."""
    token = _progress.set(say)
    try:
        yield
    finally:
        _progress.reset(token)


def _say(phrase: str) -> None:
    say = _progress.get()
    if say is not None:
        say(phrase)


class PageTooLarge(ValueError):
    """One matching group (same account, amount and reference) is larger than a page: it cannot be split without
    changing which lines match, so the task fails naming it."""

    def __init__(self, account: str, amount: Decimal, lines: int) -> None:
        super().__init__(
            f"bank account {account}: {lines} unmatched lines share the amount {amount} and one reference, more than"
            f" a reconciliation page holds ({PAGE_LINES} lines, {PAGE_BYTES} bytes)"
        )
        self.account = account
        self.amount = amount


@dataclass(frozen=True)
class DecidedLines:
    account: str
    bank: bool
    state: str
    lines: int
    amount: Decimal


async def cash_account_sizes(conn: AsyncConnection[Any], book_set_id: int, feed: int) -> list[CashAccountSize]:
    return await bank_lines_store.cash_account_sizes(conn, book_set_id, feed)


def page_key(close_id: str, task: str, attempt: int, feed: int, account: str, page: int) -> str:
    """A page's idempotency key: its place, not its content; a page that changes under it is a conflict."""
    return hashlib.sha256(f"dispatch-page:v1:{close_id}:{task}:{attempt}:{feed}:{account}:{page}".encode()).hexdigest()


async def dispatch_page(
    connect: Connect,
    call: SpecialistCall,
    *,
    close_id: str,
    task: str,
    attempt: int,
    specialist: str,
    key: str,
    payload: dict[str, Any],
    actor: str,
) -> dict[str, Any]:
    """`countersign.engine.dispatch.dispatch_once` under a key the caller chose: the same claim, lease, failure count
    and trace
    events, and the same conflict when the key's stored request hash differs from this payload's. A page another
    worker is calling raises DispatchInFlight (the task waits for the next advance) instead of waiting here."""
    outcome = await dispatch_once(
        connect,
        call,
        close_id=close_id,
        task=task,
        attempt=attempt,
        specialist=specialist,
        payload=payload,
        actor=actor,
        wait=False,
        key=key,
    )
    return outcome.result


def _wire(line: ResidueLine) -> dict[str, str]:
    return {"id": line.id, "date": line.line_date.isoformat(), "amount": str(line.amount), "reference": line.reference}


def _size(line: dict[str, str]) -> int:
    return len(orjson.dumps(line)) + 1


@dataclass
class AccountTally:
    """What the database decided and the pages added up to for one account, and its first unmatched lines in the
    matcher's order (date, then id)."""

    size: CashAccountSize
    decided: dict[tuple[bool, str], DecidedLines] = field(default_factory=dict)
    pages: int = 0
    paged_bank_lines: int = 0
    paged_gl_lines: int = 0
    paged_matched: int = 0
    paged_unmatched_bank_amount: Decimal = Decimal(0)
    listed_bank: list[tuple[date, str, dict[str, str]]] = field(default_factory=list)
    listed_gl: list[tuple[date, str]] = field(default_factory=list)

    def decided_lines(self, bank: bool, state: str) -> int:
        found = self.decided.get((bank, state))
        return 0 if found is None else found.lines

    def list_bank(self, lines: list[tuple[date, str, dict[str, str]]]) -> None:
        self.listed_bank = sorted(self.listed_bank + lines, key=lambda item: (item[0], item[1]))[:LISTED_LINES]

    def list_gl(self, lines: list[tuple[date, str]]) -> None:
        self.listed_gl = sorted(self.listed_gl + lines)[:LISTED_LINES]

    def add(self, sent: Mapping[str, dict[str, str]], sent_gl: Mapping[str, date], result: Mapping[str, Any]) -> None:
        self.pages += 1
        self.paged_bank_lines += len(sent)
        self.paged_gl_lines += len(sent_gl)
        self.paged_matched += int(result["matched"])
        self.paged_unmatched_bank_amount += Decimal(str(result["unmatched_bank_amount"]))
        self.list_bank(
            [(date.fromisoformat(sent[i]["date"]), i, sent[i]) for i in result["unmatched_bank"][:LISTED_LINES]]
        )
        self.list_gl([(sent_gl[i], i) for i in result["unmatched_gl"][:LISTED_LINES]])

    def entry(self, equal_amounts: set[Decimal]) -> dict[str, Any]:
        """The account in the closing message."""
        unmatched_bank = self.decided.get((True, "unmatched"))
        return {
            "account": self.size.account,
            "bank_lines": self.size.bank_lines,
            "gl_lines": self.size.gl_lines,
            "matched_in_database": self.decided_lines(True, "matched"),
            "unmatched_bank_in_database": self.decided_lines(True, "unmatched"),
            "unmatched_gl_in_database": self.decided_lines(False, "unmatched"),
            "unmatched_bank_amount_in_database": inputs.money(
                None if unmatched_bank is None else unmatched_bank.amount
            ),
            "pages": self.pages,
            "paged_bank_lines": self.paged_bank_lines,
            "paged_gl_lines": self.paged_gl_lines,
            "paged_matched": self.paged_matched,
            "paged_unmatched_bank_amount": inputs.money(self.paged_unmatched_bank_amount),
            "unmatched_bank_lines": [
                {**line, "ledger_has_equal_amount": Decimal(line["amount"]) in equal_amounts}
                for _, _, line in self.listed_bank
            ],
            "unmatched_gl": [line_id for _, line_id in self.listed_gl],
        }


def check_page_result(
    account: str, page: int, bank: Mapping[str, Any], gl: Mapping[str, Any], result: Mapping[str, Any]
) -> None:
    """A page's result counts the lines it was sent and names only those; else the specialist answered another
    question."""
    problems = []
    if result.get("kind") != "bank_page" or result.get("account") != account or result.get("page") != page:
        problems.append(f"answered {result.get('kind')!r} for {result.get('account')!r} page {result.get('page')!r}")
    if result.get("bank_lines") != len(bank) or result.get("gl_lines") != len(gl):
        problems.append(f"counted {result.get('bank_lines')}/{result.get('gl_lines')}, sent {len(bank)}/{len(gl)}")
    matched = result.get("matched")
    if not isinstance(matched, int) or not 0 <= matched <= min(len(bank), len(gl)):
        problems.append(f"matched {matched!r}")
    unmatched_bank, unmatched_gl = result.get("unmatched_bank"), result.get("unmatched_gl")
    if not isinstance(unmatched_bank, list) or not set(unmatched_bank) <= bank.keys():
        problems.append("unmatched bank lines it was not sent")
    elif isinstance(matched, int) and len(unmatched_bank) != len(bank) - matched:
        problems.append(f"{len(unmatched_bank)} unmatched bank lines of {len(bank)} with {matched} matched")
    if not isinstance(unmatched_gl, list) or not set(unmatched_gl) <= gl.keys():
        problems.append("unmatched GL lines it was not sent")
    if problems:
        raise Escalate(
            EscalationReason.CONTRADICTORY_EVIDENCE,
            f"bank account {account}, page {page}: the specialist's result does not fit the page: "
            + "; ".join(problems),
        )


async def paged_input(
    session: CloseSession,
    call: SpecialistCall,
    tc: TaskContext,
    *,
    page_lines: int = PAGE_LINES,
    force_pages: bool = False,
) -> dict[str, Any]:
    """The bank reconciliation's message: the whole payload as before when every cash line fits one page, else the
    closing `bank_pages` message, after every page was matched by the specialist (pages are sent with no connection
    and no lock of the close held, as every specialist call is)."""
    conn = session.conn
    book_set_id = tc.close.book_set_id
    feed = await inputs.latest_feed_version(conn, book_set_id)
    sizes = await cash_account_sizes(conn, book_set_id, feed)
    if not force_pages and sum(size.bank_lines + size.gl_lines for size in sizes) <= page_lines:
        whole = await inputs.bank_reconciliation_input(conn, book_set_id, tc.policy)
        if len(orjson.dumps(whole)) <= PAGE_BYTES:
            return whole
    functional = await inputs.functional_currency(conn, book_set_id)
    foreign = [size.account for size in sizes if size.currency is not None and size.currency != functional]
    fx = {
        size.account: await inputs.unrealised_difference(conn, book_set_id, size.account, size.currency, functional)
        for size in sizes
        if size.currency is not None and size.account in foreign
    }
    window_days = tc.policy.reconciliation.date_window_days
    tallies = {size.account: AccountTally(size) for size in sizes}
    params = {
        "book_set_id": book_set_id,
        "feed": feed,
        "accounts": list(tallies),
        "foreign": foreign,
        "window_days": window_days,
        "listed": LISTED_LINES,
    }
    async with session.let_go():
        await _send_pages(session.connect, call, tc, params, tallies, page_lines)
    accounts = []
    for size in sizes:
        tally = tallies[size.account]
        equal = await inputs.gl_amounts_present(
            session.conn,
            book_set_id,
            size.account,
            [Decimal(line["amount"]) for _, _, line in tally.listed_bank],
            in_currency=size.account in fx,
        )
        entry = tally.entry(equal)
        if size.account in fx:
            assert size.currency is not None
            entry["currency"] = size.currency
            entry["fx"] = fx[size.account]
        accounts.append(entry)
    return {
        "kind": "bank_pages",
        "date_window_days": window_days,
        "unmatched_tolerance": str(tc.policy.reconciliation.unmatched_tolerance),
        "feed_version": feed,
        "page_lines": page_lines,
        "accounts": accounts,
    }


async def _send_pages(
    connect: Connect,
    call: SpecialistCall,
    tc: TaskContext,
    params: Mapping[str, Any],
    tallies: dict[str, AccountTally],
    page_lines: int,
) -> None:
    """Stream the lines' classification from a server-side cursor: the totals and the first unmatched lines into
    the tallies, the residue page by page to the specialist; memory holds one page."""
    specialist = tc.task.specialist
    assert specialist is not None
    page: list[ResidueLine] = []
    page_bytes = 0
    block: list[ResidueLine] = []
    block_bytes = 0
    numbers: dict[str, int] = {}

    async def send() -> None:
        nonlocal page, page_bytes
        if not page:
            return
        account = page[0].account
        number = numbers.get(account, 0) + 1
        numbers[account] = number
        bank = {line.id: _wire(line) for line in page if line.bank}
        gl = {line.id: _wire(line) for line in page if not line.bank}
        payload = {
            "kind": "bank_page",
            "account": account,
            "page": number,
            "date_window_days": params["window_days"],
            "bank_rows": pack_rows(list(bank.values())),
            "gl_rows": pack_rows(list(gl.values())),
        }
        _say(f"bank reconciliation: account {account}, page {number} ({len(page):,} lines)")
        key = page_key(tc.close.close_id, tc.task.id, tc.attempt, params["feed"], account, number)
        try:
            result = await dispatch_page(
                connect,
                call,
                close_id=tc.close.close_id,
                task=tc.task.id,
                attempt=tc.attempt,
                specialist=specialist,
                key=key,
                payload=payload,
                actor=tc.actor,
            )
        except DispatchConflict as conflict:
            raise Escalate(
                EscalationReason.CONTRADICTORY_EVIDENCE,
                f"bank account {account}, page {number}: the page differs from the one sent before under its key"
                f" ({conflict})",
            ) from conflict
        check_page_result(account, number, bank, gl, result)
        tallies[account].add(bank, {i: date.fromisoformat(line["date"]) for i, line in gl.items()}, result)
        page, page_bytes = [], 0

    async def close_block() -> None:
        nonlocal page, page_bytes, block, block_bytes
        if not block:
            return
        if page and (
            page[0].account != block[0].account
            or len(page) + len(block) > page_lines
            or page_bytes + block_bytes > PAGE_BYTES
        ):
            await send()
        page.extend(block)
        page_bytes += block_bytes
        block, block_bytes = [], 0

    _say("bank reconciliation: matching the one-to-one lines in the database")
    async with connect() as conn, conn.transaction(), bank_lines_store.decided_lines(conn, params) as cur:
        current: tuple[str, Decimal, str | None] | None = None
        async for row in cur:
            tally = tallies[row.account]
            if row.part == 0:
                tally.decided[(row.bank, row.state)] = DecidedLines(
                    row.account, row.bank, row.state, row.lines, row.amount
                )
                continue
            line = row.line()
            if row.part == 1:
                if line.bank:
                    tally.list_bank([(line.line_date, line.id, _wire(line))])
                else:
                    tally.list_gl([(line.line_date, line.id)])
                continue
            key = (line.account, line.amount, line.group_key)
            if key != current:
                await close_block()
                current = key
            block.append(line)
            block_bytes += _size(_wire(line))
            if len(block) > page_lines or block_bytes > PAGE_BYTES:
                raise PageTooLarge(line.account, line.amount, len(block))
        await close_block()
        await send()
