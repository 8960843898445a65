"""The job engine's statements (ADR 0040): enqueue a job, put back the jobs of dead workers, enqueue every run the
engine can move by itself, a worker's liveness lock, and the wake-up a put-back job needs.

Calls the owner's functions of migration 0024 (`countersign_enqueue_job`, `countersign_recover_stalled_jobs`,
`countersign_enqueue_running_runs`): the engine role reaches the job library's tables (`procrastinate.*`) only
through them. Takes and releases the session advisory lock keyed by (LIVENESS_NAMESPACE, worker id) that the recovery
function reads, and sends the job library's own NOTIFY. Called by countersign/engine/jobs.py and
countersign/engine/worker.py; every function runs on the caller's connection. When a run or the outbox can move next
is read by `countersign.store.dispatch.next_move_in_s` and `countersign.store.outbox.next_pending_due_at`.
What the metrics and the drills count of the job tables is `countersign.store.job_stats`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import scalar_row

LIVENESS_NAMESPACE = 1129530956  # the first key of a worker's liveness lock (migration 0024 reads the same number)
JOBS_NOTIFY_CHANNEL = "procrastinate_any_queue_v1"  # the job library's LISTEN channel for every queue
JOB_INSERTED = '{"type": "job_inserted"}'  # what the library sends when a job is deferred: its workers fetch at once


async def enqueue_job(
    conn: AsyncConnection[Any],
    task: str,
    close_id: str | None = None,
    *,
    at: datetime | None = None,
    in_s: float | None = None,
    key: str | None = None,
) -> int | None:
    """Enqueue one job through the database's `countersign_enqueue_job`; the id, or None when one already waits (or
    the run is closed). `at` or `in_s` schedules it later."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT public.countersign_enqueue_job(%s, %s::uuid,"
            " coalesce(%s::timestamptz, now() + make_interval(secs => %s::float8)), %s)",
            (task, close_id, at, in_s, key),
        )
        job_id: int | None = await cur.fetchone()
    return job_id


async def recover_stalled_jobs(conn: AsyncConnection[Any]) -> int:
    """Put back every job whose worker process is gone; how many."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT public.countersign_recover_stalled_jobs()")
        return int(await cur.fetchone() or 0)


async def enqueue_running_runs(conn: AsyncConnection[Any]) -> int:
    """An advance for every run the engine can move by itself (status `running`); how many runs."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT public.countersign_enqueue_running_runs()")
        return int(await cur.fetchone() or 0)


async def hold_liveness_lock(conn: AsyncConnection[Any], worker_id: int) -> None:
    """Take the session advisory lock that says worker `worker_id` lives (held until released or the session ends)."""
    await conn.execute("SELECT pg_advisory_lock(%s, %s)", (LIVENESS_NAMESPACE, worker_id))


async def release_liveness_lock(conn: AsyncConnection[Any], worker_id: int) -> None:
    """Release the liveness lock of worker `worker_id` taken on this session."""
    await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LIVENESS_NAMESPACE, worker_id))


async def wake_job_listeners(conn: AsyncConnection[Any]) -> None:
    """Tell every listening worker that jobs are ready (after a recovery put some back), as the library does when a
    job is deferred."""
    await conn.execute("SELECT pg_notify(%s, %s)", (JOBS_NOTIFY_CHANNEL, JOB_INSERTED))
