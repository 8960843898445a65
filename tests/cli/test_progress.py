"""Progress on long commands (countersign/cli/progress.py): on stderr when it is a terminal, nothing when it is not,
and stdout the
same byte for byte either way."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import countersign.cli.progress
from countersign.cli.main import app
from countersign.cli.progress import counter, spinner


def terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=100), buffer


def not_a_terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=False, width=100), buffer


def test_a_spinner_on_a_terminal_shows_its_phrase_and_the_latest_one() -> None:
    console, shown = terminal()
    with spinner("advancing close C1", on=console) as say:
        say("advancing close C1: bank reconciliation")
    assert "advancing close C1" in shown.getvalue()


def test_a_counter_on_a_terminal_shows_done_of_total() -> None:
    console, shown = terminal()
    with counter("kill points", 3, on=console) as tick:
        tick(2, phrase="kill point card.before_post")
    assert "kill points" in shown.getvalue() and "0/3" in shown.getvalue()


def test_nothing_is_written_when_the_stream_is_not_a_terminal() -> None:
    console, shown = not_a_terminal()
    with spinner("verifying the trace", on=console) as say, counter("closes", 5, on=console) as tick:
        say("still verifying")
        tick(5)
    assert shown.getvalue() == ""


def synth(out: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["synth", "--seed", "7", "--scale", "400", "--out", str(out)], env={"COLUMNS": "200"}
    )
    return result.exit_code, result.stdout, result.stderr


def test_synth_reports_progress_on_a_terminal_stderr_and_leaves_stdout_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNTERSIGN_STATE_DIR", str(tmp_path / "state"))
    code, plain_stdout, plain_stderr = synth(tmp_path / "piped")  # stderr is CliRunner's buffer: not a terminal
    assert code == 0, plain_stderr
    assert plain_stderr == ""

    console, shown = terminal()
    monkeypatch.setattr(countersign.cli.progress, "err", console)
    code, stdout, _stderr = synth(tmp_path / "terminal")
    assert code == 0
    assert "synthesizing GL lines" in shown.getvalue()
    assert stdout.replace("terminal", "piped") == plain_stdout  # only the folder name differs
    assert "synthesizing" not in stdout
