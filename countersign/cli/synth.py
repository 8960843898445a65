"""`countersign synth`: deterministic synthetic books, clause corpus or construction data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from countersign.cli.common import console, fail, settings_or_exit
from countersign.cli.progress import counter, spinner

if TYPE_CHECKING:
    from countersign.synthetic.bank_formats import Export

BOOKS = "books"
EXPORT_DIR = "export"


def synth(
    out: Annotated[Path, typer.Option(help="Directory to write the books into.")],
    profile: Annotated[str, typer.Option(help="Profile name in config/profiles/.")] = "default",
    seed: Annotated[int, typer.Option(help="Integer seed; same seed, same bytes.")] = 42,
    scale: Annotated[int | None, typer.Option(help="Number of GL lines (overrides the profile).")] = None,
    entity: Annotated[str | None, typer.Option(help="Entity code (overrides the profile).")] = None,
    period: Annotated[str | None, typer.Option(help="Period YYYY-MM (overrides the profile).")] = None,
    bank_format: Annotated[
        list[str] | None,
        typer.Option(
            help="Also write the bank statements as a bank exports them, into <out>/export/: books (nothing more), "
            "camt053, mt940, ofx or csv. Repeat it or give a comma list."
        ),
    ] = None,
    ledger_format: Annotated[
        str,
        typer.Option(
            help="Also write the GL, chart, AP and AR as an ERP exports them, into <out>/export/: books "
            "(nothing more), xlsx or csv (SAP style)."
        ),
    ] = BOOKS,
) -> None:
    """Write deterministic synthetic data from a profile: books for one entity and period (the default), the clause
    corpus (`--profile clauses`) or construction contracts and certificates (`--profile construction`).

    With --bank-format or --ledger-format the books are also written as banks and ERPs export them, under
    <out>/export/ with a mapping.yaml that reads them back; the books themselves are unchanged."""
    from countersign.synthetic import (
        ProfileError,
        generate_books,
        generate_construction,
        load_clause_profile,
        load_construction_profile,
        load_profile,
        profile_kind,
        write_clause_corpus,
    )
    from countersign.synthetic.ledger_formats import LEDGER_FORMATS

    settings = settings_or_exit()
    path = settings.profile_path(profile)
    bank_formats = _bank_formats(bank_format or [])
    if ledger_format not in (BOOKS, *LEDGER_FORMATS):
        fail(f"--ledger-format: expected one of {', '.join((BOOKS, *LEDGER_FORMATS))}, found {ledger_format!r}")
        return
    exporting = bool(bank_formats) or ledger_format != BOOKS
    try:
        kind = profile_kind(path)
        if exporting and kind != "books":
            fail(f"--bank-format and --ledger-format apply to books profiles; {profile!r} is a {kind} profile")
            return
        if kind == "clauses":
            with spinner(f"writing the clause corpus ({profile}, seed {seed})"):
                written = write_clause_corpus(load_clause_profile(path), seed, out)
            console.print(f"wrote the clause corpus ({profile}, seed {seed}) to {written}")
            return
        if kind == "construction":
            corpus = json.loads((settings.clauses_dir / "corpus.json").read_bytes())
            with spinner(f"writing construction contracts and certificates ({profile}, seed {seed})"):
                made = generate_construction(load_construction_profile(path), seed, out, clause_corpus=corpus)
            console.print(
                f"wrote {made.contracts} contracts, {made.certificates:,} certificates ({made.faults} seeded faults, "
                f"{made.duplicates} duplicate re-submissions) to {out}"
            )
            return
        loaded = load_profile(path)
    except ProfileError as exc:
        fail(str(exc))
        return
    with counter("synthesizing GL lines", scale or loaded.gl_lines) as tick:
        try:
            manifest = generate_books(loaded, seed, out, entity=entity, period=period, gl_lines=scale, progress=tick)
        except ProfileError as exc:
            fail(str(exc))
            return
    console.print(
        f"wrote books for [bold]{manifest.entity}[/] {manifest.period} ({manifest.gl_line_count:,} GL lines) to {out}"
    )
    if exporting:
        try:
            with spinner(f"writing the exports under {out / EXPORT_DIR}"):
                exported = write_exports(out, bank_formats, ledger_format)
        except ValueError as exc:
            fail(str(exc))
            return
        console.print(f"wrote {len(exported)} export files to {out / EXPORT_DIR}:")
        for name in exported:
            console.print(f"  {name}")


def _bank_formats(values: list[str]) -> tuple[str, ...]:
    """The formats asked for, in order, once each; `books` (always written) adds nothing."""
    from countersign.synthetic.bank_formats import BANK_FORMATS

    asked = [name.strip().lower() for value in values for name in value.split(",") if name.strip()]
    unknown = [name for name in asked if name not in (BOOKS, *BANK_FORMATS)]
    if unknown:
        fail(f"--bank-format: expected some of {', '.join((BOOKS, *BANK_FORMATS))}, found {unknown[0]!r}")
    return tuple(dict.fromkeys(name for name in asked if name != BOOKS))


def write_exports(books_dir: Path, bank_formats: tuple[str, ...], ledger_format: str) -> list[str]:
    """Write <books_dir>/export/ afresh: the asked formats, the corrected bank feed under corrected/, and a
    mapping.yaml in each folder covering its files. Returns the paths written, relative to export/."""
    from countersign.synthetic.bank_formats import write_bank_exports, write_mapping
    from countersign.synthetic.ledger_formats import write_ledger_exports

    export = books_dir / EXPORT_DIR
    if export.exists():
        shutil.rmtree(export)
    parts: list[Export] = []
    written: list[str] = []
    if bank_formats:
        parts.append(write_bank_exports(books_dir, export, bank_formats))
        corrected = "corrected/bank_lines.csv"
        if (books_dir / corrected).exists():
            fixed = write_bank_exports(
                books_dir, export / "corrected", bank_formats, bank_file=corrected, message_id_suffix="-R"
            )
            write_mapping(export / "corrected" / "mapping.yaml", [fixed.mapping], fixed.described)
            written += [f"corrected/{name}" for name in (*fixed.files, "mapping.yaml")]
    if ledger_format != BOOKS:
        parts.append(write_ledger_exports(books_dir, export, ledger_format))
    described = {key: value for part in parts for key, value in part.described.items()}
    write_mapping(export / "mapping.yaml", [part.mapping for part in parts], described)
    files = [name for part in parts for name in part.files]
    return [*files, "mapping.yaml", *written]
