"""`countersign books import`: a ledger export and bank statements, as an ERP and a bank wrote them, into the books
format `close start --books` reads (docs/books-format.md).

A bad file is one line naming the file, the line or row, the field and what was expected; exit 2; nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from countersign.cli.common import console, fail, run, runtime, settings_or_exit
from countersign.cli.progress import spinner

books_app = typer.Typer(
    help="Books: import a ledger and bank statements (camt.053, MT940, OFX, CSV) into the books format.",
    no_args_is_help=True,
)


@books_app.command("import")
def books_import(
    entity: Annotated[str, typer.Option(help="Entity code.")],
    period: Annotated[str, typer.Option(help="Period, YYYY-MM.")],
    gl: Annotated[Path, typer.Option(help="The general ledger export: CSV or XLSX.")],
    bank: Annotated[
        list[Path], typer.Option(help="A bank statement: camt.053 XML, MT940, OFX or CSV (repeat for more).")
    ],
    chart: Annotated[Path, typer.Option(help="The chart of accounts the ledger is checked against: CSV or XLSX.")],
    mapping: Annotated[
        Path | None, typer.Option(help="Mapping file (YAML): column names, signs, dates, separators, bank accounts.")
    ] = None,
    ap: Annotated[Path | None, typer.Option(help="Accounts payable open items: CSV or XLSX.")] = None,
    ar: Annotated[Path | None, typer.Option(help="Accounts receivable open items: CSV or XLSX.")] = None,
    rates: Annotated[Path | None, typer.Option(help="The period's exchange rates (rates.csv, books format).")] = None,
    supplier_bank_changes: Annotated[
        Path | None, typer.Option(help="Changes to suppliers' bank details (supplier_bank_changes.csv).")
    ] = None,
    grni: Annotated[Path | None, typer.Option(help="Goods received not invoiced (grni.csv, books format).")] = None,
    intercompany: Annotated[
        Path | None, typer.Option(help="Intercompany confirmations (intercompany.csv, books format).")
    ] = None,
    prior_period: Annotated[
        Path | None, typer.Option(help="Last period's P&L by account (prior_period.csv, books format).")
    ] = None,
    budget: Annotated[Path | None, typer.Option(help="This period's budget by account (budget.csv).")] = None,
    currency: Annotated[
        str | None, typer.Option(help="Functional currency (default: risk.yaml's for the entity).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Books folder to write (default: STATE_DIR/books/E-P).")] = None,
    camt_xsd: Annotated[
        Path | None, typer.Option(help="camt.053 XSD file or folder (default: COUNTERSIGN_CAMT053_XSD).")
    ] = None,
    mt940_encoding: Annotated[str, typer.Option(help="MT940 text encoding: utf-8, cp1252, latin-1.")] = "utf-8",
    replace: Annotated[bool, typer.Option("--replace", help="Replace an existing books folder.")] = False,
    load: Annotated[bool, typer.Option("--load", help="Also load the books into the database.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Import a ledger and bank statements into one books folder; `close start --books FOLDER` then reads it."""
    from countersign.importers.errors import ImportFileError
    from countersign.policy import PolicyError, load_policy
    from countersign.services.books_import import BooksImport, import_books

    settings = settings_or_exit()
    if currency is None:
        try:
            policy = load_policy(settings.risk_path)
        except PolicyError as exc:
            fail(str(exc))
            return
        currency = policy.entity(entity).currency
    target = out or settings.state_dir / "books" / f"{entity}-{period}"
    request = BooksImport(
        entity=entity,
        period=period,
        currency=currency,
        gl=gl,
        chart=chart,
        bank=tuple(bank),
        out=target,
        mapping=mapping,
        ap=ap,
        ar=ar,
        rates=rates,
        supplier_bank_changes=supplier_bank_changes,
        grni=grni,
        intercompany=intercompany,
        prior_period=prior_period,
        budget=budget,
        camt_schema=camt_xsd or settings.camt053_xsd,
        mt940_encoding=mt940_encoding,
        replace=replace,
    )
    try:
        with spinner(f"importing the books of {entity} {period}") as say:
            stage = [""]

            def show(line: str) -> None:  # a stage ("streaming the general ledger gl.csv"), or its count so far
                if line.startswith(" "):
                    say(f"{stage[0]}: {line.strip()}")
                else:
                    stage[0] = line
                    say(line)

            imported = import_books(request, progress=show)
    except (ImportFileError, ValueError) as exc:
        fail(str(exc))
        return
    book_set_id: int | None = None
    if load:
        from countersign.bootstrap.runtime import connection
        from countersign.services.loading import load_book_set

        rt = runtime()

        async def go() -> int:
            async with connection(rt) as conn:
                return (await load_book_set(conn, imported.folder, loaded_by="countersign-cli")).book_set_id

        with spinner(f"loading the books of {entity} {period} into the database"):
            book_set_id = run(go)
    if as_json:
        print(
            json.dumps(
                {
                    "folder": str(imported.folder),
                    "accounts": imported.accounts,
                    "gl_lines": imported.gl_lines,
                    "statements": imported.statements,
                    "bank_lines": imported.bank_lines,
                    "book_set_id": book_set_id,
                }
            )
        )
        return
    console.print(
        f"books for {escape(entity)} {escape(period)} written to {escape(str(imported.folder))}: "
        f"{imported.accounts} accounts, {imported.gl_lines:,} ledger lines, {imported.statements} statements, "
        f"{imported.bank_lines:,} bank lines"
    )
    if book_set_id is not None:
        console.print(
            f"loaded as book set {book_set_id}; next: countersign close start --entity {entity} --period {period}"
        )
    else:
        console.print(
            f"next: countersign close start --entity {escape(entity)} --period {escape(period)} "
            f"--books {escape(str(imported.folder))}"
        )
