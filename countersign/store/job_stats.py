"""What the workers drill and its bench read about the job engine at work: reaction times, sessions, idle cost.

Reads `gate_decision`, `gate`, PostgreSQL's statistics views and the job library's tables (`procrastinate.*`);
called by countersign/scenarios/drills.py, and by countersign/bootstrap/metrics.py for the job queue's gauges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row

from countersign.states import JobState


@dataclass(frozen=True)
class Reaction:
    """From the decision that completed a gate to the next gate opened on the same run, over many runs."""

    samples: int
    p50_s: float | None
    p99_s: float | None


async def decision_to_next_gate(conn: AsyncConnection[Any], close_ids: list[str]) -> Reaction:
    """Returns the reaction times over the runs `close_ids`."""
    async with conn.cursor(row_factory=class_row(Reaction)) as cur:
        await cur.execute(
            "WITH last AS ("
            "  SELECT DISTINCT ON (d.gate_id) d.gate_id, g.close_id, d.decided_at FROM gate_decision d"
            "  JOIN gate g USING (gate_id) WHERE g.close_id = ANY(%s::uuid[]) ORDER BY d.gate_id, d.decided_at DESC),"
            " reaction AS ("
            "  SELECT extract(epoch FROM min(n.opened_at) - l.decided_at)::float8 AS s FROM last l"
            "  JOIN gate n ON n.close_id = l.close_id AND n.opened_at > l.decided_at GROUP BY l.gate_id, l.decided_at)"
            " SELECT count(*)::int AS samples,"
            " percentile_cont(0.5) WITHIN GROUP (ORDER BY s) AS p50_s,"
            " percentile_cont(0.99) WITHIN GROUP (ORDER BY s) AS p99_s FROM reaction",
            (close_ids,),
        )
        row = await cur.fetchone()
    assert row is not None
    return row


@dataclass(frozen=True)
class DatabaseActivity:
    """This database's counters: sessions ever opened (PostgreSQL 14+), transactions committed, sessions open now
    (all, and those of worker processes)."""

    sessions: int
    commits: int
    connected: int
    workers_connected: int


async def database_activity(conn: AsyncConnection[Any], worker_app: str) -> DatabaseActivity:
    """Returns this database's counters; `worker_app` is the application_name worker connections carry."""
    async with conn.cursor(row_factory=class_row(DatabaseActivity)) as cur:
        await cur.execute(
            "SELECT coalesce(s.sessions, 0)::int AS sessions, s.xact_commit::int AS commits,"
            " (SELECT count(*) FROM pg_stat_activity a WHERE a.datname = current_database())::int AS connected,"
            " (SELECT count(*) FROM pg_stat_activity a WHERE a.datname = current_database()"
            "   AND a.application_name = %s)::int AS workers_connected"
            " FROM pg_stat_database s WHERE s.datname = current_database()",
            (worker_app,),
        )
        row = await cur.fetchone()
    assert row is not None
    return row


async def ready_jobs(conn: AsyncConnection[Any]) -> int:
    """Jobs a worker could start now or is running (scheduled ones not yet due are not counted)."""
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT count(*) FROM procrastinate.procrastinate_jobs WHERE status = %(doing)s"
            " OR (status = %(todo)s AND (scheduled_at IS NULL OR scheduled_at <= now()))",
            {"doing": JobState.DOING, "todo": JobState.TODO},
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def registered_workers(conn: AsyncConnection[Any]) -> int:
    """Worker processes registered with the job engine now."""
    async with conn.cursor() as cur:
        await cur.execute("SELECT count(*) FROM procrastinate.procrastinate_workers")
        row = await cur.fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class JobQueueCounts:
    """The job queue as the metrics endpoint reports it: jobs a worker could start now, jobs running, jobs that
    failed for good (kept: only successful jobs are deleted), and how long the oldest ready job has waited."""

    ready: int
    running: int
    failed: int
    oldest_ready_age_s: float  # 0 when no job is ready


async def job_queue_counts(conn: AsyncConnection[Any]) -> JobQueueCounts:
    """One statement over `procrastinate_jobs` (and, for the ready jobs alone, their events). A job is ready when it
    is `todo` and due; it has been ready since it was due (`scheduled_at`) or, when later, since it was last queued
    (deferred, deferred again for a retry, or retried by hand)."""
    async with conn.cursor(row_factory=class_row(JobQueueCounts)) as cur:
        await cur.execute(
            "WITH ready AS ("
            "  SELECT j.id, j.scheduled_at FROM procrastinate.procrastinate_jobs j"
            "  WHERE j.status = %(todo)s AND (j.scheduled_at IS NULL OR j.scheduled_at <= now()))"
            " SELECT (SELECT count(*) FROM ready)::int AS ready,"
            "  (SELECT count(*) FROM procrastinate.procrastinate_jobs WHERE status = %(doing)s)::int AS running,"
            "  (SELECT count(*) FROM procrastinate.procrastinate_jobs WHERE status = %(failed)s)::int AS failed,"
            "  coalesce((SELECT extract(epoch FROM now() - min(greatest(r.scheduled_at,"
            "     (SELECT max(e.at) FROM procrastinate.procrastinate_events e WHERE e.job_id = r.id"
            "        AND e.type IN ('deferred', 'deferred_for_retry', 'retried'))))) FROM ready r), 0)::float8"
            "   AS oldest_ready_age_s",
            {"todo": JobState.TODO, "doing": JobState.DOING, "failed": JobState.FAILED},
        )
        row = await cur.fetchone()
    assert row is not None
    return row
