"""A bank reconciliation in pages (docs/adr/0041) reconciles exactly as the whole payload did, and no message holds
more than a page.

The default books' cash accounts are small, so the pages are forced with a page of a few lines: the same books, the
same specialists over A2A, once whole and once paged.
"""

from __future__ import annotations

import csv
import dataclasses
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from countersign.engine.close_session import CloseSession
from countersign.engine.dispatch import DispatchConflict, input_digest
from countersign.engine.leases import connect_to
from countersign.engine.orchestrator import advance
from countersign.engine.runs import load_close, task_rows
from countersign.engine.workflows import TaskContext
from countersign.engine.workflows.close import bank_pages, inputs
from countersign.engine.workflows.close.reconciliation import BankReconciliation
from countersign.specialists.reconciliation import LISTED_LINES
from countersign.specialists.wire import pack_rows, unpack_rows
from tests.support import count, start_default_close

BANK = "bank_reconciliation"
HANDLER = "close.bank_reconciliation"
PAGE_LINES = 6
COMPARED = ("account", "bank_lines", "gl_lines", "matched", "unmatched_bank", "unmatched_gl", "unmatched_share")
COMPARED += ("unmatched_bank_amount", "halt", "currency", "fx")


class Recorder:
    """The engine's specialist call, recording every message and result it carries."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.sent: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []

    async def __call__(self, specialist: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
        self.sent.append(payload)
        result: dict[str, Any] = await self.call(specialist, payload, key)
        self.results.append(result)
        return result


def _lines(page: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    return unpack_rows(page[key])


def _paged_ctx(engine_ctx: Any, recorder: Recorder, page_lines: int = PAGE_LINES) -> Any:
    handlers = {**engine_ctx.handlers, HANDLER: BankReconciliation(page_lines, force_pages=True)}
    return dataclasses.replace(engine_ctx, handlers=handlers, call=recorder)


def _projection(result: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of a result; a paged one lists the first LISTED_LINES unmatched lines in the matcher's order."""
    listed = {"unmatched_bank", "unmatched_gl"}
    return {
        "accounts": [
            {key: entry.get(key)[:LISTED_LINES] if key in listed else entry.get(key) for key in COMPARED}
            for entry in result["accounts"]
        ],
        "halted": result["halted"],
        "halt_reason": result["halt_reason"],
        "explanation": result.get("explanation"),
    }


# Bank line, GL line (same amount): references the database can or cannot normalise as the specialist does.
DUPLICATE_GROUPS = 8
TRICKY = (
    ("  pay-777 ", "PAY-777", 0),  # printable ASCII: matched exactly in the database
    ("STRASSE-1", "straße-1", 1),  # equal only under casefold: the specialist's to match
    ("TAB-1\t", "tab-1", 0),  # stripped tab: the specialist's
    ("A B", "A  B", 0),  # not equal anywhere
    ("LATE-1", "LATE-1", 10),  # outside the window
)


def _with_tricky_lines(books: Path, out: Path) -> Path:
    shutil.copytree(books, out)
    with (
        (out / "gl_lines.csv").open("a", encoding="utf-8", newline="") as gl,
        (out / "bank_lines.csv").open("a", encoding="utf-8", newline="") as bank,
    ):
        gl_rows, bank_rows = csv.writer(gl), csv.writer(bank)
        for n, (bank_ref, gl_ref, days) in enumerate(TRICKY, start=1):
            amount = f"-{777 + n}.01"
            gl_rows.writerow([f"GL-T{n}", f"JE-T{n}", "2026-10-10", "1010", amount, gl_ref, "test"])
            gl_rows.writerow([f"GL-T{n}-OFF", f"JE-T{n}", "2026-10-10", "6000", amount[1:], gl_ref, "test"])
            bank_rows.writerow([f"BNK-T{n}", "1010", f"2026-10-{10 + days}", amount, bank_ref, "test"])
        # Two bank lines and one GL line share amount and reference: the earlier bank line (within the window) takes it.
        gl_rows.writerow(["GL-D1", "JE-D1", "2026-10-12", "1010", "-990.01", "DUP-1", "test"])
        gl_rows.writerow(["GL-D1-OFF", "JE-D1", "2026-10-12", "6000", "990.01", "DUP-1", "test"])
        bank_rows.writerow(["BNK-D1", "1010", "2026-10-10", "-990.01", "dup-1", "test"])
        bank_rows.writerow(["BNK-D2", "1010", "2026-10-12", "-990.01", "DUP-1", "test"])
        for n in range(2, 2 + DUPLICATE_GROUPS):  # more groups the specialist must match, for several pages
            amount = f"-{990 + n}.01"
            gl_rows.writerow([f"GL-D{n}", f"JE-D{n}", "2026-10-12", "1010", amount, f"DUP-{n}", "test"])
            gl_rows.writerow([f"GL-D{n}-OFF", f"JE-D{n}", "2026-10-12", "6000", amount[1:], f"DUP-{n}", "test"])
            for side in ("A", "B"):
                bank_rows.writerow([f"BNK-D{n}{side}", "1010", "2026-10-13", amount, f"DUP-{n}", "test"])
    return out


@pytest.fixture
def books(default_books: Path, tmp_path: Path) -> Path:
    """The default books with the lines above added to account 1010."""
    return _with_tricky_lines(default_books, tmp_path / "books")


async def _task_context(conn: Any, runtime: Any, engine_ctx: Any, close_id: str) -> TaskContext:
    close = await load_close(conn, close_id)
    task = runtime.workflow.task(BANK)
    return TaskContext(close, task, 1, runtime.policy, engine_ctx.actor)


async def test_a_paged_reconciliation_gives_the_whole_payloads_result(
    conn: Any, runtime: Any, engine_ctx: Any, books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, books)
    tc = await _task_context(conn, runtime, engine_ctx, close_id)
    whole_payload = await inputs.bank_reconciliation_input(conn, tc.close.book_set_id, runtime.policy)
    whole = await engine_ctx.call("reconciliation", whole_payload, "whole-" + input_digest(whole_payload))
    lines = sum(len(a["bank_lines"]) + len(a["gl_lines"]) for a in whole_payload["accounts"])
    assert whole["halted"] and lines > 10 * PAGE_LINES  # a halt to explain, and many pages

    recorder = Recorder(engine_ctx.call)
    session = CloseSession(connect_to(conn), close_id)
    assert await session.acquire(wait=True)
    phrases: list[str] = []
    with bank_pages.progress_to(phrases.append):
        summary = await bank_pages.paged_input(session, recorder, tc, page_lines=PAGE_LINES, force_pages=True)
    await session.release()
    paged = await engine_ctx.call("reconciliation", summary, "summary-" + input_digest(summary))

    assert _projection(paged) == _projection(whole)
    assert phrases[0] == "bank reconciliation: matching the one-to-one lines in the database"
    assert "bank reconciliation: account 1010, page 2 (" in "\n".join(phrases)  # progress names every page
    first = next(entry for entry in whole["accounts"] if entry["account"] == "1000")
    assert len(first["unmatched_gl"]) > LISTED_LINES  # the cap is exercised: counted in full, listed in part
    paged_first = next(entry for entry in paged["accounts"] if entry["account"] == "1000")
    assert paged_first["unmatched_gl_lines"] == len(first["unmatched_gl"])
    assert "matches" not in paged  # the pairs stay in the pages' stored results
    pages = [payload for payload in recorder.sent if payload.get("kind") == "bank_page"]
    assert len(pages) == sum(entry["pages"] for entry in summary["accounts"]) > 1
    assert all(len(_lines(page, "bank_rows")) + len(_lines(page, "gl_rows")) <= PAGE_LINES for page in pages)
    # Every line is matched exactly in the database or sent on exactly one page.
    for entry in summary["accounts"]:
        sent = [
            line["id"] for page in pages if page["account"] == entry["account"] for line in _lines(page, "bank_rows")
        ]
        assert len(sent) == len(set(sent)) == entry["paged_bank_lines"]
        decided = entry["matched_in_database"] + entry["unmatched_bank_in_database"]
        assert decided + entry["paged_bank_lines"] == entry["bank_lines"]
    assert sum(entry["matched_in_database"] for entry in summary["accounts"]) > 0  # the SQL pass did match lines
    matched_on_pages = {tuple(pair) for result in recorder.results for pair in result["matches"]}
    assert matched_on_pages <= {tuple(pair) for pair in whole["matches"]}


async def test_a_paged_close_halts_as_before_and_no_message_exceeds_a_page(
    conn: Any, runtime: Any, engine_ctx: Any, books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, books)
    recorder = Recorder(engine_ctx.call)
    report = await advance(conn, close_id, _paged_ctx(engine_ctx, recorder))

    assert report.status == "halted"
    bank = (await task_rows(conn, close_id))[BANK]
    assert bank.status == "halted"
    result = await _stored_result(conn, close_id)
    assert result["halt_reason"].startswith("account 1000: 17 of 17 bank lines unmatched")
    pages = [payload for payload in recorder.sent if payload.get("kind") == "bank_page"]
    assert len(pages) > 1
    largest_page = max(len(orjson.dumps(page)) for page in pages)
    book_set_id = (await load_close(conn, close_id)).book_set_id
    whole = await inputs.bank_reconciliation_input(conn, book_set_id, runtime.policy)
    assert largest_page < len(orjson.dumps(whole)) / 5  # far smaller than the whole account it replaced
    bank_messages = [p for p in recorder.sent if p.get("kind") in ("bank_page", "bank_pages")]
    assert max(len(orjson.dumps(p)) for p in bank_messages) <= bank_pages.PAGE_BYTES
    # One dispatch row per page and one for the closing message, each under its own key.
    dispatched = await count(conn, "SELECT count(*) FROM dispatch WHERE close_id = %s AND task = %s", close_id, BANK)
    assert dispatched == len(pages) + 1


async def _stored_result(conn: Any, close_id: str) -> dict[str, Any]:
    async with conn.cursor() as cur:
        await cur.execute("SELECT result FROM close_task WHERE close_id = %s AND task = %s", (close_id, BANK))
        row = await cur.fetchone()
    assert row is not None and row[0] is not None
    return dict(row[0])


async def test_a_replayed_page_is_a_no_op_and_a_changed_page_under_its_key_conflicts(
    conn: Any, runtime: Any, engine_ctx: Any, books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, books)
    recorder = Recorder(engine_ctx.call)
    await advance(conn, close_id, _paged_ctx(engine_ctx, recorder))
    page = next(payload for payload in recorder.sent if payload.get("kind") == "bank_page")
    first = recorder.results[recorder.sent.index(page)]
    key = bank_pages.page_key(close_id, BANK, 1, 1, page["account"], page["page"])

    async def nobody(specialist: str, payload: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
        raise AssertionError("a replayed page must not call the specialist")

    send = dict(close_id=close_id, task=BANK, attempt=1, specialist="reconciliation", key=key, actor="test")
    again = await bank_pages.dispatch_page(connect_to(conn), nobody, payload=page, **send)  # type: ignore[arg-type]
    assert again == first
    changed = {**page, "bank_rows": pack_rows(_lines(page, "bank_rows")[:-1])}
    with pytest.raises(DispatchConflict):
        await bank_pages.dispatch_page(connect_to(conn), nobody, payload=changed, **send)  # type: ignore[arg-type]
    assert await count(conn, "SELECT count(*) FROM dispatch WHERE idempotency_key = %s", key) == 1


async def test_the_database_matches_only_what_the_specialist_would_and_leaves_the_rest_whole(
    conn: Any, runtime: Any, engine_ctx: Any, books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, books)
    tc = await _task_context(conn, runtime, engine_ctx, close_id)
    whole_payload = await inputs.bank_reconciliation_input(conn, tc.close.book_set_id, runtime.policy)
    whole = await engine_ctx.call("reconciliation", whole_payload, "whole-" + input_digest(whole_payload))

    recorder = Recorder(engine_ctx.call)
    session = CloseSession(connect_to(conn), close_id)
    assert await session.acquire(wait=True)
    summary = await bank_pages.paged_input(session, recorder, tc, page_lines=PAGE_LINES, force_pages=True)
    await session.release()
    paged = await engine_ctx.call("reconciliation", summary, "summary-" + input_digest(summary))

    assert _projection(paged) == _projection(whole)
    whole_pairs = {tuple(pair) for pair in whole["matches"]}
    assert {("BNK-T1", "GL-T1"), ("BNK-T2", "GL-T2"), ("BNK-T3", "GL-T3"), ("BNK-D1", "GL-D1")} <= whole_pairs
    on_pages = {line["id"] for page in recorder.sent if "bank_rows" in page for line in _lines(page, "bank_rows")}
    assert not {"BNK-T1", "BNK-T4", "BNK-T5"} & on_pages  # paired, or alone in their group, in the database
    assert {"BNK-T2", "BNK-T3", "BNK-D1", "BNK-D2"} <= on_pages  # left to the specialist
    page_pairs = {tuple(pair) for result in recorder.results for pair in result["matches"]}
    assert {("BNK-T2", "GL-T2"), ("BNK-T3", "GL-T3"), ("BNK-D1", "GL-D1")} <= page_pairs
