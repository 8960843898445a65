"""SQL belongs to the store (and the migrations): a ratchet while the rest moves there (issue 34, LIMITATIONS.md).

The modules listed in `_NOT_YET_MOVED` still write their own SQL. The list only shrinks: a module outside the store
and the migrations that starts writing SQL fails here, and so does a listed module that no longer needs its entry.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import countersign

_PACKAGE = Path(countersign.__file__).parent
_SQL = re.compile(r"\b(SELECT\s.+\sFROM\b|SELECT [a-z_]+\(|INSERT INTO\b|UPDATE [a-z_.]+ SET\b|DELETE FROM\b)")
# A string that starts with a statement's keyword, as SQL is written here (upper case): `"SELECT 1"`, `"SET LOCAL ..."`.
_STATEMENT = re.compile(
    r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|SET|RESET|LOCK|TRUNCATE|CREATE|ALTER|DROP|COPY|CALL|DO|EXPLAIN|GRANT|REVOKE"
    r"|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|LISTEN|NOTIFY|VACUUM|ANALYZE|DECLARE|FETCH|PREPARE|EXECUTE|DISCARD)\b"
)
_ALLOWED_ROOMS = {"store", "migrations"}

# Debt, not design. `bootstrap/migrate.py` runs the migrations and seeds policy; it stays with them.
_NOT_YET_MOVED = frozenset(
    {
        "bootstrap/migrate.py",
    }
)


def _starts_a_statement(source: str) -> bool:
    """Whether any string literal of `source` (implicit concatenations joined, f-strings by their parts) starts with
    a statement's keyword."""
    try:
        tree = compile(source, "<module>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return False
    return any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) and _STATEMENT.match(node.value)
        for node in ast.walk(tree)
    )


def writes_sql(source: str) -> bool:
    """Whether a module's source holds an SQL statement (a query, an insert, an update, a delete, a lock, a setting)."""
    return (
        any(_SQL.search(line) for line in source.splitlines())
        or bool(re.search(r"\bSELECT\b[^\"']*\n[^\"']*\bFROM\b", source))
        or _starts_a_statement(source)
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
    assert writes_sql('await cur.execute("SELECT 1")')
    assert writes_sql('PROBE = "SELECT 1"')
    assert writes_sql('await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")')
    assert writes_sql('await cur.execute(f"SELECT {COLUMNS} FROM trace_event")')
    assert writes_sql('query = (\n    "SELECT seq,"\n    " hash FROM trace_head"\n)')
    assert not writes_sql('"""Select the gates a person may decide, from the board."""')
    assert not writes_sql("# the update of a task is the supervisor's")
    assert not writes_sql('raise ValueError("Set the period first")')
    assert not writes_sql('"""Delete nothing: the trace is append-only."""')


def test_sql_back_in_the_audit_room_is_seen() -> None:
    """The audit room writes no SQL (its statements are countersign.store.trace's): a statement put back is seen."""
    audit = {name for name in modules_writing_sql() if name.startswith("audit/")}
    assert not audit, f"SQL in the audit room: {sorted(audit)}"
    trace = (_PACKAGE / "audit" / "trace.py").read_text(encoding="utf-8")
    assert not writes_sql(trace)
    assert writes_sql(trace + '\nPROBE = "SELECT 1"\n')
