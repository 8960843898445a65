"""`countersign` command line. Parses, calls one service, prints; errors become one clear line and exit 2.

The root command and its groups; each group lives in its own module of this folder. Those modules import typer, rich
and countersign.cli.common at the top and everything else inside the command that uses it, so `countersign --help` and
every
command's start stay cheap (tests/cli/test_cli_start.py names any heavy module imported at start).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from countersign.cli import books, close, database, delegate, drill, outbox, payments, principals, serving, teams, trace
from countersign.cli.common import settings_or_exit
from countersign.cli.demo import demo
from countersign.cli.evals import eval_app
from countersign.cli.synth import synth

ARGS = "countersign.args"


class RootGroup(TyperGroup):
    """The root command; keeps the words it was given (ctx.meta) so its callback can tell a request for help."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: typer's click Context
        ctx.meta[ARGS] = list(args)
        return super().parse_args(ctx, args)


app = typer.Typer(
    help="Countersign: a month-end close with governed agents and human gates.", no_args_is_help=True, cls=RootGroup
)
app.add_typer(close.close_app, name="close")
app.add_typer(books.books_app, name="books")
app.add_typer(eval_app, name="eval")
app.add_typer(database.db_app, name="db")
app.add_typer(trace.trace_app, name="trace")
app.add_typer(principals.principals_app, name="principals")
app.add_typer(serving.specialists_app, name="specialists")
app.add_typer(close.dispatch_app, name="dispatch")
app.add_typer(drill.drill_app, name="drill")
app.add_typer(database.config_app, name="config")
app.add_typer(payments.payments_app, name="payments")
app.add_typer(outbox.outbox_app, name="outbox")
app.add_typer(teams.teams_app, name="teams")
app.add_typer(delegate.delegate_app, name="delegate")
app.command()(synth)
app.command()(serving.serve)
app.command()(serving.worker)
app.command()(demo)


@app.callback()
def validate_settings(ctx: typer.Context) -> None:
    """Countersign: a month-end close with governed agents and human gates."""
    if ctx.invoked_subcommand != "config" and not ctx.resilient_parsing and not asks_for_help(ctx.meta.get(ARGS, [])):
        settings_or_exit()  # at start, for every command: a wrong variable stops it before anything runs


def asks_for_help(args: list[str]) -> bool:
    """`--help` among a command's options: help needs no configuration (and skips loading it, a third of the start)."""
    return "--help" in args[: args.index("--")] if "--" in args else "--help" in args


def main() -> None:
    app()


if __name__ == "__main__":
    main()
