"""The drills' exactly-once counts: what they read, and that an unfinished close fails them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from countersign.audit.checkpoint import generate_signer
from countersign.audit.trace import append_event, seal_pending
from countersign.audit.transparency_log import sign_log_checkpoint
from countersign.engine.integrity import (
    PostingCounts,
    SealingSample,
    SealingWatch,
    closed_count,
    closing_checkpoint_problems,
    exactly_once_checks,
    posting_counts,
    sealing_sample,
    server_identity,
)
from tests.support import start_default_close


async def test_the_server_names_itself_postgresql(conn: Any) -> None:
    server = await server_identity(conn)
    assert server.version.startswith("PostgreSQL ") and " on " not in server.version
    assert server.database


async def test_a_close_that_has_not_run_fails_the_exactly_once_checks(
    conn: Any, runtime: Any, default_books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)

    checks = {check.label: check for check in await exactly_once_checks(conn, close_id)}

    assert checks["accrual journals"].value == 0 and not checks["accrual journals"].holds
    assert checks["period_closed events"].value == 0 and not checks["period_closed events"].holds
    assert checks["gate_opened events per gate"].holds  # no gate opened yet, and no event says one did
    assert await posting_counts(conn, close_id) == PostingCounts(0, 0, 0, 0)
    assert await closed_count(conn, [close_id]) == 0


# --- the trace keeping up: what the drills watch while they run and check when they end ------------------------


def _sample(head: int, pending: int, oldest: int | None, signed: int = 0) -> SealingSample:
    return SealingSample(head_seq=head, pending=pending, oldest_pending_id=oldest, checkpoint_size=signed)


def test_a_queue_that_keeps_moving_keeps_up() -> None:
    watch = SealingWatch(max_wait_s=30)
    for second in range(0, 300, 5):  # busy all along, but the oldest entry leaves within one sample every time
        watch.observe(_sample(second * 10, 40, second * 10 + 1), now=float(second))
    watch.observe(_sample(3000, 0, None), now=300.0)

    assert watch.problems() == [] and watch.samples == 61 and watch.most_pending == 40


def test_a_stalled_sealer_is_a_drill_failure() -> None:
    watch = SealingWatch(max_wait_s=30)
    for second, pending in ((0, 89), (10, 300), (20, 500), (31, 700), (45, 933)):  # the 200-close run
        watch.observe(_sample(1200, pending, 1201, signed=5), now=float(second))

    [problem] = watch.problems()
    assert "sealing fell behind" in problem and "waited 31s" in problem and "700 queued" in problem
    assert "checkpoint at tree size 5" in problem and watch.longest_wait_s == 45


def test_a_queue_that_drains_starts_the_clock_again() -> None:
    watch = SealingWatch(max_wait_s=30)
    watch.observe(_sample(10, 3, 11), now=0.0)
    watch.observe(_sample(13, 0, None), now=25.0)
    watch.observe(_sample(13, 2, 14), now=26.0)
    watch.observe(_sample(13, 2, 14), now=50.0)  # 24 s since entry 14 became the oldest: within the limit

    assert watch.problems() == []


async def test_the_sample_reads_the_queue_the_head_and_the_checkpoints(conn: Any) -> None:
    before = await sealing_sample(conn)
    async with conn.transaction():
        await append_event(conn, actor="drill", kind="drill_probe", payload={})
    queued = await sealing_sample(conn)
    await seal_pending(conn)
    sealed = await sealing_sample(conn)

    assert queued.pending == before.pending + 1 and queued.oldest_pending_id is not None
    assert sealed.pending == 0 and sealed.oldest_pending_id is None and sealed.head_seq == before.head_seq + 1


async def test_a_close_without_its_closing_checkpoint_fails_the_drill(
    conn: Any, runtime: Any, default_books: Path
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    other_id = str(uuid.uuid4())  # a close that never closed
    signer = generate_signer("countersign.test/drill")
    assert await closing_checkpoint_problems(conn, [close_id, other_id]) == []  # neither closed yet

    async with conn.transaction():
        await append_event(conn, actor="drill", kind="period_closed", payload={}, close_id=close_id)
    await seal_pending(conn)
    [unsigned] = await closing_checkpoint_problems(conn, [close_id, other_id])
    assert unsigned.startswith(close_id[:8]) and "no signed checkpoint covers it" in unsigned

    await sign_log_checkpoint(conn, signer, signer.name, actor="drill")  # any checkpoint that covers the close
    assert await closing_checkpoint_problems(conn, [close_id, other_id]) == []
