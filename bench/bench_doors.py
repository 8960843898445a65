"""Benchmark: does a signed decision still answer, and how fast, while strangers attack `countersign serve`'s doors?

Run: .venv/bin/python bench/bench_doors.py [--decisions 100] [--idle 500] [--head-gib 1]

Setup as bench/bench_callbacks.py (embedded PostgreSQL, schema, principals, one close), with open controller gates
inserted directly on one real task of the close (attempts 1..N, since the database admits gates only for tasks its
enforced policy knows); then `countersign serve` as a subprocess with its default bounds
(countersign/bootstrap/limits.py,
ADR 0023). Three phases, each timing `--decisions` signed decisions posted one after another (a fresh connection
each, as a chat platform's callback would arrive) and `GET /healthz` between them:

1. baseline: nothing else happening;
2. heads: 8 threads send endless request heads (one header value that never ends), reconnecting each time the
   server cuts them off, until `--head-gib` GiB were offered in all;
3. idle: `--idle` connections that send nothing plus 20 that dribble a head a byte at a time, re-opened whenever the
   server closes them, held for the whole phase.

It prints p50/p99/max latency per phase, the ratio of each attacked phase to the same-run baseline, the server's RSS
before, at its peak and after, how many bytes the attackers managed to write, and whether every decision recorded.
Exit 1 if a decision failed or took 1 s or more, or RSS grew 50 MB or more. `--smoke` runs tiny sizes (13 decisions
per phase, 20 idle connections, 0.01 GiB of heads) and judges only that every decision recorded, not time or RSS:
`make test` runs it so the script cannot rot.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import bench_callbacks as callbacks_bench  # noqa: E402
import httpx  # noqa: E402
import psutil  # noqa: E402
import psycopg  # noqa: E402
from _support import exit_code, prepare_open_gates, summary_digests  # noqa: E402

from countersign.bootstrap import migrate  # noqa: E402
from countersign.bootstrap.database import Database, start_embedded  # noqa: E402
from countersign.synthetic import generate_books, load_profile  # noqa: E402

GIB = 1024 * 1024 * 1024
CHUNK_BYTES = 64 * 1024
HEAD_THREADS = 8
DRIBBLERS = 20
DECISION_BUDGET_S = 1.0
RSS_BUDGET_BYTES = 50 * 1000 * 1000
PAUSE_BETWEEN_DECISIONS_S = 0.05
GATED_TASK = "accruals"
WARMUP_DECISIONS = 10
SMOKE_DECISIONS = 13
SMOKE_IDLE = 20
SMOKE_HEAD_GIB = 0.01


@dataclass
class Phase:
    name: str
    latencies_ms: list[float] = field(default_factory=list)
    health_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    attack: str = ""

    def pct(self, values: list[float], p: float) -> float:
        ordered = sorted(values)
        if not ordered:
            return math.nan
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


class RssPeak:
    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def _endless_heads(port: int, offered: list[int], budget_bytes: int, stop: threading.Event) -> None:
    chunk = b"a" * CHUNK_BYTES
    while not stop.is_set() and sum(offered) < budget_bytes:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: bench\r\nx-padding: ")
                while not stop.is_set() and sum(offered) < budget_bytes:
                    sock.sendall(chunk)
                    offered.append(len(chunk))
        except OSError:
            continue  # cut off by the server: come back


def _hold_idle(port: int, count: int, reopened: list[float], stop: threading.Event) -> None:
    """Keep `count` silent connections and DRIBBLERS dribbling ones open, re-opening each one the server closes."""
    import selectors

    selector = selectors.DefaultSelector()

    def open_one(dribble: bool) -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        if dribble:  # a valid head that never ends: a header value that grows by one byte every half second
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: bench\r\nx-slow: ")
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, (dribble, time.monotonic()))

    for _ in range(count):
        open_one(False)
    for _ in range(DRIBBLERS):
        open_one(True)
    last_dribble = time.monotonic()
    while not stop.is_set():
        for key, _ in selector.select(timeout=0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(1)
            except OSError:
                data = b""
            if not data:
                selector.unregister(sock)
                sock.close()
                dribble, opened_at = key.data
                reopened.append(time.monotonic() - opened_at)  # how long the server let it live
                open_one(dribble)
        if time.monotonic() - last_dribble >= 0.5:
            last_dribble = time.monotonic()
            for key in list(selector.get_map().values()):
                if key.data[0]:
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    with contextlib.suppress(OSError):
                        sock.send(b"a")
    for key in list(selector.get_map().values()):
        sock = key.fileobj
        assert isinstance(sock, socket.socket)
        sock.close()


async def _time_decisions(base_url: str, gate_ids: list[str], digests: dict[str, str], phase: Phase) -> None:
    for gate_id in gate_ids:
        path, body, headers = callbacks_bench.signed_decision(gate_id, digests[gate_id])
        started = time.perf_counter()
        try:
            async with httpx.AsyncClient(base_url=base_url, timeout=10, trust_env=False) as http:
                response = await http.post(path, content=body, headers=headers)
            elapsed_ms = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                phase.failures.append(f"{gate_id}: {response.status_code} {response.text[:80]}")
            else:
                phase.latencies_ms.append(elapsed_ms)
            started = time.perf_counter()
            async with httpx.AsyncClient(base_url=base_url, timeout=10, trust_env=False) as http:
                health = await http.get("/healthz")
            if health.status_code == 200:
                phase.health_ms.append((time.perf_counter() - started) * 1000)
            else:
                phase.failures.append(f"healthz: {health.status_code}")
        except httpx.HTTPError as error:
            phase.failures.append(f"{gate_id}: {type(error).__name__}: {error}")
        await asyncio.sleep(PAUSE_BETWEEN_DECISIONS_S)


def _print_phase(phase: Phase, baseline: Phase | None) -> None:
    p50, p99 = phase.pct(phase.latencies_ms, 50), phase.pct(phase.latencies_ms, 99)
    top = max(phase.latencies_ms, default=math.nan)
    h50 = phase.pct(phase.health_ms, 50)
    line = (
        f"{phase.name:<9} decisions {len(phase.latencies_ms):>4}  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms"
        f"  max {top:7.1f} ms  healthz p50 {h50:6.1f} ms  failures {len(phase.failures)}"
    )
    if baseline is not None and baseline.latencies_ms:
        b50, b99 = baseline.pct(baseline.latencies_ms, 50), baseline.pct(baseline.latencies_ms, 99)
        line += f"  ratio p50 {p50 / b50:.2f} p99 {p99 / b99:.2f}"
    print(line)
    if phase.attack:
        print(f"          {phase.attack}")
    for failure in phase.failures[:5]:
        print(f"          failure: {failure}")


def _unbounded_command(port: int, workers: int, profile_out: Path | None) -> list[str]:
    """uvicorn's own protocol and `limit_concurrency`, as `countersign serve` ran before ADR 0023."""
    factory = ["-m", "uvicorn", "bench_callbacks:app_factory", "--factory", "--app-dir", str(BENCH_DIR)]
    return [sys.executable, *factory, "--host", "127.0.0.1", "--port", str(port), "--limit-concurrency", "200"]


async def prepare_gates(database: Database, books_dir: Path, gate_sets: dict[str, int]) -> dict[str, list[str]]:
    """Principals, books, one close, and open gates on one of its real tasks (attempts 1..N), tier high, quorum 1,
    approver role controller."""
    return await prepare_open_gates(
        database,
        books_dir,
        gate_sets,
        people=callbacks_bench.SCRIPTED,
        registered=callbacks_bench.PEOPLE,
        task=GATED_TASK,
        tier="high",
        rule="bench",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--decisions", type=int, default=100, help="decisions timed per phase")
    parser.add_argument("--idle", type=int, default=500, help="silent connections held in the idle phase")
    parser.add_argument("--head-gib", type=float, default=1.0, help="GiB of request heads offered in the heads phase")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no time or RSS verdict (make test runs this)")
    parser.add_argument(
        "--unbounded",
        action="store_true",
        help="serve the same app with plain uvicorn and limit_concurrency=200 (before ADR 0023), for comparison",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.decisions, args.idle, args.head_gib = SMOKE_DECISIONS, SMOKE_IDLE, SMOKE_HEAD_GIB
    if args.decisions <= WARMUP_DECISIONS:
        parser.error(f"--decisions must be more than {WARMUP_DECISIONS} (the first {WARMUP_DECISIONS} warm up)")
    if args.unbounded:
        callbacks_bench.server_command = _unbounded_command
    print(callbacks_bench.describe_machine())
    n = args.decisions
    gate_sets = {"baseline": n, "heads": n, "idle": n}
    problems: list[str] = []
    database: Database | None = None
    server: callbacks_bench.Server | None = None
    with tempfile.TemporaryDirectory(prefix="countersign-bench-doors-") as tmp:
        root = Path(tmp)
        try:
            database = start_embedded(root / "pgdata", cleanup_mode="delete")
            migrate.upgrade(database)
            books = root / "books"
            generate_books(
                load_profile(callbacks_bench.REPO_ROOT / "config" / "profiles" / "default.yaml"),
                callbacks_bench.SEED,
                books,
            )
            gates = asyncio.run(prepare_gates(database, books, gate_sets))
            digests = asyncio.run(summary_digests(database, [g for ids in gates.values() for g in ids]))
            server = callbacks_bench.start_server(database, root / "state", 1, None)
            port = int(server.base_url.rsplit(":", 1)[1])
            served = (
                "uvicorn, limit_concurrency=200 (unbounded)" if args.unbounded else "countersign serve (default bounds)"
            )
            print(f"server: {served}, {server.base_url}")
            warm = Phase("warm-up")
            asyncio.run(_time_decisions(server.base_url, gates["baseline"][:WARMUP_DECISIONS], digests, warm))
            rss_before = psutil.Process(server.process.pid).memory_info().rss
            sampler = RssPeak(server.process.pid)

            baseline = Phase("baseline")
            asyncio.run(_time_decisions(server.base_url, gates["baseline"][WARMUP_DECISIONS:], digests, baseline))

            heads = Phase("heads")
            offered: list[int] = []
            stop = threading.Event()
            budget = int(args.head_gib * GIB)
            threads = [
                threading.Thread(target=_endless_heads, args=(port, offered, budget, stop), daemon=True)
                for _ in range(HEAD_THREADS)
            ]
            started = time.monotonic()
            for thread in threads:
                thread.start()
            asyncio.run(_time_decisions(server.base_url, gates["heads"], digests, heads))
            while sum(offered) < budget and time.monotonic() - started < 120:
                time.sleep(0.1)  # let the attackers offer their whole budget even if the decisions finished first
            stop.set()
            for thread in threads:
                thread.join()
            heads.attack = (
                f"{HEAD_THREADS} attackers wrote {sum(offered) / GIB:.2f} GiB of heads in"
                f" {time.monotonic() - started:.1f} s (each cut off at 32 KiB + socket buffers, then reconnecting)"
            )

            idle = Phase("idle")
            reopened: list[float] = []
            stop = threading.Event()
            holder = threading.Thread(target=_hold_idle, args=(port, args.idle, reopened, stop), daemon=True)
            holder.start()
            time.sleep(1.0)  # all connections open before the first decision
            started = time.monotonic()
            asyncio.run(_time_decisions(server.base_url, gates["idle"], digests, idle))
            stop.set()
            holder.join()
            idle.attack = (
                f"{args.idle} silent + {DRIBBLERS} dribbling connections held for {time.monotonic() - started:.1f} s;"
                f" the server closed {len(reopened)} of them (each re-opened at once) after"
                f" {min(reopened, default=math.nan):.1f}-{max(reopened, default=math.nan):.1f} s"
            )
            peak = sampler.stop()
            rss_after = psutil.Process(server.process.pid).memory_info().rss

            for phase in (baseline, heads, idle):
                _print_phase(phase, None if phase is baseline else baseline)
                if phase.failures:
                    problems.append(f"{phase.name}: {len(phase.failures)} failures")
                slow = [ms for ms in phase.latencies_ms if ms >= DECISION_BUDGET_S * 1000]
                if slow and not args.smoke:
                    problems.append(f"{phase.name}: {len(slow)} decisions took >= {DECISION_BUDGET_S} s")
            growth = max(peak, rss_after) - rss_before
            print(
                f"server rss: before {rss_before / 1e6:.1f} MB, peak {peak / 1e6:.1f} MB,"
                f" after {rss_after / 1e6:.1f} MB (growth {growth / 1e6:.1f} MB)"
            )
            if growth >= RSS_BUDGET_BYTES and not args.smoke:
                problems.append(f"rss grew {growth / 1e6:.1f} MB")
            with psycopg.connect(database.url) as conn:
                row = conn.execute("SELECT count(*) FROM gate_decision").fetchone()
            recorded = int(row[0]) if row else 0
            print(f"decisions recorded: {recorded} of {3 * n}")
            if args.smoke:
                print("smoke run: tiny sizes, time and RSS not judged")
            if recorded != 3 * n:
                problems.append(f"{recorded} decisions recorded, {3 * n} sent")
        except (callbacks_bench.BenchFailed, KeyboardInterrupt) as exc:
            problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            if server is not None:
                print(f"server stopped (exit code {server.stop()})")
            if database is not None and database.embedded_server is not None:
                database.embedded_server.cleanup()
    return exit_code(problems)


if __name__ == "__main__":
    sys.exit(main())
