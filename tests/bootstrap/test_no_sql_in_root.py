"""The composition root composes: no module of `countersign/bootstrap/` holds SQL, except database setup and migrations.

Queries live in the package that owns their tables (ADR 0015). The check reads every string literal of each module
(f-string parts and implicitly joined strings included) and looks for the shape of an SQL statement.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from countersign import bootstrap

ROOT = Path(bootstrap.__file__).parent
# Database setup: creating the embedded server, roles and grants, migrating and checking the schema's revision.
ALLOWED = frozenset({"database.py", "migrate.py"})

SQL_STATEMENT = re.compile(
    r"\bSELECT\b[\s\S]*?(?:\bFROM\b|\(|\d)"
    r"|\bINSERT\s+INTO\b"
    r"|\bUPDATE\s+\w+\s+SET\b"
    r"|\bDELETE\s+FROM\b"
    r"|\b(?:CREATE|ALTER|DROP)\s+(?:TABLE|ROLE|INDEX|VIEW|FUNCTION|TRIGGER|SCHEMA|DATABASE)\b"
    r"|\bGRANT\s+\w+"
    r"|\bTRUNCATE\b"
)


def _literal_text(node: ast.AST) -> str | None:
    """The text of a string literal; an f-string's replacement fields read as one identifier."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else "x"
            for part in node.values
        )
    return None


def sql_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal in `source` that holds an SQL statement, one per line."""
    found: dict[int, str] = {}
    for node in ast.walk(ast.parse(source)):
        text = _literal_text(node)
        if text is not None and SQL_STATEMENT.search(text):
            found.setdefault(getattr(node, "lineno", 0), " ".join(text.split())[:80])
    return sorted(found.items())


def test_the_detector_finds_sql_in_every_form_a_module_writes_it() -> None:
    source = '''
await cur.execute("SELECT count(*) FROM close_run WHERE close_id = %s", (close_id,))
await conn.execute(f"UPDATE {table} SET x = 1")
await cur.execute(f"SELECT {COLUMNS} FROM trace_event" if a else "SELECT 1")
QUERY = """
WITH x AS (SELECT 1)
SELECT * FROM x
"""
JOINED = ("INSERT INTO journal (a)" " VALUES (%s)")
'''
    assert [line for line, _ in sql_literals(source)] == [2, 3, 4, 5, 9]


def test_the_detector_leaves_prose_alone() -> None:
    source = '''
HELP = "Select a close to advance; update the status; delete nothing."
DOC = """Start, advance and inspect closes from the table of runnable work."""
'''
    assert sql_literals(source) == []


def test_no_module_of_the_composition_root_holds_sql() -> None:
    offenders = {
        f"countersign/bootstrap/{path.name}:{line}: {text}"
        for path in sorted(ROOT.glob("*.py"))
        if path.name not in ALLOWED
        for line, text in sql_literals(path.read_text())
    }
    assert not offenders, "SQL in the composition root; move it to the package that owns the table:\n" + "\n".join(
        sorted(offenders)
    )
