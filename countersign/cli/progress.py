"""Progress for commands that run longer than a few seconds: on stderr, and only when stderr is a terminal.

stdout is never written here: it keeps the tables, the lines and the JSON that people and scripts read. When stderr
is a pipe or a file (a CI log, `2> file`), nothing is shown at all. Each display is transient: it disappears when the
work ends, leaving the command's own output.

- `spinner("advancing close X")`: one long call; a spinner, the phrase and the elapsed time. The yielded function
  changes the phrase (`say("loading books")`).
- `counter("checking cases", total=40)`: work that iterates; `tick(done, total, phrase)` sets the count (total and
  phrase when they change), and the display shows done/total, a bar once the total is known, and the elapsed time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from countersign.cli.common import console, err

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

Say = Callable[[str], None]


class Tick(Protocol):
    def __call__(self, done: int, total: int | None = None, phrase: str | None = None) -> None: ...


def _progress(*, counting: bool, on: Console | None = None) -> Progress:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    where = on or err
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if counting:
        columns += [BarColumn(), TextColumn("{task.fields[count]}")]
    return Progress(
        *columns,
        TimeElapsedColumn(),
        console=where,
        transient=True,
        disable=not where.is_terminal,  # a pipe or a log gets the command's output alone
        # What the command prints to stdout meanwhile goes above the display only when stdout is a terminal too;
        # otherwise stdout is left alone, byte for byte.
        redirect_stdout=where.is_terminal and console.is_terminal,
        redirect_stderr=False,
    )


@contextmanager
def spinner(phrase: str, *, on: Console | None = None) -> Iterator[Say]:
    """A spinner with `phrase` and the elapsed time while the block runs; yields a function that changes the phrase."""
    from rich.markup import escape

    with _progress(counting=False, on=on) as progress:
        task = progress.add_task(escape(phrase), total=None)

        def say(text: str) -> None:
            progress.update(task, description=escape(text))

        yield say


@contextmanager
def counter(phrase: str, total: int | None = None, *, on: Console | None = None) -> Iterator[Tick]:
    """`phrase`, done/total (a bar once the total is known) and the elapsed time; yields `tick(done, total)`."""
    from rich.markup import escape

    with _progress(counting=True, on=on) as progress:
        task = progress.add_task(escape(phrase), total=total, count=_count(0, total))
        known = [total]

        def tick(done: int, total: int | None = None, phrase: str | None = None) -> None:
            if total is not None:
                known[0] = total
            description = None if phrase is None else escape(phrase)
            progress.update(task, completed=done, total=known[0], description=description, count=_count(done, known[0]))

        yield tick


def _count(done: int, total: int | None) -> str:
    return f"{done:,}" if total is None else f"{done:,}/{total:,}"
