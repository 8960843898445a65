"""SQL belongs to the store (and the migrations): a ratchet while the rest moves there (issue 34, LIMITATIONS.md).

The modules listed in `_NOT_YET_MOVED` still write their own SQL. The list only shrinks: a module outside the store
and the migrations that starts writing SQL fails here, and so does a listed module that no longer needs its entry.
"""

from __future__ import annotations

import re
from pathlib import Path

import countersign

_PACKAGE = Path(countersign.__file__).parent
_SQL = re.compile(r"\b(SELECT\s.+\sFROM\b|SELECT [a-z_]+\(|INSERT INTO\b|UPDATE [a-z_.]+ SET\b|DELETE FROM\b)")
_ALLOWED_ROOMS = {"store", "migrations"}

# Debt, not design. `bootstrap/migrate.py` runs the migrations and seeds policy; it stays with them.
_NOT_YET_MOVED = frozenset(
    {
        "audit/trace.py",
        "audit/transparency_log.py",
        "bootstrap/migrate.py",
    }
)


def writes_sql(source: str) -> bool:
    """Whether a module's source holds an SQL statement (a query, an insert, an update or a delete)."""
    return any(_SQL.search(line) for line in source.splitlines()) or bool(
        re.search(r"\bSELECT\b[^\"']*\n[^\"']*\bFROM\b", source)
    )


def modules_writing_sql() -> set[str]:
    found = set()
    for path in _PACKAGE.rglob("*.py"):
        relative = path.relative_to(_PACKAGE)
        if relative.parts[0] in _ALLOWED_ROOMS:
            continue
        if writes_sql(path.read_text(encoding="utf-8")):
            found.add(relative.as_posix())
    return found


def test_no_module_outside_the_store_starts_writing_sql() -> None:
    new = modules_writing_sql() - _NOT_YET_MOVED
    assert not new, f"SQL outside countersign.store and the migrations: {sorted(new)}; put it in a store module"


def test_the_debt_list_only_names_modules_that_still_write_sql() -> None:
    moved = _NOT_YET_MOVED - modules_writing_sql()
    assert not moved, f"these modules no longer write SQL: remove them from _NOT_YET_MOVED: {sorted(moved)}"


def test_the_detector_sees_sql_and_leaves_prose_alone() -> None:
    assert writes_sql('await cur.execute("SELECT gate_id FROM gate WHERE close_id = %s", (close_id,))')
    assert writes_sql('"""\n    SELECT g.gate_id\n      FROM gate g\n"""')
    assert writes_sql('"UPDATE close_task SET status = %s"')
    assert writes_sql("'INSERT INTO trace_event (seq) VALUES (1)'")
    assert writes_sql('await cur.execute("SELECT pg_advisory_lock(%s)", (key,))')
    assert not writes_sql('"""Select the gates a person may decide, from the board."""')
    assert not writes_sql("# the update of a task is the supervisor's")
