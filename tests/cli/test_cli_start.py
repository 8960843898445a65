"""`countersign --help`, and the start of every command, import no heavy module (issue 24, "a CLI that starts at once").

One fresh process imports each cli module in turn, then asks every group and every command for `--help` through the
real app (the root callback included, so the settings load as they do for any command). Each module that appears is
charged to the first step that imported it; a heavy one fails the test naming the module and the step. CPU time is
measured by bench/bench_cli_start.py, never here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Third-party packages a command may need but its start must not pay for (each cost tens to hundreds of ms at
# `countersign --help` before issue 24), and our own packages that pull them in. The settings (pydantic), typer and
# rich are the start-up's own cost.
HEAVY_THIRD_PARTY = (
    "a2a",
    "alembic",
    "cryptography",
    "fastapi",
    "httpx",
    "jwt",
    "lxml",
    "numpy",
    "ofxtools",
    "openpyxl",
    "opentelemetry",
    "pgserver",
    "psycopg",
    "psycopg_pool",
    "sqlalchemy",
    "starlette",
    "uvicorn",
    "webauthn",
    "wordllama",
    "xmlschema",
)
HEAVY_OURS = (
    "countersign.audit",
    "countersign.bootstrap.app",
    "countersign.bootstrap.migrate",
    "countersign.bootstrap.runtime",
    "countersign.bot",
    "countersign.callbacks",
    "countersign.certificates",
    "countersign.engine",
    "countersign.evals",
    "countersign.importers",
    "countersign.llm",
    "countersign.retrieval",
    "countersign.scenarios",
    "countersign.services",
    "countersign.specialists",
    "countersign.synthetic",
    "countersign.web",
)

# Runs in the child: import the cli modules one by one, then `--help` everywhere; prints one JSON object per step.
DRIVER = r"""
import contextlib, importlib, io, json, pkgutil, sys

from countersign import cli

def step(label, action):
    before = set(sys.modules)
    out, code = io.StringIO(), None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = action()
        except SystemExit as exc:
            code = exc.code
    print(json.dumps({"step": label, "new": sorted(set(sys.modules) - before), "code": code,
                      "help": "Usage:" in out.getvalue()}), flush=True)

names = sorted(m.name for m in pkgutil.iter_modules(cli.__path__))
for name in ["common", *[n for n in names if n not in ("common", "main")], "main"]:
    step(f"import countersign.cli.{name}", lambda name=name: importlib.import_module(f"countersign.cli.{name}") and 0)

import typer.main
from countersign.cli.main import app

def paths(command, prefix):
    yield prefix
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from paths(sub, [*prefix, name])

for args in paths(typer.main.get_command(app), []):
    argv = [*args, "--help"]
    step("countersign " + " ".join(argv), lambda argv=argv: app(argv, prog_name="countersign", standalone_mode=False))
"""


def _is_heavy(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in (*HEAVY_THIRD_PARTY, *HEAVY_OURS))


def start_steps(tmp_path: Path) -> list[dict[str, Any]]:
    env = {**os.environ, "COUNTERSIGN_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def heavy_imports(steps: list[dict[str, Any]]) -> list[str]:
    """One line per step that imported a heavy module: the step, then the heavy modules it brought (roots first)."""
    lines = []
    for step in steps:
        heavy = [module for module in step["new"] if _is_heavy(module)]
        if heavy:
            roots = sorted({module for module in heavy if "." not in module or module.rpartition(".")[0] not in heavy})
            lines.append(f"`{step['step']}` imported {', '.join(roots[:8])}" + (" ..." if len(roots) > 8 else ""))
    return lines


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return start_steps(tmp_path_factory.mktemp("cli-start"))


def test_help_and_every_commands_start_import_no_heavy_module(steps: list[dict[str, Any]]) -> None:
    problems = heavy_imports(steps)
    assert not problems, "heavy modules at start (import them inside the command that uses them):\n" + "\n".join(
        problems
    )


def test_every_group_and_command_answered_its_help(steps: list[dict[str, Any]]) -> None:
    """The walk reached the commands (a settings error or a broken import would skip their help unnoticed)."""
    helps = [step for step in steps if step["step"].startswith("countersign ")]
    commands = {step["step"] for step in helps}
    assert {
        "countersign --help",
        "countersign close advance --help",
        "countersign books import --help",
        "countersign eval retrieval --help",
        "countersign trace verify --help",
        "countersign drill restart --help",
        "countersign synth --help",
        "countersign demo --help",
        "countersign serve --help",
    } <= commands
    assert len(helps) >= 40
    not_answered = [step["step"] for step in helps if step["code"] not in (0, None) or not step["help"]]
    assert not not_answered, not_answered


def test_the_guard_names_a_heavy_import_and_the_step_that_made_it() -> None:
    """Negative control: the check itself flags a step that pulled in fastapi, naming both."""
    steps = [
        {"step": "import countersign.cli.common", "new": ["rich", "typer"], "code": 0, "help": False},
        {"step": "countersign serve --help", "new": ["fastapi", "fastapi.routing", "starlette"], "code": 0, "help": 1},
    ]
    assert heavy_imports(steps) == ["`countersign serve --help` imported fastapi, starlette"]


def test_the_start_benchmark_runs_in_its_smoke_mode(tmp_path: Path) -> None:
    """bench/bench_cli_start.py at one run of two commands, so it cannot rot; nothing is timed here."""
    env = {**os.environ, "COUNTERSIGN_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_cli_start.py"), "--smoke"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| `python -c pass` |" in done.stdout and "| `countersign --help` |" in done.stdout
    assert "ratio to `python -c pass`" in done.stdout


def test_help_needs_no_configuration_but_the_command_still_refuses_it() -> None:
    """`--help` skips loading the settings (a third of the start): it answers even with a wrong variable, which the
    command itself still refuses in one line; `--` makes a later `--help` an argument, not a request for help."""
    from typer.testing import CliRunner

    from countersign.cli.main import app

    bad = {"TEAMS_APP_TYPE": "Single", "COLUMNS": "200"}
    helped = CliRunner().invoke(app, ["close", "status", "--help"], env=bad)
    assert helped.exit_code == 0 and "Usage:" in helped.output, helped.output
    refused = CliRunner().invoke(app, ["close", "status"], env=bad)
    assert refused.exit_code == 2 and refused.output.startswith("error: TEAMS_APP_TYPE:"), refused.output
    quoted = CliRunner().invoke(app, ["close", "status", "--", "--help"], env=bad)
    assert quoted.exit_code == 2 and quoted.output.startswith("error: TEAMS_APP_TYPE:"), quoted.output
