"""Benchmark: the signed decision callback end to end against a running server on a loopback socket.

Run: .venv/bin/python bench/bench_callbacks.py [--decisions 4000] [--concurrency 32] [--workers 1] [--profile]
     [--growth-decisions N]

Setup (in a temporary directory): an embedded PostgreSQL, the schema, the principals, one close, and N open gates
inserted directly (approver role `controller`, quorum 1). Then `countersign serve` runs as a subprocess and C
concurrent HTTP clients post one signed decision per gate as `alice.chen`, signed by the door's HMAC and by
alice's own Ed25519 key (generated for the run, registered with her principal): verify the HMAC, verify the
person's signature, authorise (principal, role, separation of duties), insert the decision, append the hash-chained
trace event, respond.

Same-run baselines: `GET /healthz` (one `SELECT 1` through the same pool) at the same concurrency for the same
number of requests, and `record_decision` called in-process over a pool of the same size (no HTTP), which
separates the database path from the HTTP stack. CPU seconds per process and samples of `pg_stat_activity` show
where the time goes. Afterwards it checks that the database holds exactly the decisions sent and that the trace
chain verifies. It ends with the figure issue 25 asks for: signed decisions per second as a ratio to `/healthz` in
the same run, and their p50/p99 (target: >= 0.5 x /healthz and p99 < 100 ms).

`--profile` samples the server while the timed decisions run, with py-spy when it is on PATH (or named by
PY_SPY; not a project dependency: `pip install py-spy`), else under cProfile for the server's whole life, and prints
the top of the profile: own time by area, the request path's functions with their callees, and the top functions.
Every run also prints Postgres's side: its PL/pgSQL functions (the decision's triggers) by self time per decision,
from `pg_stat_user_functions` with `track_functions = 'pl'` set on the bench database. `--growth-decisions N` times
N decisions first, on the same server at the same concurrency, and prints the cost growth exponent from N to
--decisions.

Bounded: every phase stops issuing requests after PHASE_LIMIT_S and the whole script aborts
itself (cleaning up) after ABORT_AFTER_SECONDS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402
import psutil  # noqa: E402
import psycopg  # noqa: E402
from _support import exit_code, growth_exponent, prepare_open_gates, stop_embedded, summary_digests  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg_pool import AsyncConnectionPool  # noqa: E402

from countersign.audit.trace import verify_chain  # noqa: E402
from countersign.bootstrap import migrate  # noqa: E402
from countersign.bootstrap.database import Database, start_embedded  # noqa: E402
from countersign.bootstrap.settings import load_settings  # noqa: E402
from countersign.callbacks.decision_writer import DecisionRequest, record_decision  # noqa: E402
from countersign.callbacks.principals import parse_principals  # noqa: E402
from countersign.callbacks.signature import sign  # noqa: E402
from countersign.scenarios.scripted_people import ScriptedPeople  # noqa: E402
from countersign.synthetic import generate_books, load_profile  # noqa: E402

SECRET = "bench-callback-secret"
PRINCIPAL = "alice.chen"
PEOPLE = parse_principals(REPO_ROOT / "config" / "principals.yaml")
SCRIPTED = ScriptedPeople(PEOPLE)  # every scripted approver signs with their own key
SEED = 42
WARMUP_DECISIONS = 200
GROWTH_PHASE = "decisions (HTTP), the smaller size for cost growth"
HEALTHZ_WARMUP = 500
SERVER_POOL_SIZE = 10  # countersign/bootstrap/app.py: AsyncConnectionPool(max_size=10)
ABORT_AFTER_SECONDS = 300
PHASE_LIMIT_S = 90.0
HEALTH_WAIT_S = 60.0
ACTIVITY_SAMPLE_S = 0.02
TARGET_RATIO = 0.5  # signed decisions/s over /healthz req/s in the same run (issue 25)
TARGET_P99_MS = 100.0
PY_SPY_RATE_HZ = 100


class BenchAborted(RuntimeError):
    pass


class BenchFailed(RuntimeError):
    pass


@dataclass
class PhaseResult:
    name: str
    planned: int
    wall_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)
    activity: Counter[str] = field(default_factory=Counter)

    @property
    def done(self) -> int:
        return len(self.latencies_ms)

    @property
    def rate_per_s(self) -> float:
        return self.done / self.wall_s if self.wall_s else 0.0

    def percentile_ms(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return math.nan
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


# --- CPU accounting ------------------------------------------------------------------------------------------


def _tree_cpu(pid: int | None) -> dict[int, float]:
    """CPU seconds (user + system) of a process and its live descendants, keyed by pid."""
    if pid is None:
        return {}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return {}
    out: dict[int, float] = {}
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        out[proc.pid] = times.user + times.system
    return out


def _delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


@dataclass
class CpuWatch:
    server_pid: int | None
    postgres_pid: int | None

    def snapshot(self) -> dict[str, Any]:
        machine = psutil.cpu_times()
        own = psutil.Process().cpu_times()
        return {
            "bench": own.user + own.system,
            "server": _tree_cpu(self.server_pid),
            "postgres": _tree_cpu(self.postgres_pid),
            "machine_busy": sum(machine) - machine.idle - getattr(machine, "iowait", 0.0),
        }

    @staticmethod
    def spent(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
        return {
            "bench": after["bench"] - before["bench"],
            "server": _delta(before["server"], after["server"]),
            "postgres": _delta(before["postgres"], after["postgres"]),
            "machine_busy": after["machine_busy"] - before["machine_busy"],
        }

    @staticmethod
    def with_other(spent: dict[str, float]) -> dict[str, float]:
        """Add `other`: busy CPU on the machine not spent by this process, the server or Postgres (noise)."""
        ours = spent["bench"] + spent["server"] + spent["postgres"]
        return {**spent, "other": max(0.0, spent["machine_busy"] - ours)}


# --- setup ---------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def prepare_database(database: Database, books_dir: Path, gate_sets: dict[str, int]) -> dict[str, list[str]]:
    """Principals, books, one close, and `count` open controller gates per gate set (named in each gate's rule).
    Returns gate ids."""
    return await prepare_open_gates(
        database,
        books_dir,
        gate_sets,
        people=SCRIPTED,
        registered=PEOPLE,
        task="bank_reconciliation",
        tier="medium",
        analyze=True,
    )


# --- the server ----------------------------------------------------------------------------------------------


def app_factory() -> Any:
    """For `--workers > 1`: uvicorn needs an import string; this builds the same app `countersign serve` does."""
    from countersign.bootstrap.app import create_app
    from countersign.bootstrap.runtime import boot

    return create_app(boot(load_settings()))


def server_command(port: int, workers: int, profile_out: Path | None) -> list[str]:
    if workers > 1:
        return [
            sys.executable,
            "-m",
            "uvicorn",
            "bench_callbacks:app_factory",
            "--factory",
            "--app-dir",
            str(Path(__file__).resolve().parent),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "info",
        ]
    profiler = ["-m", "cProfile", "-o", str(profile_out)] if profile_out else []
    return [
        sys.executable,
        *profiler,
        "-m",
        "countersign.cli.main",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def stop(self) -> int | None:
        """SIGINT first (uvicorn's graceful shutdown; cProfile writes its file), then SIGTERM, then SIGKILL."""
        for sig, wait_s in ((signal.SIGINT, 20.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if self.process.poll() is not None:
                break
            self.process.send_signal(sig)
            try:
                self.process.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue
        return self.process.poll()


def start_server(database: Database, state_dir: Path, workers: int, profile_out: Path | None) -> Server:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database.url,
        "COUNTERSIGN_CALLBACK_SECRET": SECRET,
        "COUNTERSIGN_STATE_DIR": str(state_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    for key in ("COUNTERSIGN_ENGINE_DATABASE_URL", "COUNTERSIGN_CALLBACKS_DATABASE_URL"):
        env.pop(key, None)
    log_path = state_dir / "server.log"
    state_dir.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            server_command(port, workers, profile_out),
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(process, f"http://127.0.0.1:{port}", log_path)
    deadline = time.monotonic() + HEALTH_WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchFailed(f"server exited with {process.returncode} before it was healthy:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.base_url}/healthz", timeout=2.0, trust_env=False).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.stop()
    raise BenchFailed(f"server not healthy after {HEALTH_WAIT_S:.0f} s:\n{server.log_tail()}")


# --- profile -------------------------------------------------------------------------------------------------


def find_py_spy() -> str | None:
    """py-spy's executable (PY_SPY, else PATH, else beside this interpreter), or None: cProfile is used instead."""
    named = os.environ.get("PY_SPY")
    if named:
        return named if Path(named).is_file() else None
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if beside.is_file() else None)


@dataclass
class PySpy:
    """py-spy attached to the server for one phase: `--format raw` writes one collapsed stack per line with its count;
    idle stacks (waiting in epoll) are left out, so the samples are where the server spends CPU or waits on a lock."""

    executable: str
    out: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, pid: int) -> None:
        command = [self.executable, "record", "--pid", str(pid), "--rate", str(PY_SPY_RATE_HZ)]
        command += ["--format", "raw", "--output", str(self.out)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # py-spy attaches before the phase starts

    def stop(self) -> str:
        """Stop sampling (py-spy writes its file on SIGINT); return py-spy's complaint when it wrote none."""
        if self.process is None:
            return "py-spy was not started"
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return "" if self.out.exists() else err.decode(errors="replace").strip()[-500:]


# --- load ----------------------------------------------------------------------------------------------------


async def sample_activity(url: str, into: Counter[str], stop: asyncio.Event) -> None:
    """Tally what the callbacks role's backends are doing, every ACTIVITY_SAMPLE_S."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            async with conn.cursor() as cur:
                await cur.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity"
                    " WHERE usename = 'countersign_callbacks' AND pid <> pg_backend_pid()"
                )
                for state, wait_type, wait_event in await cur.fetchall():
                    into[f"{state} / {wait_type or '-'}:{wait_event or '-'}"] += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), ACTIVITY_SAMPLE_S)


async def drive(
    result: PhaseResult,
    items: list[str],
    call: Callable[[int, str], Awaitable[int]],
    concurrency: int,
    cpu: CpuWatch,
    owner_url: str,
) -> PhaseResult:
    """`concurrency` tasks take items from one queue; `call(task_index, item)` returns an HTTP-like status."""
    queue: Iterator[str] = iter(items)
    deadline = time.monotonic() + PHASE_LIMIT_S

    async def client(index: int) -> None:
        for item in queue:
            if time.monotonic() > deadline:
                return
            started = time.perf_counter()
            try:
                status = await call(index, item)
                detail = f"status {status}"
            except BenchAborted:
                raise
            except Exception as exc:  # a refused or failed decision is an error to count, not a crash
                status, detail = 0, f"{type(exc).__name__}: {exc}"
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
            if status != 200:
                result.errors += 1
                if len(result.error_samples) < 5:
                    result.error_samples.append(detail)

    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_activity(owner_url, result.activity, stop))
    before = cpu.snapshot()
    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    result.wall_s = time.perf_counter() - started
    result.cpu_s = CpuWatch.with_other(CpuWatch.spent(before, cpu.snapshot()))
    stop.set()
    await sampler
    return result


def signed_decision(gate_id: str, summary_digest: str) -> tuple[str, bytes, dict[str, str]]:
    """A signed-callback request deciding the gate, signed over its summary digest (`summary_digests`)."""
    body = json.dumps(SCRIPTED.body(gate_id, PRINCIPAL, "approve", "bench", summary_digest=summary_digest)).encode()
    stamp = str(int(time.time()))
    headers = {
        "content-type": "application/json",
        "x-countersign-timestamp": stamp,
        "x-countersign-signature": sign(SECRET, stamp, body),
    }
    return f"/callbacks/gates/{gate_id}/decisions", body, headers


async def run_load(
    server: Server,
    database: Database,
    gates: dict[str, list[str]],
    digests: dict[str, str],
    concurrency: int,
    cpu: CpuWatch,
    direct: bool,
    shared_client: bool,
    sampler: PySpy | None = None,
) -> list[PhaseResult]:
    # One AsyncClient (one keep-alive connection) per concurrent caller by default: httpcore's pool does
    # O(connections^2) bookkeeping per request, so one shared 32-connection client costs the client more CPU
    # than the server spends on /healthz, and the client shares the cores with the server and Postgres.
    clients_count = 1 if shared_client else concurrency
    per_client = concurrency if shared_client else 1
    limits = httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=server.base_url, limits=limits, timeout=30.0, trust_env=False)
            )
            for _ in range(clients_count)
        ]

        async def post_decision(index: int, gate_id: str) -> int:
            path, body, headers = signed_decision(gate_id, digests[gate_id])
            return (await clients[index % clients_count].post(path, content=body, headers=headers)).status_code

        async def get_health(index: int, _: str) -> int:
            return (await clients[index % clients_count].get("/healthz")).status_code

        n = len(gates["bench"])
        warmup = await drive(
            PhaseResult("warm-up decisions", len(gates["warmup"])),
            gates["warmup"],
            post_decision,
            concurrency,
            cpu,
            database.url,
        )
        await drive(
            PhaseResult("warm-up healthz", HEALTHZ_WARMUP),
            ["-"] * HEALTHZ_WARMUP,
            get_health,
            concurrency,
            cpu,
            database.url,
        )
        growth = None
        if gates.get("growth"):
            growth = await drive(
                PhaseResult(GROWTH_PHASE, len(gates["growth"])),
                gates["growth"],
                post_decision,
                concurrency,
                cpu,
                database.url,
            )
        if sampler is not None:
            sampler.start(server.process.pid)
        try:
            decisions = await drive(
                PhaseResult("decisions (HTTP)", n), gates["bench"], post_decision, concurrency, cpu, database.url
            )
        finally:
            problem = sampler.stop() if sampler is not None else ""
            if problem:
                print(f"py-spy wrote no profile: {problem}")
        healthz = await drive(
            PhaseResult("healthz baseline (HTTP)", n), ["-"] * n, get_health, concurrency, cpu, database.url
        )
    results = [warmup, decisions, healthz]
    if direct:
        pool = AsyncConnectionPool(
            database.callbacks_url,
            min_size=SERVER_POOL_SIZE,
            max_size=SERVER_POOL_SIZE,
            open=False,
            kwargs={"autocommit": True},
        )
        await pool.open(wait=True)
        try:

            async def decide_in_process(_: int, gate_id: str) -> int:
                nonce = uuid.uuid4().hex
                proof = SCRIPTED.proof(gate_id, PRINCIPAL, "approve", "bench", nonce, summary_digest=digests[gate_id])
                request = DecisionRequest(gate_id, PRINCIPAL, "approve", "bench", nonce, "signed_callback", proof)
                async with pool.connection() as conn:
                    outcome = await record_decision(conn, request)
                return 200 if outcome.recorded else 500

            results.append(
                await drive(
                    PhaseResult(f"record_decision in-process (no HTTP, pool {SERVER_POOL_SIZE})", n),
                    gates["direct"],
                    decide_in_process,
                    concurrency,
                    CpuWatch(None, cpu.postgres_pid),
                    database.url,
                )
            )
        finally:
            await pool.close()
    if growth is not None:
        results.append(growth)
    return results


# --- checks and report ---------------------------------------------------------------------------------------


async def check_database(database: Database, expected: dict[str, int]) -> list[str]:
    problems: list[str] = []
    async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as conn:
        async with conn.cursor() as cur:
            await cur.execute(
                "SELECT substr(g.rule, 7), count(*) FROM gate_decision d JOIN gate g USING (gate_id) GROUP BY 1"
            )
            found = {str(prefix): int(count) for prefix, count in await cur.fetchall()}
            await cur.execute("SELECT count(*) FROM trace_event WHERE kind = 'gate_decided'")
            row = await cur.fetchone()
            traced = int(row[0]) if row else -1
        for prefix, count in expected.items():
            if found.get(prefix, 0) != count:
                problems.append(f"{prefix}: expected {count} decisions in the database, found {found.get(prefix, 0)}")
        if sum(found.values()) != sum(expected.values()):
            problems.append(f"database holds {sum(found.values())} decisions, expected {sum(expected.values())}")
        if traced != sum(expected.values()):
            problems.append(f"{traced} gate_decided trace events for {sum(expected.values())} decisions")
        started = time.perf_counter()
        verdict = await verify_chain(conn)
        verify_s = time.perf_counter() - started
    state = "ok" if verdict.ok else f"BROKEN at seq {verdict.first_bad_seq}: {verdict.problem}"
    print(f"trace chain: {verdict.size:,} events, {state} (verified in {verify_s:.2f} s)")
    if not verdict.ok:
        problems.append(f"trace chain does not verify: {verdict.problem}")
    print(f"decisions in the database by gate set: {found}; gate_decided events: {traced:,}")
    return problems


def print_phase(result: PhaseResult) -> None:
    print(f"\n{result.name}: {result.done:,} of {result.planned:,} requests in {result.wall_s:.2f} s")
    print(f"  throughput: {result.rate_per_s:,.0f} req/s; errors (non-200): {result.errors}")
    print(
        f"  latency ms: p50 {result.percentile_ms(50):.1f}, p95 {result.percentile_ms(95):.1f},"
        f" p99 {result.percentile_ms(99):.1f}, max {max(result.latencies_ms, default=math.nan):.1f}"
    )
    for sample in result.error_samples:
        print(f"  error: {sample}")
    if result.cpu_s and result.wall_s:
        cores = ", ".join(f"{name} {seconds / result.wall_s:.2f}" for name, seconds in result.cpu_s.items())
        per_request = ", ".join(
            f"{name} {seconds / max(result.done, 1) * 1e6:,.0f}"
            for name, seconds in result.cpu_s.items()
            if name not in ("machine_busy", "other")
        )
        print(f"  CPU cores busy (of {psutil.cpu_count()}): {cores}")
        print(f"  CPU us per request: {per_request}")
    total = sum(result.activity.values())
    if total:
        top = ", ".join(f"{state} {count / total:.0%}" for state, count in result.activity.most_common(6))
        print(f"  callbacks backends (pg_stat_activity samples): {top}")


PROFILE_AREAS = (
    ("psycopg", "psycopg"),
    ("asyncio + selectors", "asyncio"),
    ("asyncio + selectors", "selectors"),
    ("uvicorn + h11", "uvicorn"),
    ("uvicorn + h11", "h11"),
    ("starlette + fastapi", "starlette"),
    ("starlette + fastapi", "fastapi"),
    ("countersign code", "callbacks"),
    ("countersign code", "audit"),
)
PROFILE_FUNCTIONS = (  # (file suffix, function, per what)
    ("uvicorn/protocols/http/h11_impl.py", "run_asgi", "request"),
    ("countersign/web/callbacks.py", "decide", "decision"),
    ("countersign/services/decide.py", "decide_gate", "decision"),
    ("countersign/callbacks/decision_writer.py", "record_and_announce", "decision"),
    ("countersign/callbacks/decision_writer.py", "_record", "decision"),
    ("countersign/callbacks/decision_writer.py", "gate_outcome", "decision"),
    ("countersign/callbacks/decision_writer.py", "_check_person_proof", "decision"),
    ("countersign/engine/outbox.py", "enqueue_card_updates", "decision"),
    ("countersign/audit/sealer.py", "seal", "decision"),
    ("countersign/audit/sealer.py", "_seal_once", "decision"),
    ("countersign/audit/trace.py", "seal_pending", "decision"),
    ("countersign/callbacks/signature.py", "verify", "decision"),
    ("countersign/callbacks/person_signature.py", "check_person_signature", "decision"),
    ("countersign/bootstrap/app.py", "healthz", "healthz request"),
)


def _area(filename: str) -> str:
    parts = Path(filename).parts
    for area, marker in PROFILE_AREAS:
        if marker in parts or any(part.startswith(f"{marker}.") for part in parts[-1:]):
            return area
    return "builtins + other"


def print_profile(path: Path, counts: dict[str, int], lines: int) -> None:
    """Own time by area, then cumulative time of the request path's functions (coroutines: only while running)."""
    import pstats

    if not path.exists():
        print(f"\nno server profile written at {path.name}")
        return
    stats = pstats.Stats(str(path))
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    by_area: Counter[str] = Counter()
    for (filename, _, name), (_, _, own_s, _, _) in raw.items():
        by_area["idle (epoll wait)" if "epoll" in name else _area(filename)] += own_s
    total = sum(by_area.values())
    print(f"\nserver cProfile, whole server lifetime ({total:.1f} s profiled, profiler overhead included)")
    print(
        "  own time by area: " + ", ".join(f"{area} {s:.1f} s ({s / total:.0%})" for area, s in by_area.most_common())
    )
    print(f"  CPU inside request-path functions, callees included ({counts}):")
    for suffix, function, per in PROFILE_FUNCTIONS:
        for (filename, _, name), (_, _, _, cumulative_s, _) in raw.items():
            if name == function and filename.endswith(suffix):
                each_ms = cumulative_s / max(counts[per], 1) * 1000
                print(f"    {suffix}:{function}: {cumulative_s:.2f} s, {each_ms:.2f} ms per {per}")
    print(f"  top {lines} functions by own time:")
    stats.strip_dirs().sort_stats("tottime").print_stats(lines)


def _frame(raw: str) -> tuple[str, str]:
    """(file, function) of one py-spy raw frame, `function (path/to/file.py:123)`."""
    name, _, where = raw.rpartition(" (")
    return where.rsplit(":", 1)[0], name


def print_stacks(path: Path, decisions: int, lines: int) -> None:
    """The top of a py-spy profile of the timed decisions: own samples by area and by function, and the share of the
    request path's functions with their callees (a coroutine counts only while it runs, not while it awaits)."""
    if not path.exists():
        print(f"\nno py-spy profile written at {path.name}")
        return
    own_area: Counter[str] = Counter()
    own_function: Counter[str] = Counter()
    inside: Counter[tuple[str, str]] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame(raw) for raw in stack.split(";")]
        total += count
        filename, function = frames[-1]
        own_area[_area(filename)] += count
        own_function[f"{Path(filename).name}:{function}"] += count
        for key in set(frames):
            inside[key] += count
    if not total:
        print("\npy-spy profile is empty")
        return
    print(f"\nserver py-spy profile of the timed decisions: {total:,} samples at {PY_SPY_RATE_HZ} Hz, idle left out")
    print("  own samples by area: " + ", ".join(f"{a} {n / total:.0%}" for a, n in own_area.most_common()))
    print(f"  request path, callees included (share of samples; {decisions:,} decisions):")
    for suffix, function, _ in PROFILE_FUNCTIONS:
        count = sum(
            n
            for (filename, name), n in inside.items()
            if name.rsplit(".", 1)[-1] == function and filename.endswith(suffix)
        )
        if count:
            print(f"    {suffix}:{function}: {count / total:.1%}")
    print(f"  top {lines} functions by own samples:")
    for name, count in own_function.most_common(lines):
        print(f"    {count / total:6.1%}  {name}")


def track_functions(database: Database) -> dict[str, tuple[int, float]]:
    """Turn on PostgreSQL's per-function statistics for the bench database (new sessions: the server's pool) and
    return the counters as they stand, to subtract at the end."""
    with psycopg.connect(database.url, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(sql.Identifier(name[0] if name else ""))
        )
    return function_stats(database)


def function_stats(database: Database) -> dict[str, tuple[int, float]]:
    """Each PL/pgSQL function's calls and self time (ms), as the statistics collector holds them now (a session's
    counts arrive when it ends or goes idle, so read this after the server and pools have closed)."""
    with psycopg.connect(database.url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT schemaname || '.' || funcname, calls, self_time FROM pg_stat_user_functions"
        ).fetchall()
    return {name: (int(calls), float(self_ms)) for name, calls, self_ms in rows}


def print_function_profile(
    before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]], decisions: int, lines: int
) -> None:
    """Where Postgres spends a decision: the database functions (triggers included) by self time over every decision
    phase of the run, per decision."""
    spent = {
        name: (calls - before.get(name, (0, 0.0))[0], self_ms - before.get(name, (0, 0.0))[1])
        for name, (calls, self_ms) in after.items()
    }
    spent = {name: value for name, value in spent.items() if value[0] > 0}
    if not spent:
        print("\npostgres function profile: no function statistics were reported")
        return
    total = sum(ms for _, ms in spent.values())
    print(
        f"\npostgres functions by self time over every decision phase ({decisions:,} decisions;"
        f" {total / decisions * 1000:,.0f} us per decision in PL/pgSQL functions, triggers included):"
    )
    for name, (calls, self_ms) in sorted(spent.items(), key=lambda item: -item[1][1])[:lines]:
        print(
            f"  {self_ms / decisions * 1000:7,.0f} us/decision  {calls / decisions:5.2f} calls/decision"
            f"  {self_ms / calls * 1000:7,.0f} us/call  {name}"
        )


def describe_machine() -> str:
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return (
        f"python {platform.python_version()} on {platform.machine()}, cpus={len(os.sched_getaffinity(0))}; "
        f"uvicorn loop={loop}, http={http}"
    )


# --- main ----------------------------------------------------------------------------------------------------


def _abort(signum: int, frame: object) -> None:
    raise BenchAborted(f"aborted after {ABORT_AFTER_SECONDS} s")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--decisions", type=int, default=4000, help="decisions to time (one per gate)")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent HTTP clients")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument(
        "--shared-client", action="store_true", help="one httpx.AsyncClient with C connections instead of C clients"
    )
    parser.add_argument("--no-direct", action="store_true", help="skip the in-process record_decision baseline")
    parser.add_argument(
        "--growth-decisions",
        type=int,
        default=0,
        help="also time this many decisions first (same server, same concurrency) and print the cost growth exponent",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile the server while the timed decisions run (py-spy when found, else cProfile) and print the top",
    )
    parser.add_argument(
        "--profile-server", action="store_true", help="run the server under cProfile and print the top functions"
    )
    args = parser.parse_args(argv)
    if args.growth_decisions < 0 or args.growth_decisions == args.decisions:
        parser.error("--growth-decisions must be a size other than --decisions")
    if args.decisions < 1 or args.concurrency < 1 or args.workers < 1:
        parser.error("--decisions, --concurrency and --workers must be at least 1")
    if (args.profile or args.profile_server) and args.workers > 1:
        parser.error("--profile and --profile-server need --workers 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGALRM, _abort)
    signal.alarm(ABORT_AFTER_SECONDS)
    print(describe_machine())
    n = args.decisions
    gate_sets = {"bench": n, "warmup": WARMUP_DECISIONS, **({} if args.no_direct else {"direct": n})}
    if args.growth_decisions:
        gate_sets["growth"] = args.growth_decisions
    database: Database | None = None
    server: Server | None = None
    functions_before: dict[str, tuple[int, float]] | None = None
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        root = Path(tmp)
        py_spy = find_py_spy() if args.profile and not args.profile_server else None
        sampler = PySpy(py_spy, root / "decisions.stacks") if py_spy else None
        cprofile = args.profile_server or (args.profile and sampler is None)
        profile_out = root / "server.prof" if cprofile else None
        if args.profile:
            how = f"py-spy ({py_spy}), timed decisions only" if sampler else "cProfile, whole server life"
            print(f"profile: {how}")
        try:
            started = time.perf_counter()
            database = start_embedded(root / "pgdata", cleanup_mode="delete")
            migrate.upgrade(database)
            books = root / "books"
            generate_books(load_profile(REPO_ROOT / "config" / "profiles" / "default.yaml"), SEED, books)
            gates = asyncio.run(prepare_database(database, books, gate_sets))
            digests = asyncio.run(summary_digests(database, [g for ids in gates.values() for g in ids]))
            with psycopg.connect(database.url) as conn:
                row = conn.execute("SHOW server_version").fetchone()
            print(f"postgres {row[0] if row else '?'} (embedded, default settings)")
            print(f"setup: {sum(gate_sets.values()):,} gates in {time.perf_counter() - started:.1f} s")

            functions_before = track_functions(database)
            server = start_server(database, root / "state", args.workers, profile_out)
            via = "countersign serve" if args.workers == 1 else "uvicorn --factory"
            print(f"server: {via}, {args.workers} worker(s), {server.base_url}, pool max {SERVER_POOL_SIZE}/worker")
            embedded = database.embedded_server
            cpu = CpuWatch(server.process.pid, embedded.get_pid() if embedded is not None else None)
            clients = "one shared httpx client" if args.shared_client else "one httpx client each"
            print(f"N={n:,} decisions, concurrency={args.concurrency} ({clients}), principal {PRINCIPAL}")
            results = asyncio.run(
                run_load(
                    server,
                    database,
                    gates,
                    digests,
                    args.concurrency,
                    cpu,
                    not args.no_direct,
                    args.shared_client,
                    sampler,
                )
            )
            for result in results:
                print_phase(result)
                if result.errors or result.done < result.planned:
                    problems.append(f"{result.name}: {result.errors} errors, {result.done}/{result.planned} done")

            decisions, healthz = results[1], results[2]
            ratio = decisions.rate_per_s / healthz.rate_per_s if healthz.rate_per_s else math.nan
            print(f"\nratio decisions/s / healthz req/s: {ratio:.2f}")
            if len(results) > 3:
                direct_ratio = decisions.rate_per_s / results[3].rate_per_s
                print(f"ratio HTTP decisions/s / in-process decisions/s: {direct_ratio:.2f}")
            grown = next((r for r in results if r.name == GROWTH_PHASE), None)
            if grown is not None and grown.wall_s and decisions.wall_s:
                exponent = growth_exponent(grown.done, grown.wall_s, decisions.done, decisions.wall_s)
                print(
                    f"cost growth, signed decisions, {grown.done:,} -> {decisions.done:,}: {grown.wall_s:.2f} s ->"
                    f" {decisions.wall_s:.2f} s, exponent {exponent:.2f} (p99 {grown.percentile_ms(99):.1f} ->"
                    f" {decisions.percentile_ms(99):.1f} ms)"
                )
            expected = {prefix: len(ids) for prefix, ids in gates.items()}
            problems += asyncio.run(check_database(database, expected))
            p99 = decisions.percentile_ms(99)
            print(
                f"signed decisions: {decisions.rate_per_s:,.0f}/s = {ratio:.2f} x /healthz ({healthz.rate_per_s:,.0f}"
                f" req/s) in the same run; p50 {decisions.percentile_ms(50):.1f} ms, p99 {p99:.1f} ms"
            )
            meets = ratio >= TARGET_RATIO and p99 < TARGET_P99_MS
            print(
                f"target >= {TARGET_RATIO} x /healthz and p99 < {TARGET_P99_MS:.0f} ms: {ratio:.2f} x, p99 {p99:.1f} ms"
                f" -> {'MET' if meets else 'MISSED'}"
            )
        except (BenchAborted, BenchFailed, KeyboardInterrupt) as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            if server is not None:
                code = server.stop()
                if problems:
                    print(f"server log tail:\n{server.log_tail()}")
                print(f"server stopped (exit code {code})")
            if profile_out is not None:
                decided = gate_sets["bench"] + gate_sets["warmup"]
                healthz = gate_sets["bench"] + HEALTHZ_WARMUP
                counts = {"decision": decided, "healthz request": healthz, "request": decided + healthz}
                print_profile(profile_out, counts, 20)
            if sampler is not None:
                print_stacks(sampler.out, gate_sets["bench"], 20)
            if functions_before is not None and database is not None:
                decided = sum(count for name, count in gate_sets.items())
                print_function_profile(functions_before, function_stats(database), decided, 12)
            stop_embedded(database)
            signal.alarm(0)
    return exit_code(problems)


if __name__ == "__main__":
    sys.exit(main())
