"""What the database benchmarks share: open controller gates on a fresh close, and the same ending for every run.

Imported by the benchmark scripts from this directory (each puts it on `sys.path`, as running a script does).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from pathlib import Path

import psycopg

from countersign.audit.person_proof import digest_of_gate
from countersign.bootstrap.database import Database
from countersign.bootstrap.runtime import load_rules
from countersign.bootstrap.settings import load_settings
from countersign.callbacks.principals import Principal, upsert_principals
from countersign.engine.books import load_books
from countersign.engine.runs import start_close
from countersign.scenarios.scripted_people import ScriptedPeople
from countersign.store.gates import read_gate_facts


async def prepare_open_gates(
    database: Database,
    books_dir: Path,
    gate_sets: dict[str, int],
    *,
    people: ScriptedPeople,
    registered: list[Principal],
    task: str,
    tier: str,
    rule: str | None = None,
    analyze: bool = False,
) -> dict[str, list[str]]:
    """Principals, books, one close, and `count` open controller gates (quorum 1) per gate set on one real task of
    the close (the database admits gates only for tasks its policy names: migration 0015), a fresh attempt per gate
    so each is its own (close, task, attempt). The rule is `rule`, or `bench <gate set>`. Returns gate ids."""
    policy, checklist = load_rules(load_settings())
    async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as conn:
        await upsert_principals(conn, people.registered(registered))
        loaded = await load_books(conn, books_dir, loaded_by="bench")
        close_id = await start_close(
            conn,
            entity=loaded.entity,
            period=loaded.period,
            book_set_id=loaded.book_set_id,
            policy=policy,
            workflow=checklist,
            started_by="bench",
        )
        gates: dict[str, list[str]] = {}
        attempts = 0
        for prefix, count in gate_sets.items():
            ids = [str(uuid.uuid4()) for _ in range(count)]
            numbers = list(range(attempts + 1, attempts + count + 1))
            attempts += count
            await conn.execute(
                "INSERT INTO gate (gate_id, close_id, task, attempt, kind, tier, quorum, approver_role, rule, summary,"
                " prepared_by, requested_by, due_at, expires_at)"
                " SELECT g, %s, %s, n, 'approval', %s, 1, 'controller', %s, '{}'::jsonb,"
                " 'reconciliation-agent', '{}', now() + interval '1 day', now() + interval '2 days'"
                " FROM unnest(%s::uuid[], %s::int[]) AS x(g, n)",
                (close_id, task, tier, rule if rule is not None else f"bench {prefix}", ids, numbers),
            )
            gates[prefix] = ids
        if analyze:
            await conn.execute("ANALYZE")
    return gates


async def summary_digests(database: Database, gate_ids: Iterable[str]) -> dict[str, str]:
    """Each gate's summary digest, the SHA-256 its approver signs over, read once per gate before any load runs."""
    digests: dict[str, str] = {}
    async with await psycopg.AsyncConnection.connect(database.url, autocommit=True) as conn:
        for gate_id in gate_ids:
            facts = await read_gate_facts(conn, gate_id)
            assert facts is not None, gate_id
            digests[gate_id] = digest_of_gate(facts.digest_fields(), facts.summary_json)
    return digests


def stop_embedded(database: Database | None) -> None:
    if database is not None and database.embedded_server is not None:
        database.embedded_server.cleanup()
        print("embedded postgres stopped and deleted")


def growth_exponent(n1: float, t1: float, n2: float, t2: float) -> float:
    """How cost grows with size between two runs: log(t2 / t1) / log(n2 / n1) (1.0 is linear); nan when undefined."""
    if n1 <= 0 or n2 <= 0 or n1 == n2 or t1 <= 0 or t2 <= 0:
        return math.nan
    return math.log(t2 / t1) / math.log(n2 / n1)


def exit_code(problems: list[str]) -> int:
    """Each problem printed as a FAIL line; 1 when there was any."""
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if problems else 0
