"""`countersign synth`: deterministic synthetic books, clause corpus or construction data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from cli.common import console, err, fail, settings_or_exit
from synthetic import (
    ProfileError,
    generate_books,
    generate_construction,
    load_clause_profile,
    load_construction_profile,
    load_profile,
    profile_kind,
    write_clause_corpus,
)


def synth(
    out: Annotated[Path, typer.Option(help="Directory to write the books into.")],
    profile: Annotated[str, typer.Option(help="Profile name in config/profiles/.")] = "default",
    seed: Annotated[int, typer.Option(help="Integer seed; same seed, same bytes.")] = 42,
    scale: Annotated[int | None, typer.Option(help="Number of GL lines (overrides the profile).")] = None,
    entity: Annotated[str | None, typer.Option(help="Entity code (overrides the profile).")] = None,
    period: Annotated[str | None, typer.Option(help="Period YYYY-MM (overrides the profile).")] = None,
) -> None:
    """Write deterministic synthetic data from a profile: books for one entity and period (the default), the clause
    corpus (`--profile clauses`) or construction contracts and certificates (`--profile construction`)."""
    settings = settings_or_exit()
    path = settings.profile_path(profile)
    try:
        kind = profile_kind(path)
        if kind == "clauses":
            written = write_clause_corpus(load_clause_profile(path), seed, out)
            console.print(f"wrote the clause corpus ({profile}, seed {seed}) to {written}")
            return
        if kind == "construction":
            corpus = json.loads((settings.clauses_dir / "corpus.json").read_bytes())
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
    with Progress(
        TextColumn("synthesizing GL lines"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        bar = progress.add_task("gl", total=scale or loaded.gl_lines)

        def tick(done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total)

        try:
            manifest = generate_books(loaded, seed, out, entity=entity, period=period, gl_lines=scale, progress=tick)
        except ProfileError as exc:
            fail(str(exc))
            return
    console.print(
        f"wrote books for [bold]{manifest.entity}[/] {manifest.period} ({manifest.gl_line_count:,} GL lines) to {out}"
    )
