"""Work as jobs (ADR 0040): the change that makes a run due enqueues its advance in the same transaction, one per run;
a deadline fires with nothing else happening; runs waiting on a person or closed cost a worker nothing; the engine
role reaches the job tables only through the functions the migration gives it."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from countersign.engine.jobs import JobCounts, JobPlan, pool_for_jobs, run_jobs
from countersign.engine.leases import Connect
from countersign.engine.orchestrator import AdvanceReport
from countersign.engine.runs import close_status
from countersign.store.jobs import enqueue_job, recover_stalled_jobs
from tests.support import APPROVERS, count, rewrite_gate_as_owner, start_default_close

ADVANCE_JOBS = (
    "SELECT count(*) FROM procrastinate.procrastinate_jobs"
    " WHERE task_name = 'advance' AND status = 'todo' AND args->>'close_id' = %s"
)
READY_ADVANCE_JOBS = ADVANCE_JOBS + " AND (scheduled_at IS NULL OR scheduled_at <= now())"


@dataclass
class Delivered:
    sent: int = 0
    retried: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


class Watch:
    def __init__(self) -> None:
        self.reports: list[AdvanceReport] = []
        self.any = asyncio.Event()
        self.alive_rounds = 0

    def advanced(self, report: AdvanceReport) -> None:
        self.reports.append(report)
        self.any.set()

    def delivered(self, outcome: Any) -> None:
        pass

    def passed(self, seconds: float, *, completed: bool) -> None:
        pass

    def alive(self) -> None:
        self.alive_rounds += 1


async def _no_chat(connect: Connect) -> Delivered:
    return Delivered()


@pytest_asyncio.fixture
async def pool(runtime: Any) -> AsyncIterator[AsyncConnectionPool[Any]]:
    async with pool_for_jobs(runtime.database.engine_url, size=4) as opened:
        yield opened


async def drain(pool: AsyncConnectionPool[Any], engine_ctx: Any) -> tuple[JobCounts, Watch]:
    """Run jobs until none is ready, as `countersign worker --once` does."""
    watch = Watch()
    counts = await run_jobs(pool, engine_ctx, _no_chat, JobPlan(once=True, grace_s=5), watch)
    return counts, watch


async def _open_gate(conn: Any, close_id: str) -> dict[str, Any]:
    return next(g for g in (await close_status(conn, close_id))["gates"] if g["status"] == "open")


def _decision_sql(gate: dict[str, Any], n: int) -> tuple[str, tuple[Any, ...]]:
    excluded = {gate["prepared_by"], *gate["requested_by"]}
    principal = [p for p in APPROVERS[gate["approver_role"]] if p not in excluded][n]
    proof = {"kind": "ed25519", "signature": base64.b64encode(bytes(64)).decode(), "signed_at": 1_800_000_000}
    return (
        "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel, proof)"
        " VALUES (%s, %s, 'approve', 'ok', %s, 'x', 'signed_callback', %s)",
        (gate["gate_id"], principal, uuid.uuid4().hex, Jsonb(proof)),
    )


async def test_a_started_close_is_enqueued_with_its_start_and_a_worker_runs_it_to_its_first_gate(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path, pool: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    assert await count(conn, ADVANCE_JOBS, close_id) == 1

    counts, watch = await drain(pool, engine_ctx)

    assert counts.advance >= 1 and watch.reports[0].close_id == close_id and watch.reports[0].steps
    status = await close_status(conn, close_id)
    # waiting on people (open gates; the default books also halt the bank reconciliation for a person to look at)
    assert status["status"] in ("awaiting_approval", "halted"), (status["status_reason"], watch.reports)
    assert any(g["status"] == "open" for g in status["gates"])
    assert await count(conn, ADVANCE_JOBS, close_id) == 0  # no advance job left


async def test_a_decision_enqueues_one_advance_in_its_own_transaction_and_two_decisions_still_one(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path, pool: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await drain(pool, engine_ctx)
    gate = await _open_gate(conn, close_id)
    assert await count(conn, ADVANCE_JOBS, close_id) == 0

    async with conn.transaction(force_rollback=True):  # the decision rolled back: no job either
        await conn.execute(*_decision_sql(gate, 0))
        assert await count(conn, ADVANCE_JOBS, close_id) == 1
    assert await count(conn, ADVANCE_JOBS, close_id) == 0

    await conn.execute(*_decision_sql(gate, 0))
    assert await count(conn, ADVANCE_JOBS, close_id) == 1
    other = [g for g in (await close_status(conn, close_id))["gates"] if g["status"] == "open"]
    assert other  # a second gate of the same run, decided too
    await conn.execute(*_decision_sql(other[0], 0))
    async with pool.connection() as engine:  # and the engine asking again adds nothing
        assert await enqueue_job(engine, "advance", close_id) is None
    assert await count(conn, ADVANCE_JOBS, close_id) == 1


async def test_decisions_on_one_run_share_its_waiting_job_and_no_worker_takes_it_before_they_commit(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path, pool: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await drain(pool, engine_ctx)
    gates = [g for g in (await close_status(conn, close_id))["gates"] if g["status"] == "open"]
    assert len(gates) >= 2
    await conn.execute(*_decision_sql(gates[0], 0))  # a job waits for the run now
    url = runtime.database.url
    async with (
        await psycopg.AsyncConnection.connect(url) as first,
        await psycopg.AsyncConnection.connect(url) as second,
    ):
        await first.execute(*_decision_sql(gates[1], 0))  # uncommitted: it holds the waiting job (shared)
        await second.execute("SET lock_timeout = '2s'")
        await second.execute("SELECT public.countersign_enqueue_job('advance', %s)", (close_id,))  # not queued behind
        async with pool.connection() as engine:  # a worker's fetch skips the job while a change to it is open
            (worker_id,) = await (
                await engine.execute("SELECT procrastinate.procrastinate_register_worker_v1()")
            ).fetchone()
            fetched = await (
                await engine.execute("SELECT id FROM procrastinate.procrastinate_fetch_job_v2(NULL, %s)", (worker_id,))
            ).fetchone()
            assert fetched is None or fetched[0] is None
        await first.commit()
        await second.commit()
    assert await count(conn, ADVANCE_JOBS, close_id) == 1


async def test_a_deadline_fires_with_no_other_activity(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path, pool: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await drain(pool, engine_ctx)
    gate = await _open_gate(conn, close_id)
    # the gate expires in the past: moving its times moves its scheduled wake-up (no sleeping)
    await rewrite_gate_as_owner(
        conn, gate["gate_id"], "due_at = now() - interval '2 days', expires_at = now() - interval '1 day'"
    )
    wakes = "SELECT count(*) FROM procrastinate.procrastinate_jobs WHERE task_name = 'wake' AND status = 'todo'"
    due = wakes + " AND scheduled_at <= now()"
    assert await count(conn, due) == 2  # the reminder and the expiry of that gate
    assert await count(conn, ADVANCE_JOBS, close_id) == 0  # nothing else asks for an advance

    counts, _ = await drain(pool, engine_ctx)

    assert counts.wake == 2 and counts.advance >= 1
    status = await close_status(conn, close_id)
    assert next(g for g in status["gates"] if g["gate_id"] == gate["gate_id"])["status"] == "expired"
    assert await count(conn, "SELECT count(*) FROM trace_event WHERE kind = 'gate_expired'") == 1


async def test_a_run_waiting_on_a_person_and_a_closed_run_cost_a_worker_nothing(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path, pool: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    await drain(pool, engine_ctx)
    assert (await close_status(conn, close_id))["status"] in ("awaiting_approval", "halted")
    assert await count(conn, READY_ADVANCE_JOBS, close_id) == 0

    counts, watch = await drain(pool, engine_ctx)  # a worker starting now finds nothing for it
    assert counts.advance == 0 and watch.reports == []

    async with pool.connection() as engine:  # a closed run is never enqueued, whoever asks
        await conn.execute("ALTER TABLE close_run DISABLE TRIGGER USER")  # set-up only: the run put straight to closed
        await conn.execute("UPDATE close_run SET status = 'closed' WHERE close_id = %s", (close_id,))
        await conn.execute("ALTER TABLE close_run ENABLE TRIGGER USER")
        assert await enqueue_job(engine, "advance", close_id) is None
    counts, _ = await drain(pool, engine_ctx)
    assert counts.advance == 0


async def test_a_job_of_a_dead_worker_is_put_back_and_one_of_a_live_worker_is_not(
    conn: Any, runtime: Any, default_books: Path, pool: Any
) -> None:
    close_id = await start_default_close(conn, runtime, default_books)
    (worker_id,) = await (await conn.execute("SELECT procrastinate.procrastinate_register_worker_v1()")).fetchone()
    await conn.execute("SELECT procrastinate.procrastinate_fetch_job_v2(NULL, %s)", (worker_id,))
    doing = "SELECT count(*) FROM procrastinate.procrastinate_jobs WHERE status = 'doing'"
    assert await count(conn, doing) == 1
    async with await psycopg.AsyncConnection.connect(runtime.database.url, autocommit=True) as live:
        await live.execute("SELECT pg_advisory_lock(1129530956, %s)", (worker_id,))
        async with pool.connection() as engine:
            assert await recover_stalled_jobs(engine) == 0  # its worker is alive: left alone
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1129530956 AND objid = %s"
    for _ in range(100):  # the server ends a closed session's backend (and its locks) a moment after the client
        if await count(conn, held, worker_id) == 0:
            break
        await asyncio.sleep(0.05)
    async with pool.connection() as engine:  # the worker's session is gone: its job is ready again
        assert await recover_stalled_jobs(engine) == 1
    assert await count(conn, doing) == 0 and await count(conn, READY_ADVANCE_JOBS, close_id) == 1


async def test_a_waiting_worker_is_woken_by_the_database_not_by_its_poll(
    conn: Any, runtime: Any, engine_ctx: Any, default_books: Path, pool: Any
) -> None:
    watch, stop = Watch(), asyncio.Event()
    plan = JobPlan(poll_s=3600, grace_s=5, recover_every_s=0.1)  # the fallback poll would not come within this test
    worker = asyncio.create_task(run_jobs(pool, engine_ctx, _no_chat, plan, watch, stop=stop))
    try:
        await asyncio.sleep(0.5)  # let it register and listen (no job exists: it is waiting)
        assert watch.reports == [] and watch.alive_rounds >= 1  # idle, and says it lives (the metrics' gauge)
        close_id = await start_default_close(conn, runtime, default_books)
        await asyncio.wait_for(watch.any.wait(), timeout=60)  # a bound for liveness only; NOTIFY wakes it at once
        assert watch.reports[0].close_id == close_id
    finally:
        stop.set()
        counts = await asyncio.wait_for(worker, timeout=60)
    assert counts.advance >= 1


# --- the engine role and the job tables ---------------------------------------------------------------------------

REFUSED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.InvalidParameterValue)


@pytest.mark.parametrize(
    "attack",
    [
        "INSERT INTO procrastinate.procrastinate_jobs (queue_name, task_name, args)"
        " VALUES ('countersign', 'advance', '{}')",
        "UPDATE procrastinate.procrastinate_jobs SET scheduled_at = now() + interval '1 year'",
        "DELETE FROM procrastinate.procrastinate_jobs",
        "SELECT procrastinate.procrastinate_defer_jobs_v1(ARRAY[ROW('countersign', 'advance', 0, NULL, NULL, '{}',"
        " NULL)::procrastinate.procrastinate_job_to_defer_v1])",
        "SELECT procrastinate.procrastinate_retry_job_v2(1, now(), NULL, NULL, NULL)",
        "SELECT procrastinate.procrastinate_cancel_job_v1(1, false, true)",
        "SELECT public.countersign_enqueue_job('post_journal')",
        "SELECT public.countersign_enqueue_job('wake', NULL, now(), 'x')",
    ],
)
async def test_the_engine_role_cannot_write_a_job_but_through_the_four_kinds(
    conn: Any, runtime: Any, default_books: Path, pool: Any, attack: str
) -> None:
    await start_default_close(conn, runtime, default_books)
    before = await (await conn.execute("SELECT count(*), max(id) FROM procrastinate.procrastinate_jobs")).fetchone()
    async with pool.connection() as engine:
        with pytest.raises(REFUSED):
            await engine.execute(attack)
    after = await (await conn.execute("SELECT count(*), max(id) FROM procrastinate.procrastinate_jobs")).fetchone()
    assert after == before


async def test_negative_control_the_owner_can_do_what_the_engine_role_cannot(
    conn: Any, runtime: Any, default_books: Path
) -> None:
    await start_default_close(conn, runtime, default_books)
    await conn.execute("DELETE FROM procrastinate.procrastinate_jobs")
    assert await count(conn, "SELECT count(*) FROM procrastinate.procrastinate_jobs") == 0
