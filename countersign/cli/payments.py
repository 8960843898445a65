"""`countersign payments`: load a month's pay applications, check them without a database, start their runs, and
read the runs' status.

`load` and `check` read the same inputs (countersign.services.construction_input): a construction data directory in the
documented JSON format, or CSV, XLSX and text-PDF pay applications with their contracts.json. A bad input is one
line naming the file, the row (or sheet and row, or page) and the field, exit 2, and nothing is loaded.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from countersign.cli.common import console, err, fail, run, runtime

if TYPE_CHECKING:
    from countersign.services.checking import CheckReport
    from countersign.services.construction_input import ConstructionInput, ParsedConstruction
    from countersign.services.starting import StartedPaymentRuns

payments_app = typer.Typer(
    help="Payment runs: load pay applications, check them, start a month's runs (one per certificate), status.",
    no_args_is_help=True,
)

CERTIFICATES_WORKFLOW = "certificates"
EXIT_HELD = 1
_MONTH = re.compile(r"\d{4}-(0[1-9]|1[0-2])")

PathArgument = Annotated[
    Path,
    typer.Argument(
        help="A directory (contracts.json with certificates.jsonl and/or .csv, .xlsx, .pdf pay applications), "
        "or one certificates.jsonl, .csv, .xlsx or .pdf file with the contracts.json beside it."
    ),
]
ContractsOption = Annotated[
    Path | None, typer.Option("--contracts", help="The contracts.json to use instead of the one beside PATH.")
]


@contextmanager
def _progress() -> Iterator[Progress]:
    """Progress on stderr, so stdout stays the tables (or the JSON)."""
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # a pipe or a log gets the one-line error alone
    ) as progress:
        yield progress


def _read_input(path: Path, contracts: Path | None) -> tuple[ConstructionInput, ParsedConstruction]:
    """PATH read and parsed, with progress per file; a bad input fails with its one line and exit 2."""
    from countersign.services.construction_input import INPUT_ERRORS, parse_construction_input, read_construction_input

    with _progress() as progress:
        task = progress.add_task(f"reading {escape(path.name)}", total=None)

        def read_one(name: str) -> None:
            progress.update(task, description=f"read {escape(name)}")

        try:
            construction = read_construction_input(path, contracts_file=contracts, on_file=read_one)
            progress.update(task, description="checking every record")
            return construction, parse_construction_input(construction)
        except INPUT_ERRORS as exc:
            progress.stop()
            fail(str(exc))
            raise AssertionError("unreachable") from exc


def _origin(sources: Any, fallback: str) -> str:
    """Where a certificate came from: the file (and sheet or page) of its id, or the JSON file it was listed in."""
    where = str(sources.get("id", "")) if sources else ""
    return where or fallback


@payments_app.command("load")
def payments_load(
    path: PathArgument,
    contracts: ContractsOption = None,
    by: Annotated[str, typer.Option(help="Who loads it (recorded in the trace).")] = "countersign-cli",
) -> None:
    """Load pay applications as a construction set: everything is read and checked before anything is written."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.construction_input import INPUT_ERRORS
    from countersign.services.loading import load_construction_input

    construction, parsed = _read_input(path, contracts)
    rt = runtime()

    async def go() -> int:
        async with connection(rt) as conn:
            return await load_construction_input(conn, construction, loaded_by=by)

    with _progress() as progress:
        progress.add_task(f"loading {len(parsed.certificates)} certificates", total=None)
        try:
            set_id = run(go)
        except INPUT_ERRORS as exc:
            progress.stop()
            fail(str(exc))
            return
    table = Table("certificate", "contract", "no.", "period", "date", "amount due", "read from")
    for certificate in parsed.certificates:
        currency = parsed.contracts[certificate.contract].currency
        due = Decimal(certificate.totals.amount_due_minor).scaleb(-2)
        table.add_row(
            escape(certificate.id),
            escape(certificate.contract),
            str(certificate.number),
            certificate.period,
            certificate.date.isoformat(),
            _amount(due, currency, rt.settings.locale),
            escape(_origin(certificate.sources, "certificates.jsonl")),
        )
    console.print(
        f"loaded construction set [bold]{set_id}[/] from {escape(construction.source)}: "
        f"{len(parsed.contracts)} contracts, {len(parsed.certificates)} certificates "
        f"({', '.join(escape(name) for name in construction.files)})",
        highlight=False,
    )
    console.print(table)


@payments_app.command("check")
def payments_check(
    path: PathArgument,
    contracts: ContractsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The checks alone, with no database and nothing started: exit 0 when nothing is held, 1 when something is,
    2 on bad input."""
    from countersign.services.checking import check_certificates

    _construction, parsed = _read_input(path, contracts)
    report = check_certificates(parsed.contracts, parsed.certificates)
    if as_json:
        sys.stdout.write(json.dumps(report.as_json(), indent=2) + "\n")
    else:
        _print_check(report)
    if report.held:
        raise typer.Exit(EXIT_HELD)


def _print_check(report: CheckReport) -> None:
    from countersign.policy.wording import in_words
    from countersign.services.checking import CheckVerdict

    table = Table("certificate", "contract", "no.", "date", "amount due", "verdict", "why", title="in submission order")
    for c in report.certificates:
        if c.duplicate is not None:
            why = f"duplicate of {c.duplicate.other_certificate}"
        else:
            why = ", ".join(in_words(v.invariant) for v in c.violations)
        table.add_row(
            escape(c.certificate_id),
            escape(c.contract_id),
            str(c.number),
            c.submitted_on.isoformat(),
            str(c.amount_due),
            "[bold red]held[/]" if c.verdict == CheckVerdict.HELD else "clear",
            escape(why),
        )
    console.print(
        f"[bold]{len(report.certificates)} certificates checked[/]: {len(report.held)} held, "
        f"{len(report.certificates) - len(report.held)} clear",
        highlight=False,
    )
    console.print(table)
    for c in report.held:
        console.print(f"[bold]{escape(c.certificate_id)}[/] ({escape(c.contract_id)} no. {c.number}) held:")
        if c.duplicate is not None:
            console.print(
                f"  duplicate of [bold]{escape(c.duplicate.other_certificate)}[/] line "
                f"{escape(c.duplicate.other_line)}, overlap {c.duplicate.overlap}: {escape(c.duplicate.explanation)}",
                highlight=False,
                soft_wrap=True,
            )
        for v in c.violations:
            amounts = "; ".join(f"{name} {money}" for name, money in v.amounts.items())
            console.print(
                f"  {escape(v.invariant)}: {escape(v.explanation)}" + (f" — {escape(amounts)}" if amounts else ""),
                highlight=False,
                soft_wrap=True,
            )


@payments_app.command("start")
def payments_start(
    period: Annotated[str, typer.Option("--period", help="Month YYYY-MM whose certificates get their runs.")],
    set_id: Annotated[
        int | None, typer.Option("--set", help="Construction set id (default: the latest with the month).")
    ] = None,
    by: Annotated[str, typer.Option(help="Who starts them (recorded in the trace).")] = "countersign-cli",
) -> None:
    """Start one payment run per certificate submitted in the month; refuses a month already started."""
    from countersign.bootstrap.runtime import connection, start_rules
    from countersign.services.errors import NoSuchConstructionSet
    from countersign.services.starting import start_payment_runs_for_month

    if not _MONTH.fullmatch(period):
        fail(f"--period must be a month YYYY-MM, got {period!r}")
    rt = runtime()

    async def go() -> StartedPaymentRuns:
        async with connection(rt) as conn:
            return await start_payment_runs_for_month(
                conn, start_rules(rt, CERTIFICATES_WORKFLOW), period=period, set_id=set_id, started_by=by
            )

    try:
        started = run(go)
    except NoSuchConstructionSet as exc:
        fail(str(exc))
        return
    console.print(
        f"started [bold]{len(started.close_ids)}[/] payment runs for {started.period} "
        f"on construction set {started.set_id}; `countersign worker` (or `close advance --close ID`) runs them",
        highlight=False,
    )
    table = Table("payment run (close id)")
    for close_id in started.close_ids:
        table.add_row(close_id)
    console.print(table)


@payments_app.command("status")
def payments_status_command(
    period: Annotated[str | None, typer.Option("--period", help="Month YYYY-MM (default: every month).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """One line per certificate: amount to certify, stage, gate tier and status, escalation, certified."""
    from countersign.bootstrap.runtime import connection
    from countersign.cards.model import CardDataError
    from countersign.cards.payments import final_date_words, payments_card
    from countersign.policy.wording import in_words
    from countersign.services.reading import LOCAL_OPERATOR, read_payment_runs

    if period is not None and not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", period):
        fail(f"--period must be a month YYYY-MM, got {period!r}")
    rt = runtime()

    async def go() -> list[dict[str, Any]]:
        async with connection(rt) as conn:
            return await read_payment_runs(conn, rt.policy, LOCAL_OPERATOR, period)

    rows = run(go)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    try:
        card = payments_card(rows, period)
    except CardDataError as exc:
        fail(str(exc))
        return
    table = Table(
        "certificate", "contract", "amount to certify", "stage", "gate", "escalation", "final date", "certified"
    )
    for line in card.runs:
        amount = (
            "—"
            if line.amount_to_certify is None
            else _amount(line.amount_to_certify, line.currency, rt.settings.locale)
        )
        gate = "—" if line.gate_status is None else f"{line.gate_tier}: {in_words(line.gate_status)}"
        table.add_row(
            escape(line.certificate_id),
            escape(line.contract_id),
            amount.strip(),
            escape(in_words(line.stage)),
            escape(gate),
            in_words(line.escalation or ""),
            final_date_words(line) or "—",
            "yes" if line.certified else "no",
        )
    console.print(f"[bold]payment runs {period or '(every month)'}[/]: {len(card.runs)}, {card.certified} certified")
    console.print(table)


@payments_app.command("default-notice")
def payments_default_notice(
    certificate: Annotated[str, typer.Argument(help="The certificate the payee gives the notice on.")],
    stated_sum: Annotated[
        str, typer.Option("--sum", help="The sum the payee considers due, e.g. 12500.00 (normally the claim).")
    ],
    basis: Annotated[str, typer.Option("--basis", help="How that sum is calculated, in words.")],
    given_on: Annotated[str, typer.Option("--given-on", help="The day the payee gave the notice, YYYY-MM-DD.")],
    by: Annotated[str, typer.Option(help="Who records it for the payee (recorded in the trace).")] = "countersign-cli",
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Record the payee's default notice (HGCRA 1996 s. 110B): only when the payment notice was not given in time;
    the final date for payment moves by the days the notice came after the payment notice's deadline."""
    import datetime as dt
    from decimal import InvalidOperation

    from countersign.bootstrap.chat import channel_targets
    from countersign.bootstrap.runtime import connection
    from countersign.services.default_notices import DefaultNoticeRefused, RecordedDefaultNotice, record_default_notice

    try:
        amount = Decimal(stated_sum)
    except InvalidOperation:
        fail(f"--sum must be an amount like 12500.00, got {stated_sum!r}")
        return
    try:
        day = dt.date.fromisoformat(given_on)
    except ValueError:
        fail(f"--given-on must be a day YYYY-MM-DD, got {given_on!r}")
        return
    rt = runtime()

    async def go() -> RecordedDefaultNotice:
        async with connection(rt) as conn:
            return await record_default_notice(
                conn,
                certificate_id=certificate,
                stated_sum=amount,
                basis=basis,
                given_on=day,
                given_by=by,
                channels=channel_targets(rt.settings),
                locale=rt.settings.locale,
            )

    try:
        recorded = run(go)
    except DefaultNoticeRefused as exc:
        fail(exc.reason)
        return
    notice = recorded.notice
    if as_json:
        payload = {
            "notice_id": notice.notice_id,
            "certificate_id": notice.certificate_id,
            "currency": notice.currency,
            "stated_sum": f"{notice.stated_sum:.2f}",
            "claimed_sum": None if notice.claimed_sum is None else f"{notice.claimed_sum:.2f}",
            "basis": notice.basis,
            "given_on": notice.given_on.isoformat(),
            "payment_notice_deadline": notice.payment_notice_deadline.isoformat(),
            "payment_notice_given_late": notice.payment_notice_id is not None,
            "days_late": notice.days_late,
            "final_date": notice.final_date.isoformat(),
            "postponed_final_date": notice.postponed_final_date.isoformat(),
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    console.print(f"recorded default notice {notice.notice_id}: {escape(recorded.words)}", highlight=False)


def _amount(amount: Decimal, currency: str | None, locale: str) -> str:
    """The amount with its currency in the locale, as the payment card shows it; a run without a currency shows the
    figure alone."""
    from countersign.money.formatting import format_amount, format_money

    return format_amount(amount) if currency is None else format_money(amount, currency, locale=locale)
