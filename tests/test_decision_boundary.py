"""The decision boundary in four layers. Each test here fails when its layer alone is removed.

1. Runtime: `callbacks` refuses machines and the rest (tests/web/test_signed_callback.py,
   tests/callbacks/test_refusals.py).
2. Static: the import-linter layers contract puts `engine` beside `callbacks` (neither imports the other) and
   below the doors.
3. Database: the engine's role cannot write decisions; the callbacks role can only insert them.
4. Single writer: no module but `countersign/store/decisions.py` writes the decisions table, and only
   `countersign.callbacks` (the decision writer) imports that module.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import psycopg
import pytest

from countersign.bootstrap.database import CALLBACKS_ROLE, ENGINE_ROLE, Database
from countersign.bootstrap.settings import PROJECT_ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# --- layer 2: static ----------------------------------------------------------------------------------------


def layers() -> list[set[str]]:
    """The layers contract's rooms, top floor first, each line's independent rooms as one set."""
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    assert contract["containers"] == ["countersign"] and contract.get("exhaustive") is True
    return [{room.strip() for room in line.split("|")} for line in contract["layers"]]


def floor_of(room: str) -> int:
    return next(index for index, line in enumerate(layers()) if room in line)


def test_the_layers_put_the_engine_apart_from_the_decision_writer_and_below_the_doors() -> None:
    # Rooms on one line are independent: neither imports the other, directly or through a third room.
    assert floor_of("engine") == floor_of("callbacks")
    for door in ("bot", "web", "board", "services", "bootstrap", "cli"):
        assert floor_of(door) < floor_of("engine"), door


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_repository_keeps_the_import_contracts() -> None:
    done = lint_imports(PROJECT_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def throwaway_copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(PROJECT_ROOT / "countersign", root / "countersign", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.mark.parametrize(
    "violation",
    ["import countersign.callbacks.decision_writer\n", "from countersign.bot import *  # noqa: F403\n"],
)
def test_negative_control_a_package_that_breaks_the_contract_fails_the_check(tmp_path: Path, violation: str) -> None:
    root = throwaway_copy(tmp_path)
    (root / "countersign" / "engine" / "shortcut.py").write_text(violation)
    done = lint_imports(root)
    assert done.returncode != 0
    assert "one layer model: each room imports only the rooms below it BROKEN" in done.stdout
    assert "countersign.engine.shortcut" in done.stdout


def test_negative_control_a_room_that_reaches_for_the_decisions_store_fails_the_check(tmp_path: Path) -> None:
    root = throwaway_copy(tmp_path)
    (root / "countersign" / "services" / "shortcut.py").write_text("import countersign.store.decisions\n")
    done = lint_imports(root)
    assert done.returncode != 0
    assert "countersign.services.shortcut -> countersign.store.decisions" in done.stdout, done.stdout
    assert (
        "one layer model: each room imports only the rooms below it KEPT" in done.stdout
    )  # services may reach the store


def test_an_indirect_path_to_callbacks_also_breaks_the_contract(tmp_path: Path) -> None:
    root = throwaway_copy(tmp_path)
    (root / "countersign" / "specialists" / "leak.py").write_text("import countersign.callbacks.decision_writer\n")
    (root / "countersign" / "engine" / "via_specialists.py").write_text("import countersign.specialists.leak\n")
    done = lint_imports(root)
    assert done.returncode != 0 and "one layer model: each room imports only the rooms below it BROKEN" in done.stdout
    # No room sits between the engine and the decision writer (they share a floor), so any path from one to the other
    # passes an upward import, and the contract names that link.
    assert "countersign.specialists.leak -> countersign.callbacks.decision_writer" in done.stdout, done.stdout


def doors_contract() -> dict[str, Any]:
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    contract: dict[str, Any] = next(c for c in config["tool"]["importlinter"]["contracts"] if c.get("id") == "doors")
    return contract


def test_the_doors_contract_forbids_every_room_below_services_with_no_exception() -> None:
    contract = doors_contract()
    assert contract["type"] == "forbidden"
    doors = {"countersign.bot", "countersign.web", "countersign.board", "countersign.cli"}
    assert set(contract["source_modules"]) == doors
    below = {"countersign.engine", "countersign.store", "countersign.callbacks", "countersign.specialists"}
    assert set(contract["forbidden_modules"]) == below
    assert not contract.get("ignore_imports"), "the doors contract lists exceptions again"


def test_negative_control_a_door_that_reaches_below_services_fails_the_check(tmp_path: Path) -> None:
    """The four direct imports the chat door made before they went through `countersign.services.chat_reads`, put
    back: the doors contract names each of them (the layers contract alone allows them: bot sits above the store)."""
    root = throwaway_copy(tmp_path)
    (root / "countersign" / "bot" / "shortcut.py").write_text(
        "from countersign.callbacks.principals import Principal, resolve_identity  # noqa: F401\n"
        "from countersign.store.gates import GateRecord, read_gate  # noqa: F401\n"
    )
    done = lint_imports(root)
    assert done.returncode != 0
    assert "only through services BROKEN" in done.stdout, done.stdout
    assert "countersign.bot.shortcut -> countersign.callbacks.principals" in done.stdout, done.stdout
    assert "countersign.bot.shortcut -> countersign.store.gates" in done.stdout, done.stdout
    assert "one layer model: each room imports only the rooms below it KEPT" in done.stdout


# --- layer 3: database ---------------------------------------------------------------------------------------


def _as(database: Database, role: str) -> psycopg.Connection[Any]:
    return psycopg.connect(database.url_for(role), autocommit=True)


WRITES = [
    "INSERT INTO gate_decision (gate_id, principal_id, decision, reason, nonce, request_digest, channel)"
    " VALUES (gen_random_uuid(), 'alice.chen', 'approve', 'r', 'n', 'd', 'sql')",
    "UPDATE gate_decision SET decision = 'approve'",
    "DELETE FROM gate_decision",
    "TRUNCATE gate_decision",
]


@pytest.mark.parametrize("statement", WRITES)
def test_the_engine_role_cannot_write_decisions(database: Database, statement: str) -> None:
    with _as(database, "engine") as conn:
        assert conn.execute("SELECT current_user").fetchone() == (ENGINE_ROLE,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute(statement)


@pytest.mark.parametrize("statement", WRITES[1:])
def test_the_callbacks_role_may_only_insert_decisions(database: Database, statement: str) -> None:
    with _as(database, "callbacks") as conn:
        assert conn.execute("SELECT current_user").fetchone() == (CALLBACKS_ROLE,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute(statement)


def test_decision_privileges_are_exactly_as_designed(database: Database) -> None:
    with _as(database, "owner") as conn:
        rows = conn.execute(
            "SELECT grantee, privilege_type FROM information_schema.role_table_grants"
            " WHERE table_name = 'gate_decision' AND grantee IN (%s, %s) ORDER BY 1, 2",
            (ENGINE_ROLE, CALLBACKS_ROLE),
        ).fetchall()
    assert rows == [(CALLBACKS_ROLE, "INSERT"), (CALLBACKS_ROLE, "SELECT"), (ENGINE_ROLE, "SELECT")]


@pytest.mark.parametrize("role", ["engine", "callbacks"])
def test_application_roles_cannot_disable_the_triggers_that_guard_the_records(database: Database, role: str) -> None:
    with _as(database, role) as conn:
        for table in ("trace_event", "gate_decision", "journal"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
                conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")


def test_the_runtime_connects_the_engine_and_callbacks_as_their_roles(runtime: Any) -> None:
    for role, expected in (("engine", ENGINE_ROLE), ("callbacks", CALLBACKS_ROLE)):
        with psycopg.connect(runtime.database.url_for(role)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (expected,)


# --- layer 4: single writer ----------------------------------------------------------------------------------

WRITE_PATTERN = re.compile(
    r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|TRUNCATE(\s+TABLE)?|COPY|MERGE\s+INTO)\s+(ONLY\s+)?[\"']?(public\.)?gate_decision\b",
    re.IGNORECASE,
)
IDENTIFIER_PATTERN = re.compile(r"Identifier\(\s*[\"']gate_decision[\"']")


def decision_writers(root: Path) -> list[str]:
    """Every module under `root` whose text writes the decisions table, as `path:line`."""
    found = []
    for path in sorted((root / "countersign").rglob("*.py")):
        if "migrations" in path.parts:
            continue  # the schema itself: its functions are the database's rules, not a second writer
        text = path.read_text(encoding="utf-8")
        flat = re.sub(r"\"\s*\n\s*\"", "", text)  # join implicitly concatenated string literals
        for pattern in (WRITE_PATTERN, IDENTIFIER_PATTERN):
            for match in pattern.finditer(flat):
                line = flat.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(root)}:{line}")
    return found


THE_WRITER = "countersign/store/decisions.py"  # its statements; countersign.callbacks alone imports it


def test_only_the_decisions_store_writes_the_decisions_table() -> None:
    writers = decision_writers(PROJECT_ROOT)
    assert writers, f"the scanner found no writer at all: {THE_WRITER} must be found, or the scan is broken"
    outside = [w for w in writers if not w.startswith(f"{THE_WRITER}:")]
    assert outside == []


@pytest.mark.parametrize(
    "smuggled",
    [
        'SQL = "INSERT INTO gate_decision (gate_id) VALUES (%s)"\n',
        'SQL = ("UPDATE "\n       "gate_decision SET decision = %s")\n',
        "from psycopg import sql\nQ = sql.SQL('DELETE FROM {}').format(sql.Identifier('gate_decision'))\n",
        'SQL = "copy public.gate_decision from stdin"\n',
    ],
)
def test_negative_control_a_second_writer_is_found(tmp_path: Path, smuggled: str) -> None:
    root = throwaway_copy(tmp_path)
    (root / "countersign" / "engine" / "smuggler.py").write_text(smuggled)
    outside = [w for w in decision_writers(root) if not w.startswith(f"{THE_WRITER}:")]
    assert outside and outside[0].startswith("countersign/engine/smuggler.py")
