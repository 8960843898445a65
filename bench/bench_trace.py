"""Benchmark: the close trace — appends, verification and checkpoint signing at 1,000,000 events, Merkle proofs.

Run: .venv/bin/python bench/bench_trace.py [--writers 8] [--events 100000] [--events-b1 20000]
     [--verify-events 1000000] [--growth-events 300000] [--new-events 1000] [--proofs 1000]

Issue 25's three figures, each beside its same-run baseline: appends at one event per transaction (background
sealer) against plain inserts; `trace verify` (`verify_log`) of the whole log against reading it; a checkpoint signed
at 1,000,000 events with a previous checkpoint and --new-events since, against the first checkpoint (one full read
of the log, which is what every checkpoint cost before the stored frontier, ADR 0039).

Setup: an embedded PostgreSQL (default settings, fsync on) in a temporary directory, one freshly migrated database
per phase, deleted at the end (also on errors and on the self-abort after ABORT_AFTER_SECONDS).

a. Appends end to end. C writers (one autocommit connection each) commit transactions of B events through
   `append_event` and, after each commit, either call `seal_pending` (as the engine, the CLI and the chat paths do)
   or wait on one shared `GroupSealer` (as the signed-callback server does); the clock stops when every event is
   sealed. Then: `verify_chain` ok, seq gap-free (max(seq) == count(*)), nothing left pending. Same-run
   baseline: the same writers INSERT the same rows (same statement shape, same Python normalisation) into a plain,
   logged table with no queue, no sealer and no chain, so the ratio is the cost of sealing and chaining. Phases
   run for B = 10 and B = 1. Each phase stops issuing transactions after PHASE_LIMIT_S. At B = 1 a fourth mode has
   the writers not wait for sealing at all while one background sealer (its own connection) chains the queue: the
   append is what the effect's transaction pays, and the clock still stops only when every event is sealed.
b. Verification of a large log. The log is filled by COPYing rows pre-chained in Python with the trace's own
   `event_body`, `canonical_bytes` and `chain_hash` (the head row is set to match). Same-run baselines: reading the
   same rows (JSON as text, tuples) and doing nothing with them, twice over: in 5,000-row keyset pages (the read
   the verifier used before issue 37) and streamed from one statement in 250-row pages (the verifier's read now);
   the ratio is taken against the faster. Then `verify_chain` (the chain alone) and `verify_log` (what `trace
   verify` runs: the chain and every signed root), each twice, interleaved with the reads; the minimum of each is
   compared. With --growth-events N the same is timed first on an N-event log, and each measure's cost growth
   exponent, log(t2/t1) / log(n2/n1), is printed for wall time and for the bench process's CPU seconds.
d. Checkpoints on that log: the first (no previous checkpoint: one full read), then --new-events appended and sealed
   and a checkpoint signed from the stored frontier, three times.
c. Proofs on that log: `load_tree` time (DB read + leaf hashes + tree), the tree build alone, then mean / p99 /
   max of `inclusion_proof` and `consistency_proof` over random indexes (every inclusion proof and a few
   consistency proofs are checked with the RFC 9162 verifiers, untimed).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import orjson  # noqa: E402
import psutil  # noqa: E402
import psycopg  # noqa: E402
from _support import exit_code, stop_embedded  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from countersign.audit.canonical import canonical_bytes, normalise  # noqa: E402
from countersign.audit.checkpoint import generate_signer  # noqa: E402
from countersign.audit.merkle import MerkleTree, root_from_leaf_hashes, verify_consistency, verify_inclusion  # noqa: E402
from countersign.audit.sealer import GroupSealer  # noqa: E402
from countersign.audit.trace import (  # noqa: E402
    GENESIS_HASH,
    append_event,
    chain_hash,
    event_body,
    iter_events,
    register_close_versions,
    seal_pending,
    utc_timestamp,
    verify_chain,
)
from countersign.audit.transparency_log import load_tree, sign_log_checkpoint, verify_log  # noqa: E402
from countersign.bootstrap import migrate  # noqa: E402
from countersign.bootstrap.database import Database, start_embedded, with_database_name  # noqa: E402
from countersign.states import TraceKind  # noqa: E402
from countersign.store.trace import EVENT_COLUMNS, iter_sealed_rows  # noqa: E402

# EVENT_COLUMNS is a SELECT list (`close_id::text AS close_id`); COPY takes the bare column names.
COPY_COLUMNS = ", ".join(column.split(" AS ")[-1] for column in EVENT_COLUMNS.split(", "))

ABORT_AFTER_SECONDS = 1_500
PHASE_LIMIT_S = 90.0
FILL_CHUNK_ROWS = 50_000
CANONICAL_CHECKED_ROWS = 2_000
CONSISTENCY_CHECKS = 3
SEED = 7
TARGET_EVENTS_PER_S = 5_000
TARGET_VERIFY_S = 10.0
TARGET_PROOF_MS = 1.0
TARGET_SIGN_MS = 100.0
TARGET_VERIFY_RATIO = 1.5
TARGET_APPEND_RATIO = 0.9
SIGN_ROUNDS = 3
VERIFY_ROUNDS = 2
ORIGIN = "countersign.bench/close-trace"
CLOSES = 12
VERSION_SET = {
    "app": "0.4.0",
    "policy_sha256": "9f2c" * 16,
    "checklist_sha256": "41ab" * 16,
    "profile": "default",
    "seed": 42,
}
PLAIN_TABLE = """
CREATE TABLE bench_plain (
    id          bigserial PRIMARY KEY,
    ts          text NOT NULL,
    close_id    uuid,
    actor       text NOT NULL,
    kind        text NOT NULL,
    payload     jsonb NOT NULL,
    version_set jsonb NOT NULL
)
"""


class BenchAborted(RuntimeError):
    pass


def _abort(signum: int, frame: object) -> None:
    raise BenchAborted(f"aborted after {ABORT_AFTER_SECONDS} s")


def event_payload(i: int) -> dict[str, Any]:
    """An event the size and shape of a gate decision (about 430 canonical bytes with the envelope). Its references
    are named `ref` and `step`: an event naming a real `gate_id` or `task` must belong to that gate's or task's close
    (migration 0015), and the bench appends to a close with no gates or tasks."""
    return {
        "ref": str(uuid.UUID(int=i + 1)),
        "step": f"bank_rec_{i % 97}",
        "decision": "approve",
        "reason": "matched to statement line; amount 1234.50 GBP",
        "channel": "slack",
        "gate_status": "approved",
        "approvals": 1,
        "quorum": 1,
        "to": "orchestrator",
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


@contextmanager
def timed(into: dict[str, float], key: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        into[key] = time.perf_counter() - started


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system) of a process and its live descendants."""
    if pid is None:
        return 0.0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


@dataclass
class CpuSample:
    bench: float
    postgres: float
    machine_busy: float

    @classmethod
    def take(cls, postgres_pid: int | None) -> CpuSample:
        own = psutil.Process().cpu_times()
        machine = psutil.cpu_times()
        busy = sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)
        return cls(own.user + own.system, cpu_seconds(postgres_pid), busy)

    def cores_since(self, before: CpuSample, wall_s: float) -> dict[str, float]:
        bench = (self.bench - before.bench) / wall_s
        postgres = (self.postgres - before.postgres) / wall_s
        busy = (self.machine_busy - before.machine_busy) / wall_s
        return {"bench": bench, "postgres": postgres, "other": max(0.0, busy - bench - postgres)}


# --- databases -----------------------------------------------------------------------------------------------


def fresh_database(server_url: str, name: str) -> str:
    with psycopg.connect(with_database_name(server_url, "postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = with_database_name(server_url, name)
    migrate.upgrade(Database(url))
    return url


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(with_database_name(server_url, "postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- a. appends ----------------------------------------------------------------------------------------------


@dataclass
class AppendResult:
    name: str
    writers: int
    batch: int
    planned: int
    events: int = 0
    wall_s: float = 0.0
    txn_ms: list[float] = field(default_factory=list)
    seal_ms: list[float] = field(default_factory=list)
    cores: dict[str, float] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.events / self.wall_s if self.wall_s else 0.0


async def plain_insert(
    conn: psycopg.AsyncConnection[Any], *, actor: str, kind: str, payload: dict[str, Any], close_id: str
) -> None:
    """The baseline: what `append_event` does (the same normalisation and JSON adapter), into a plain table nobody
    seals."""
    async with conn.cursor() as cur:
        await cur.execute(
            "INSERT INTO bench_plain (ts, close_id, actor, kind, payload, version_set)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (
                utc_timestamp(),
                close_id,
                actor,
                kind,
                Jsonb(normalise(payload), dumps=orjson.dumps),
                Jsonb(normalise({}), dumps=orjson.dumps),
            ),
        )
        await cur.fetchone()


async def run_appends(
    url: str, *, writers: int, batch: int, total: int, plain: bool, postgres_pid: int | None, sealing: str
) -> AppendResult:
    """`sealing`: "group" (writers share one GroupSealer, as `countersign serve` does), "per-commit" (each writer
    calls `seal_pending` on its own connection after each commit, as the CLI, the engine and the chat paths do) or
    "background" (writers do not wait; one sealer loops on its own connection until the writers are done)."""
    txns_per_writer = math.ceil(total / (writers * batch))
    how = {"group": "GroupSealer", "per-commit": "seal_pending per commit", "background": "background sealer"}[sealing]
    name = f"{'plain INSERT (baseline)' if plain else f'append_event + {how}'}, B={batch}"
    result = AppendResult(name, writers, batch, txns_per_writer * writers * batch)
    close_id = str(uuid.uuid4())
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
        if plain:
            await admin.execute(PLAIN_TABLE)
        else:
            await register_close_versions(admin, close_id, VERSION_SET)
        conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(writers)]
        sealer = GroupSealer(lambda: psycopg.AsyncConnection.connect(url, autocommit=True))
        try:
            deadline = time.perf_counter() + PHASE_LIMIT_S

            async def writer(w: int, conn: psycopg.AsyncConnection[Any]) -> None:
                for t in range(txns_per_writer):
                    if time.perf_counter() > deadline:
                        return
                    started = time.perf_counter()
                    async with conn.transaction():
                        for b in range(batch):
                            i = (w * txns_per_writer + t) * batch + b
                            if plain:
                                await plain_insert(
                                    conn, actor="alice.chen", kind=BENCH_KIND, payload=event_payload(i),
                                    close_id=close_id,
                                )  # fmt: skip
                            else:
                                await append_event(
                                    conn, actor="alice.chen", kind=BENCH_KIND, payload=event_payload(i),
                                    close_id=close_id,
                                )  # fmt: skip
                    committed = time.perf_counter()
                    result.txn_ms.append((committed - started) * 1000)
                    if not plain and sealing != "background":
                        await (sealer.seal() if sealing == "group" else seal_pending(conn))
                        result.seal_ms.append((time.perf_counter() - committed) * 1000)
                    result.events += batch

            writers_done = asyncio.Event()

            async def background_sealer() -> None:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as sealing_conn:
                    while not writers_done.is_set():
                        if not await seal_pending(sealing_conn):
                            await asyncio.sleep(0.001)  # the queue was empty: let the writers run

            cpu_before = CpuSample.take(postgres_pid)
            started = time.perf_counter()
            background = asyncio.create_task(background_sealer()) if sealing == "background" and not plain else None
            await asyncio.gather(*(writer(w, c) for w, c in enumerate(conns)))
            writers_done.set()
            if background is not None:
                await background
            if not plain:
                await seal_pending(admin)  # normally seals nothing: each writer's last call already covered it
            result.wall_s = time.perf_counter() - started
            result.cores = CpuSample.take(postgres_pid).cores_since(cpu_before, result.wall_s)
        finally:
            await sealer.close()
            for conn in conns:
                await conn.close()
        result.checks = await check_appends(admin, plain)
        result.checks["sealing_runs"] = sealer.runs
    return result


async def check_appends(conn: psycopg.AsyncConnection[Any], plain: bool) -> dict[str, Any]:
    if plain:
        row = await (await conn.execute("SELECT count(*) FROM bench_plain")).fetchone()
        return {"rows": int(row[0]) if row else -1}
    row = await (await conn.execute("SELECT count(*), coalesce(max(seq), 0) FROM trace_event")).fetchone()
    pending = await (await conn.execute("SELECT count(*) FROM trace_pending")).fetchone()
    started = time.perf_counter()
    verified = await verify_chain(conn)
    assert row is not None and pending is not None
    return {
        "sealed": int(row[0]),
        "gap_free": int(row[0]) == int(row[1]),
        "pending_left": int(pending[0]),
        "verify_ok": verified.ok,
        "verify_s": time.perf_counter() - started,
    }


def print_append(result: AppendResult) -> None:
    print(f"\n{result.name}: {result.events:,} of {result.planned:,} events in {result.wall_s:.2f} s")
    print(f"  throughput: {result.rate:,.0f} events/s ({result.rate / result.batch:,.0f} transactions/s)")
    print(
        f"  transaction (appends + commit) ms: p50 {percentile(result.txn_ms, 50):.2f}, "
        f"p99 {percentile(result.txn_ms, 99):.2f}"
    )
    if result.seal_ms:
        print(
            f"  wait for sealing ms: p50 {percentile(result.seal_ms, 50):.2f}, p99 {percentile(result.seal_ms, 99):.2f}"
        )
    cores = ", ".join(f"{k} {v:.2f}" for k, v in result.cores.items())
    print(f"  CPU cores busy (of {os.cpu_count()}): {cores}")
    if result.events:
        per_event = {k: v * result.wall_s / result.events * 1e6 for k, v in result.cores.items() if k != "other"}
        print("  CPU us per event: " + ", ".join(f"{k} {v:,.0f}" for k, v in per_event.items()))
    print(f"  checks: {result.checks}")


# --- b. verification -----------------------------------------------------------------------------------------


BENCH_WRITER = "countersign_callbacks"  # a service role's name, as a writer is stamped (migration 0006)
BENCH_KIND = TraceKind.TOOL_CALL  # a kind the trace reads back (countersign.states.TraceKind)


def prechained_rows(
    start_seq: int, count: int, prev: bytes, base: datetime, closes: list[str]
) -> tuple[list[Any], bytes]:
    rows: list[Any] = []
    for seq in range(start_seq, start_seq + count):
        ts = utc_timestamp(base + timedelta(microseconds=seq * 1_371))
        close_id = closes[seq % len(closes)]
        payload = normalise(event_payload(seq))
        version_set = normalise(dict(VERSION_SET))
        body = event_body(seq, ts, close_id, "alice.chen", BENCH_KIND.value, payload, version_set, BENCH_WRITER)
        canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)  # RFC 8785 for these ASCII, float-free events
        if seq <= CANONICAL_CHECKED_ROWS and canonical != canonical_bytes(body):
            raise AssertionError(f"fill: orjson's bytes for event {seq} are not the canonical bytes")
        digest = chain_hash(prev, canonical)
        rows.append(
            (seq, ts, close_id, "alice.chen", BENCH_KIND.value, orjson.dumps(payload).decode(),
             orjson.dumps(version_set).decode(), prev, digest, BENCH_WRITER)
        )  # fmt: skip
        prev = digest
    return rows, prev


async def fill_log(url: str, n: int) -> dict[str, float]:
    times: dict[str, float] = {"python_s": 0.0, "copy_s": 0.0}
    closes = [str(uuid.UUID(int=10_000 + c)) for c in range(CLOSES)]
    base = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    prev = GENESIS_HASH
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for close_id in closes:
            await register_close_versions(conn, close_id, VERSION_SET)
        for start in range(1, n + 1, FILL_CHUNK_ROWS):
            count = min(FILL_CHUNK_ROWS, n + 1 - start)
            t0 = time.perf_counter()
            rows, prev = prechained_rows(start, count, prev, base, closes)
            t1 = time.perf_counter()
            async with conn.transaction(), conn.cursor() as cur:
                async with cur.copy(f"COPY trace_event ({COPY_COLUMNS}) FROM STDIN") as copy:
                    for record in rows:
                        await copy.write_row(record)
                await cur.execute(
                    "UPDATE trace_head SET seq = %s, hash = %s WHERE singleton", (start + count - 1, prev)
                )
            times["python_s"] += t1 - t0
            times["copy_s"] += time.perf_counter() - t1
        await conn.execute("VACUUM ANALYZE trace_event")
        row = await (await conn.execute("SELECT pg_total_relation_size('trace_event')")).fetchone()
        times["table_mb"] = int(row[0]) / 1e6 if row else math.nan
    return times


async def read_baseline(conn: psycopg.AsyncConnection[Any], *, streamed: bool) -> int:
    """The floor under verification: the same rows read (`iter_sealed_rows`: JSON as text, tuples, in one REPEATABLE
    READ snapshot), nothing done with them. `streamed`: the verifier's read (one streamed statement, 250-row
    pages); otherwise 5,000-row keyset pages (the read the verifier used before, and the baseline recorded then)."""
    rows_read = 0
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        async for rows in iter_sealed_rows(conn, streamed=streamed):
            rows_read += len(rows)
    return rows_read


def cpu_now() -> float:
    own = psutil.Process().cpu_times()
    return own.user + own.system


def backend_cpu(process: psutil.Process | None) -> float:
    """CPU seconds the PostgreSQL backend serving the bench's connection has used (user + system)."""
    if process is None:
        return math.nan
    times = process.cpu_times()
    return float(times.user + times.system)


async def run_verify(url: str, n: int) -> dict[str, Any]:
    """Reads, `verify_chain` and `verify_log` interleaved VERIFY_ROUNDS times (a shared machine drifts); the minimum
    wall time of each, and the bench process's CPU seconds in that run."""
    keys = ("read", "sread", "verify", "log")
    out: dict[str, Any] = {f"{k}_{m}": [] for k in keys for m in ("s", "cpu", "pg")}
    ok = True
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
        backend = psutil.Process(int(row[0])) if row else None
        for _ in range(VERIFY_ROUNDS):
            for key, run in (
                ("read", lambda: read_baseline(conn, streamed=False)),
                ("sread", lambda: read_baseline(conn, streamed=True)),
                ("verify", lambda: verify_chain(conn)),
                ("log", lambda: verify_log(conn)),
            ):
                pg, cpu, started = backend_cpu(backend), cpu_now(), time.perf_counter()
                result: Any = await run()
                out[f"{key}_s"].append(time.perf_counter() - started)
                out[f"{key}_cpu"].append(cpu_now() - cpu)
                out[f"{key}_pg"].append(backend_cpu(backend) - pg)
                if key in ("read", "sread"):
                    ok &= result == n
                elif key == "verify":
                    ok &= result.ok and result.size == n
                else:
                    ok &= result.chain.ok and result.chain.size == n
        out["verify_ok"] = ok
        sample = [e async for e in iter_events(conn, upto_seq=10_000)]
        out["canonical_bytes_mean"] = statistics.fmean(len(e.canonical()) for e in sample) if sample else math.nan
    for key in keys:
        best = min(range(VERIFY_ROUNDS), key=lambda i, k=key: out[f"{k}_s"][i])  # type: ignore[misc]
        out[f"{key}_best_s"], out[f"{key}_best_cpu"] = out[f"{key}_s"][best], out[f"{key}_cpu"][best]
        out[f"{key}_best_pg"] = out[f"{key}_pg"][best]
    return out


# --- d. checkpoints ------------------------------------------------------------------------------------------


async def run_checkpoints(url: str, n: int, new_events: int) -> dict[str, Any]:
    """The first checkpoint of the log (a full read), then SIGN_ROUNDS times: `new_events` appended and sealed, and a
    checkpoint signed from the stored frontier. Each must extend the last (checked with a consistency proof)."""
    out: dict[str, Any] = {"sign_ms": [], "lock_ms": [], "sizes": []}
    signer = generate_signer(ORIGIN)
    closes = [str(uuid.UUID(int=10_000 + c)) for c in range(CLOSES)]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        first = await sign_log_checkpoint(conn, signer, ORIGIN, actor="bench")
        out["first_ms"] = (time.perf_counter() - started) * 1000
        assert first is not None and first.tree_size == n, "the first checkpoint did not cover the log"
        out["first_lock_ms"] = (first.lock_held_s or math.nan) * 1000
        previous = first
        for _ in range(SIGN_ROUNDS):
            for i in range(new_events):
                async with conn.transaction():
                    await append_event(
                        conn, actor="alice.chen", kind=BENCH_KIND, payload=event_payload(n + i),
                        close_id=closes[i % len(closes)],
                    )  # fmt: skip
            await seal_pending(conn)
            started = time.perf_counter()
            signed = await sign_log_checkpoint(conn, signer, ORIGIN, actor="bench")
            out["sign_ms"].append((time.perf_counter() - started) * 1000)
            assert signed is not None and signed.tree_size == previous.tree_size + new_events + 1
            out["lock_ms"].append((signed.lock_held_s or math.nan) * 1000)
            out["sizes"].append(signed.tree_size)
            previous = signed
        tree = await load_tree(conn, size=previous.tree_size)
        assert tree.root == previous.root, "the last checkpoint's root is not the tree's"
        verify_consistency(first.tree_size, tree.size, first.root, tree.root, tree.consistency_proof(first.tree_size))
        out["extends"] = True
    return out


# --- c. proofs -----------------------------------------------------------------------------------------------


async def run_proofs(url: str, n: int, proofs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        with timed(out, "load_tree_s"):
            tree = await load_tree(conn)
    leaves = [tree.leaf(i) for i in range(tree.size)]
    with timed(out, "build_s"):
        MerkleTree(leaves)
    out["tree_size"] = tree.size
    rng = random.Random(SEED)
    inclusion_ms: list[float] = []
    for _ in range(proofs):
        index = rng.randrange(tree.size)
        started = time.perf_counter_ns()
        path = tree.inclusion_proof(index)
        inclusion_ms.append((time.perf_counter_ns() - started) / 1e6)
        verify_inclusion(tree.leaf(index), index, tree.size, path, tree.root)
    consistency_ms: list[float] = []
    checked: list[tuple[int, list[bytes]]] = []
    for k in range(proofs):
        old_size = rng.randint(1, tree.size)
        started = time.perf_counter_ns()
        proof = tree.consistency_proof(old_size)
        consistency_ms.append((time.perf_counter_ns() - started) / 1e6)
        if k < CONSISTENCY_CHECKS:
            checked.append((old_size, proof))
    for old_size, proof in checked:
        old_root = root_from_leaf_hashes(leaves[:old_size])
        if old_size < tree.size:
            verify_consistency(old_size, tree.size, old_root, tree.root, proof)
    out["inclusion_ms"] = inclusion_ms
    out["consistency_ms"] = consistency_ms
    out["proofs_checked"] = f"{proofs} inclusion, {len(checked)} consistency"
    return out


# --- main ----------------------------------------------------------------------------------------------------


def describe_machine() -> str:
    return (
        f"python {platform.python_version()} ({platform.python_implementation()}) on {platform.machine()}, "
        f"nproc={len(os.sched_getaffinity(0))}, psycopg {psycopg.__version__} ({psycopg.pq.__impl__}), "
        f"orjson {orjson.__version__}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--writers", type=int, default=8, help="concurrent writers, one connection each")
    parser.add_argument("--batch", type=int, default=10, help="events per transaction (a B=1 phase also runs)")
    parser.add_argument("--events", type=int, default=100_000, help="events appended with --batch")
    parser.add_argument("--events-b1", type=int, default=20_000, help="events appended one per transaction")
    parser.add_argument("--verify-events", type=int, default=1_000_000, help="size of the log for b and c")
    parser.add_argument("--new-events", type=int, default=1_000, help="events between two signed checkpoints (d)")
    parser.add_argument("--proofs", type=int, default=1_000, help="random indexes for each proof kind")
    parser.add_argument("--skip-appends", action="store_true", help="run only b and c")
    parser.add_argument("--skip-verify", action="store_true", help="run only a")
    parser.add_argument(
        "--growth-events",
        type=int,
        default=0,
        help="also time b's reads and verifications on a log of this many events first, and print each one's cost"
        " growth exponent from there to --verify-events",
    )
    args = parser.parse_args(argv)
    if min(args.writers, args.batch, args.events, args.events_b1, args.verify_events, args.new_events, args.proofs) < 1:
        parser.error("every count must be at least 1")
    return args


def print_summary(
    appends: list[AppendResult],
    verify: dict[str, Any],
    signing: dict[str, Any],
    proofs: dict[str, Any],
    n: int,
    growth: dict[str, Any] | None = None,
) -> None:
    print("\n| Measure | Result | Target / reading |")
    print("| --- | --- | --- |")
    plain_rate = {r.batch: r.rate for r in appends if r.name.startswith("plain")}
    for r in appends:
        if r.name.startswith("plain"):
            print(f"| plain INSERT baseline, B={r.batch} | {r.rate:,.0f} rows/s | same-run baseline |")
            continue
        c = r.checks
        ratio = r.rate / plain_rate[r.batch] if plain_rate.get(r.batch) else math.nan
        headline = r.batch == 1 and "background" in r.name
        target = (
            f">= {TARGET_APPEND_RATIO} x plain: {'met' if ratio >= TARGET_APPEND_RATIO else 'MISSED'}; "
            if headline
            else ""
        )
        print(
            f"| {r.name}, {r.writers} writers | {r.rate:,.0f} events/s ({r.events:,} events, {r.wall_s:.1f} s) "
            f"| {target}chained/plain = {ratio:.2f}; verify ok={c.get('verify_ok')}, "
            f"gap-free={c.get('gap_free')}, pending left={c.get('pending_left')}, "
            f"sealing runs={c.get('sealing_runs')} |"
        )
    if verify:
        read_s, sread_s = verify["read_best_s"], verify["sread_best_s"]
        chain_s, log_s = verify["verify_best_s"], verify["log_best_s"]
        floor_s = min(read_s, sread_s)  # the ratio is taken against the faster of the two reads
        ratio = log_s / floor_s
        met = "met" if ratio <= TARGET_VERIFY_RATIO else "MISSED"
        print(
            f"| same rows read in 5,000-row keyset pages, nothing done (baseline), {n:,} events | {read_s:.2f} s "
            f"(bench CPU {verify['read_best_cpu']:.2f} s) | same-run baseline; "
            f"{verify['canonical_bytes_mean']:.0f} canonical bytes/event |"
        )
        print(
            f"| same rows read streamed, as the verifier reads them, nothing done (baseline), {n:,} events "
            f"| {sread_s:.2f} s (bench CPU {verify['sread_best_cpu']:.2f} s) | same-run baseline |"
        )
        print(
            f"| verify_chain, {n:,} events | {chain_s:.2f} s (ok={verify['verify_ok']}, "
            f"bench CPU {verify['verify_best_cpu']:.2f} s) | verify / faster read = {chain_s / floor_s:.2f} |"
        )
        print(
            f"| verify_log (`trace verify`: chain + every signed root), {n:,} events | {log_s:.2f} s "
            f"(bench CPU {verify['log_best_cpu']:.2f} s) | <= {TARGET_VERIFY_RATIO} x the faster read: {met}; "
            f"trace verify / faster read = {ratio:.2f} (/ keyset read {log_s / read_s:.2f}, "
            f"/ streamed read {log_s / sread_s:.2f}) |"
        )
    if verify:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        floor_s = min(verify["read_best_s"], verify["sread_best_s"])
        for key, label in (("sread", "streamed read"), ("log", "verify_log")):
            bench_cpu, pg_cpu = verify[f"{key}_best_cpu"], verify[f"{key}_best_pg"]
            print(
                f"| CPU of the {label}, {n:,} events | bench {bench_cpu:.2f} s + postgres backend {pg_cpu:.2f} s"
                f" = {bench_cpu + pg_cpu:.2f} CPU s in {verify[f'{key}_best_s']:.2f} s | "
                f"spread perfectly over {cores} cores: at least {(bench_cpu + pg_cpu) / cores:.2f} s"
                f" = {(bench_cpu + pg_cpu) / cores / floor_s:.2f} x the faster read |"
            )
    if verify and growth:
        small = growth["n"]
        for key, label in (("read", "keyset read"), ("sread", "streamed read"), ("verify", "verify_chain"),
                           ("log", "verify_log")):  # fmt: skip
            t1, t2 = growth[f"{key}_best_s"], verify[f"{key}_best_s"]
            c1, c2 = growth[f"{key}_best_cpu"], verify[f"{key}_best_cpu"]
            exponent = math.log(t2 / t1) / math.log(n / small)
            cpu_exponent = math.log(c2 / c1) / math.log(n / small) if c1 > 0 and c2 > 0 else math.nan
            print(
                f"| cost growth, {label}, {small:,} -> {n:,} events | {t1:.2f} s -> {t2:.2f} s "
                f"(bench CPU {c1:.2f} s -> {c2:.2f} s) | exponent log(t2/t1)/log(n2/n1) = {exponent:.2f} "
                f"(bench CPU {cpu_exponent:.2f}) |"
            )
    if signing:
        worst = max(signing["sign_ms"])
        met = "met" if worst < TARGET_SIGN_MS else "MISSED"
        print(
            f"| first checkpoint, {n:,} events (full read: every checkpoint before ADR 0039; baseline) "
            f"| {signing['first_ms']:,.0f} ms | same-run baseline |"
        )
        print(
            f"| checkpoint from the stored frontier, {signing['sizes'][-1]:,} events, {signing['new']:,} new "
            f"| {', '.join(f'{ms:.1f}' for ms in signing['sign_ms'])} ms (extends={signing['extends']}) "
            f"| < {TARGET_SIGN_MS:.0f} ms: {met}; frontier / full read = {worst / signing['first_ms']:.4f} |"
        )
        held = ", ".join(f"{ms:.1f}" for ms in signing["lock_ms"])
        print(
            f"| sealer's lock held while signing from the frontier | {held} ms "
            f"| the full read held it {signing['first_lock_ms']:,.0f} ms |"
        )
    if proofs:
        print(
            f"| load_tree, {proofs['tree_size']:,} leaves | {proofs['load_tree_s']:.2f} s "
            f"(tree build alone {proofs['build_s']:.2f} s) | |"
        )
        for kind in ("inclusion", "consistency"):
            ms = proofs[f"{kind}_ms"]
            ok = "met" if statistics.fmean(ms) < TARGET_PROOF_MS and percentile(ms, 99) < TARGET_PROOF_MS else "MISSED"
            print(
                f"| {kind}_proof ({len(ms):,} random) | mean {statistics.fmean(ms) * 1000:.1f} us, "
                f"p99 {percentile(ms, 99) * 1000:.1f} us, max {max(ms) * 1000:.1f} us "
                f"| < {TARGET_PROOF_MS:.0f} ms: {ok} |"
            )


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGALRM, _abort)
    signal.alarm(ABORT_AFTER_SECONDS)
    print(describe_machine())
    database: Database | None = None
    problems: list[str] = []
    appends: list[AppendResult] = []
    verify: dict[str, Any] = {}
    signing: dict[str, Any] = {}
    proofs: dict[str, Any] = {}
    growth: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="countersign-bench-trace-") as tmp:
        try:
            database = start_embedded(Path(tmp) / "pgdata", cleanup_mode="delete")
            pg_pid = database.embedded_server.get_pid() if database.embedded_server is not None else None
            with psycopg.connect(database.url) as conn:
                row = conn.execute("SHOW server_version").fetchone()
            print(f"postgres {row[0] if row else '?'} (embedded, default settings)")
            if not args.skip_appends:
                phases = [(args.batch, args.events), (1, args.events_b1)] if args.batch != 1 else [(1, args.events)]
                for batch, total in phases:
                    runs = [(True, "per-commit"), (False, "per-commit"), (False, "group")]
                    if batch == 1:
                        runs.append((False, "background"))
                    for plain, sealing in runs:
                        name = f"bench_{'plain' if plain else 'trace'}_b{batch}_{sealing.replace('-', '_')}"
                        url = fresh_database(database.url, name)
                        appending = run_appends(
                            url,
                            writers=args.writers,
                            batch=batch,
                            total=total,
                            plain=plain,
                            postgres_pid=pg_pid,
                            sealing=sealing,
                        )
                        result = asyncio.run(appending)
                        drop_database(database.url, name)
                        print_append(result)
                        appends.append(result)
                        if result.events < result.planned:
                            problems.append(
                                f"{result.name}: only {result.events} of {result.planned} in {PHASE_LIMIT_S} s"
                            )
                        if not plain and not (
                            result.checks["verify_ok"]
                            and result.checks["gap_free"]
                            and not result.checks["pending_left"]
                            and result.checks["sealed"] == result.events
                        ):
                            problems.append(f"{result.name}: checks failed {result.checks}")
            if not args.skip_verify and args.growth_events:
                small = args.growth_events
                url = fresh_database(database.url, "bench_verify_growth")
                asyncio.run(fill_log(url, small))
                growth = asyncio.run(run_verify(url, small))
                growth["n"] = small
                drop_database(database.url, "bench_verify_growth")
                print(f"\nverify at {small:,} events: { {k: _rounded(v) for k, v in growth.items()} }")
                if not growth["verify_ok"]:
                    problems.append(f"verify_chain did not accept the {small:,}-event log")
            if not args.skip_verify:
                n = args.verify_events
                url = fresh_database(database.url, "bench_verify")
                started = time.perf_counter()
                filled = asyncio.run(fill_log(url, n))
                print(
                    f"\nfilled {n:,} pre-chained events in {time.perf_counter() - started:.1f} s "
                    f"(python chain {filled['python_s']:.1f} s, COPY {filled['copy_s']:.1f} s, "
                    f"table {filled['table_mb']:.0f} MB)"
                )
                verify = asyncio.run(run_verify(url, n))
                print(f"verify: { {k: _rounded(v) for k, v in verify.items()} }")
                if not verify["verify_ok"]:
                    problems.append(f"verify_chain did not accept the {n:,}-event log")
                signing = asyncio.run(run_checkpoints(url, n, args.new_events))
                signing["new"] = args.new_events
                print(f"checkpoints: {signing}")
                proofs = asyncio.run(run_proofs(url, n, args.proofs))
                print(f"load_tree {proofs['load_tree_s']:.2f} s; proofs checked: {proofs['proofs_checked']}")
            print_summary(appends, verify, signing, proofs, args.verify_events, growth)
        except (BenchAborted, KeyboardInterrupt, AssertionError, psycopg.Error) as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            stop_embedded(database)
            signal.alarm(0)
    return exit_code(problems)


if __name__ == "__main__":
    sys.exit(main())
