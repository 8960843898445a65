"""The doors only parse and render: Slack, Teams and the HTTP door (the signed callback, the read routes) decide
through one function, read a close through one function, export through one function, and import nothing that runs
SQL (issue 11, "a service layer the doors share"; issue 20, "thin doors")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import countersign.bot.slack
import countersign.bot.teams
import countersign.cli.trace
import countersign.services.decide
import countersign.services.exports
import countersign.services.reading
import countersign.web.callbacks
import countersign.web.reads

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = {
    "countersign.bot.slack": "countersign/bot/slack.py",
    "countersign.bot.slack_events": "countersign/bot/slack_events.py",
    "countersign.bot.teams": "countersign/bot/teams.py",
    "countersign.bot.answers": "countersign/bot/answers.py",
    "countersign.web.callbacks": "countersign/web/callbacks.py",
    "countersign.web.reads": "countersign/web/reads.py",
    "countersign.web.health": "countersign/web/health.py",
    "countersign.web.errors": "countersign/web/errors.py",
}
CHAT_ADAPTERS = ("countersign.bot.slack", "countersign.bot.teams")
DECIDING_DOORS = ("countersign.bot.slack", "countersign.bot.teams", "countersign.web.callbacks")
CLOSE_READING_DOORS = (
    "countersign.bot.slack",
    "countersign.bot.teams",
    "countersign.web.reads",
)  # and the CLI: see the end of this file

# Database drivers, and every module of ours that runs SQL an adapter could be tempted to call.
DATABASE_CODE = (
    "psycopg",
    "psycopg_pool",
    "asyncpg",
    "sqlalchemy",
    "sqlmodel",
    "countersign.audit.trace",
    "countersign.audit.transparency_log",
    "countersign.bot.queries",
    "countersign.callbacks.callers",
    "countersign.callbacks.decision_writer",
    "countersign.callbacks.principals",
    "countersign.store.board_reads",
    "countersign.store.decisions",
    "countersign.store.dispatch",
    "countersign.store.gates",
    "countersign.store.jobs",
    "countersign.store.outbox",
    "countersign.store.passkeys",
    "countersign.store.runs",
    "countersign.store.trace",
    "countersign.engine.books",
    "countersign.engine.runs",
    "countersign.engine.dispatch",
    "countersign.engine.gates",
    "countersign.engine.jobs",
    "countersign.store.gauges",
    "countersign.store.integrity",
    "countersign.store.construction",
    "countersign.engine.integrity",
    "countersign.engine.outbox",
    "countersign.engine.postings",
    "countersign.engine.supervisor",
    "countersign.engine.workflows.close.inputs",
    "countersign.engine.workflows.close.queries",
)


def _imported_modules(module: str, path: str) -> set[str]:
    """Every module an adapter imports, relative imports resolved, at any depth of the file (TYPE_CHECKING too)."""
    package = module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from bot import queries`
    return found


def _names_imported_from(path: str, module: str, package: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            relative = node.level == 1 and f"{package}.{node.module}" == module
            if node.module == module or relative:
                names.update(alias.name for alias in node.names)
    return names


def _is_denied(imported: str) -> bool:
    return any(imported == denied or imported.startswith(denied + ".") for denied in DATABASE_CODE)


def _source_of(module: str) -> Path | None:
    """The file of a module of ours (`bot.services`), or None for a name that is not one (`bot.services.X`)."""
    base = ROOT / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _runs_sql(module: str) -> bool:
    """Does this module of ours call `.execute(` / `.executemany(` / `.copy(` itself?"""
    source = _source_of(module)
    if source is None:
        return False
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("execute", "executemany", "copy")
        ):
            return True
    return False


def _reaches_the_store(module: str, *, through_services: bool = True) -> bool:
    """Does this module of ours import a store module (its SQL moved there, it still works the database), directly or
    through a service that does (a door's reads go through `countersign.services`)?"""
    source = _source_of(module)
    if source is None:
        return False
    imported = _imported_modules(module, str(source.relative_to(ROOT)))
    if any(name.startswith("countersign.store.") for name in imported):
        return True
    services = {name for name in imported if name.startswith("countersign.services.") and _source_of(name) is not None}
    return through_services and any(_reaches_the_store(name, through_services=False) for name in services)


def test_the_deny_list_names_modules_that_really_run_sql() -> None:
    """A deny list that drifts from the code protects nothing: each of our listed modules must exist and run SQL, or
    call the store that runs it for them."""
    ours = [m for m in DATABASE_CODE if m.startswith("countersign.")]
    assert len(ours) > 10  # the list's own modules are checked, not filtered away
    quiet = [m for m in ours if _source_of(m) is None or not (_runs_sql(m) or _reaches_the_store(m))]
    assert quiet == [], f"listed as database code but run no SQL (or are gone): {quiet}"


def test_negative_control_a_module_that_runs_no_sql_is_caught() -> None:
    assert not _runs_sql("countersign.money") and not _reaches_the_store("countersign.money")
    assert _source_of("countersign.engine.no_such_module") is None


@pytest.mark.parametrize("module", sorted(ADAPTERS))
def test_the_adapter_imports_no_database_code(module: str) -> None:
    imported = _imported_modules(module, ADAPTERS[module])
    denied = sorted(name for name in imported if _is_denied(name))
    assert denied == [], f"{ADAPTERS[module]} imports database code: {denied}"


@pytest.mark.parametrize("module", sorted(ADAPTERS))
def test_nothing_the_adapter_imports_of_ours_runs_sql_itself(module: str) -> None:
    """Beyond the list: no module of ours that the adapter imports directly runs a statement."""
    ours = {name for name in _imported_modules(module, ADAPTERS[module]) if name.startswith("countersign.")}
    assert ours  # the adapter's own imports are really scanned
    running = sorted(name for name in ours if _runs_sql(name))
    assert running == [], f"{ADAPTERS[module]} imports modules that run SQL: {running}"


@pytest.mark.parametrize("module", DECIDING_DOORS)
def test_every_door_imports_the_one_decision_function(module: str) -> None:
    package = module.rpartition(".")[0]
    assert "decide_gate" in _names_imported_from(ADAPTERS[module], "countersign.services.decide", package)


def test_the_three_doors_reach_the_same_decision_function() -> None:
    assert countersign.bot.slack.decide_gate is countersign.services.decide.decide_gate
    assert countersign.bot.teams.decide_gate is countersign.services.decide.decide_gate
    assert countersign.web.callbacks.decide_gate is countersign.services.decide.decide_gate


def test_slack_teams_and_the_cli_export_through_the_same_function() -> None:
    for module in CHAT_ADAPTERS:
        package = module.rpartition(".")[0]
        assert "export_trace" in _names_imported_from(ADAPTERS[module], "countersign.services.exports", package)
    assert countersign.bot.slack.export_trace is countersign.services.exports.export_trace
    assert countersign.bot.teams.export_trace is countersign.services.exports.export_trace
    assert countersign.cli.trace.export_trace is countersign.services.exports.export_trace


def test_slack_and_teams_check_an_export_through_the_same_function() -> None:
    for module in CHAT_ADAPTERS:
        package = module.rpartition(".")[0]
        assert "close_to_export" in _names_imported_from(ADAPTERS[module], "countersign.services.reading", package)
        assert {"export_trace", "close_to_export"} <= _called_names(ADAPTERS[module])
    assert countersign.bot.slack.close_to_export is countersign.services.reading.close_to_export
    assert countersign.bot.teams.close_to_export is countersign.services.reading.close_to_export


@pytest.mark.parametrize("module", CLOSE_READING_DOORS)
def test_every_door_reads_a_close_through_the_one_read_function(module: str) -> None:
    package = module.rpartition(".")[0]
    assert "read_close_status" in _names_imported_from(ADAPTERS[module], "countersign.services.reading", package)
    assert "read_close_status" in _called_names(ADAPTERS[module])


def test_http_slack_and_teams_reach_the_same_read_functions() -> None:
    assert countersign.web.reads.read_close_status is countersign.services.reading.read_close_status
    assert countersign.bot.slack.read_close_status is countersign.services.reading.read_close_status
    assert countersign.bot.teams.read_close_status is countersign.services.reading.read_close_status
    assert countersign.bot.slack.read_payment_runs is countersign.services.reading.read_payment_runs
    assert countersign.bot.teams.read_payment_runs is countersign.services.reading.read_payment_runs


def test_one_authorisation_rule_and_no_door_checks_roles_itself() -> None:
    """`countersign.services.reading.authorize` is the only caller of the role table; a door that called `access_for` or
    `check_access` would be writing the rule a second time."""
    for module, path in ADAPTERS.items():
        assert not _called_names(path) & {"access_for", "check_access", "allowed_roles"}, module
    assert "access_for" in _called_names("countersign/services/reading.py")


def _called_names(path: str) -> set[str]:
    """The names of the functions a file calls (`f(...)` and `x.f(...)`)."""
    called: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                called.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                called.add(node.func.attr)
    return called


def test_every_door_starts_a_close_through_the_one_use_case() -> None:
    """The CLI calls `countersign.services.starting.start_close_on_books`; the server (for Slack's `/close start`)
    calls the
    runtime's `start_close_with_books`, which is that use case under the runtime's rules. No door opens a close or
    picks its books by itself, and the chat adapter only asks its services."""
    assert "start_close_on_books" in _called_names("countersign/cli/close.py")
    assert "start_close_on_books" in _called_names("countersign/bootstrap/runtime.py")
    assert "start_close_with_books" in _called_names("countersign/bootstrap/app.py")
    for door in ("countersign/cli/close.py", "countersign/bootstrap/app.py", "countersign/bootstrap/runtime.py"):
        assert not _called_names(door) & {"start_close", "books_for_close", "load_books"}, door
    for module in CHAT_ADAPTERS:
        assert not _called_names(ADAPTERS[module]) & {"start_close_with_books", "books_for_close", "load_books"}
    assert "start_close" in _called_names(ADAPTERS["countersign.bot.slack"])  # `services.start_close(...)`


# --- the CLI door ------------------------------------------------------------------------------------------------
# The command line is a door too: `countersign close status` and `countersign trace export` call the same services
# as the chat and HTTP doors, as the local operator (`countersign.services.reading.LOCAL_OPERATOR`, no role check).
# The CLI is scanned as files, not imported, so a split of countersign/cli/ into modules changes nothing here.


def _cli_files() -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "countersign" / "cli").rglob("*.py"))


def _cli_imports(module: str) -> set[str]:
    names: set[str] = set()
    for path in _cli_files():
        names |= _names_imported_from(path, module, "cli")
    return names


def _cli_calls() -> set[str]:
    called: set[str] = set()
    for path in _cli_files():
        called |= _called_names(path)
    return called


def test_the_cli_reads_a_close_and_checks_an_export_through_the_same_functions() -> None:
    assert {"read_close_status", "close_to_export", "LOCAL_OPERATOR"} <= _cli_imports("countersign.services.reading")
    assert {"read_close_status", "close_to_export"} <= _cli_calls()
