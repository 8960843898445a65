"""The engine and the services write no SQL, with no exception: their statements are the store's (issue 34).

Stricter than the ratchet in tests/store/test_sql_lives_in_the_store.py (which allows a shrinking debt list over the
whole package): no module under `countersign/engine/` or `countersign/services/` holds a statement, opens a cursor,
calls `.execute(` / `.executemany(` / `.copy(` on anything, or imports psycopg's row factories or SQL composition.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import countersign
from tests.store.test_sql_lives_in_the_store import writes_sql

_PACKAGE = Path(countersign.__file__).parent
ROOMS = ("engine", "services")
RUNS_A_STATEMENT = {"execute", "executemany", "copy", "cursor"}
SQL_TOOLS = ("psycopg.rows", "psycopg.sql")
# A call of a database function, schema-qualified or not (`SELECT public.countersign_enqueue_job(`), and a lock.
_CALLS_A_FUNCTION = re.compile(r"\bSELECT\s+[a-z_]+(\.[a-z_]+)?\s*\(|\bpg_(advisory|notify|try_advisory)")


def modules_of(room: str) -> list[Path]:
    return sorted((_PACKAGE / room).rglob("*.py"))


def sql_in(source: str) -> list[str]:
    """What in one module's source runs or holds SQL: statements, statement calls, psycopg's SQL tools."""
    found: list[str] = []
    if writes_sql(source) or _CALLS_A_FUNCTION.search(source):
        found.append("an SQL statement")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RUNS_A_STATEMENT:
            found.append(f".{node.func.attr}( on line {node.lineno}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            found.extend(f"import of {name}" for name in imported if name in SQL_TOOLS)
        elif isinstance(node, ast.Import):
            found.extend(f"import of {alias.name}" for alias in node.names if alias.name in SQL_TOOLS)
    return found


@pytest.mark.parametrize("room", ROOMS)
def test_the_room_writes_no_sql(room: str) -> None:
    modules = modules_of(room)
    assert len(modules) > 10  # the room is really scanned
    offenders = {
        path.relative_to(_PACKAGE).as_posix(): found
        for path in modules
        if (found := sql_in(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, f"SQL in countersign/{room}/: {offenders}; put it in a countersign.store module"


@pytest.mark.parametrize(
    "smuggled",
    [
        'await cur.execute("SELECT result FROM public.close_task WHERE close_id = %s", (close_id,))',
        'QUERY = "SELECT g.gate_id FROM public.gate g"',
        'await conn.execute("SELECT pg_advisory_lock(%s, %s)", (1, 2))',
        'STATEMENT = "SELECT public.countersign_recover_stalled_jobs()"',
        "async with conn.cursor() as cur:\n    pass",
        "from psycopg.rows import class_row",
        "from psycopg import sql",
    ],
)
def test_negative_control_sql_smuggled_back_is_found(smuggled: str) -> None:
    """What engine/jobs.py and services/board_reads.py held before their statements moved is each caught."""
    assert sql_in(f"async def f(conn, cur, close_id):\n    {smuggled.replace(chr(10), chr(10) + '    ')}\n")


def test_the_detector_leaves_prose_and_store_calls_alone() -> None:
    clean = (
        '"""Select the gates a person may decide; the job engine\'s statements are countersign.store.jobs."""\n'
        "async def f(conn):\n    return await store.latest_runs(conn, 500)\n"
    )
    assert sql_in(clean) == []
