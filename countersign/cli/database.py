"""`countersign db` and `config`: the schema, and the configuration read from the environment.

Imports here stay light (typer, rich): the migrations and the runtime are imported by the command using them.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from countersign.cli.common import console, err, runtime, write_json

db_app = typer.Typer(help="Database schema.", no_args_is_help=True)


config_app = typer.Typer(help="The configuration read from the environment.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration as the owner (DATABASE_URL), then set the service roles' passwords given by
    COUNTERSIGN_ENGINE_DB_PASSWORD / COUNTERSIGN_CALLBACKS_DB_PASSWORD (or their _FILE variants)."""
    from countersign.bootstrap import migrate

    rt = runtime(upgrade=True)
    changed = migrate.set_role_passwords(rt.database, rt.database.role_passwords)
    console.print(f"schema at revision {migrate.current_revision(rt.database.owner_url)}")
    for role in changed:
        console.print(f"password set for role {role}")


@config_app.command("check")
def config_check(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output (exit codes unchanged).")] = False,
) -> None:
    """Print every variable, its effective value (secrets redacted) and its source; exit 2 when one is wrong."""
    from countersign.bootstrap.settings import SettingsError, describe, load_settings

    if as_json:
        variables = [{"variable": name, "value": value, "from": source} for name, value, source in describe()]
        try:
            load_settings()
        except SettingsError as exc:
            write_json({"valid": False, "errors": list(exc.lines), "variables": variables})
            raise typer.Exit(2) from None
        write_json({"valid": True, "errors": [], "variables": variables})
        return
    table = Table("variable", "value", "from", title="configuration")
    for name, value, source in describe():
        table.add_row(name, escape(value), source)
    console.print(table)
    try:
        load_settings()
    except SettingsError as exc:
        for line in exc.lines:
            err.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    console.print("configuration valid")
