"""countersign.services.starting: a close or a month of payment runs, started under the rules the composition root
gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from countersign.bootstrap.runtime import Runtime, start_rules
from countersign.engine.runs import close_status, load_close
from countersign.engine.workflows.certificates.runs import payment_run_status
from countersign.services.loading import load_book_set, load_construction
from countersign.services.starting import (
    StartRules,
    start_close_on_book_set,
    start_close_on_books,
    start_month_of_payment_runs,
)
from tests.engine import payment_run_support as support
from tests.support import import_default_principals


async def test_a_close_starts_on_the_books_given_with_its_tasks(
    conn: Any, runtime: Runtime, default_books: Path
) -> None:
    close_id = await start_close_on_books(
        conn, start_rules(runtime), entity="ACME-UK", period="2026-10", books_dir=default_books, started_by="t"
    )
    status = await close_status(conn, close_id)
    assert (status["entity"], status["period"], status["status"]) == ("ACME-UK", "2026-10", "running")
    assert {t["task"] for t in status["tasks"]} == set(runtime.workflow.task_ids)
    loaded = await load_book_set(conn, default_books, loaded_by="t")
    assert (await load_close(conn, close_id)).book_set_id == loaded.book_set_id


async def test_the_runtime_door_and_the_service_start_the_same_kind_of_close(
    conn: Any, runtime: Runtime, default_books: Path
) -> None:
    """`countersign.bootstrap.runtime.start_close_with_books` (the chat doors') is the service under the runtime's
    rules."""
    from countersign.bootstrap.runtime import start_close_with_books

    loaded = await load_book_set(conn, default_books, loaded_by="t")
    by_runtime = await start_close_with_books(
        runtime, conn, entity="ACME-UK", period="2026-10", books_dir=None, started_by="t"
    )
    rules = StartRules(runtime.policy, runtime.workflow, versions={})
    by_service = await start_close_on_book_set(
        conn, rules, entity="ACME-FR", period="2026-10", book_set_id=loaded.book_set_id, started_by="t"
    )
    tasks = [{t["task"] for t in (await close_status(conn, c))["tasks"]} for c in (by_runtime, by_service)]
    assert tasks[0] == tasks[1]


async def test_a_month_of_payment_runs_starts_one_run_per_certificate(
    conn: Any, runtime: Runtime, tmp_path: Path
) -> None:
    await import_default_principals(conn)
    set_id = await load_construction(conn, support.generate(tmp_path / "construction"), loaded_by="t")
    close_ids = await start_month_of_payment_runs(
        conn, start_rules(runtime, "certificates"), set_id=set_id, period="2025-06", started_by="t"
    )
    rows = await payment_run_status(conn, set_id=set_id, period="2025-06")
    assert close_ids and [r["close_id"] for r in rows] == close_ids
