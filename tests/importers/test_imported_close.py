"""Books imported from the files banks and ERPs export, closed end to end on PostgreSQL with the real specialists.

`countersign synth` writes the seed-42 books also as camt.053, MT940, OFX and a UK bank's CSV, and the ledger as an
XLSX workbook or an SAP-style CSV, with the mapping that reads them. Each test imports one combination through
`books import`'s service, loads it, starts the close, meets the planted wrong bank export on account 1000, loads the
corrected statement in the same bank format (as `close load-bank-feed` does), and lets people approve every gate
until the period is closed. The camt.053 + XLSX close runs through the worker and its trace is exported and verified
offline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from countersign.audit.bundle import verify_bundle
from countersign.audit.checkpoint import generate_signer
from countersign.bootstrap.runtime import connection
from countersign.cli.main import app
from countersign.engine.books import load_bank_feed
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.engine.worker import run_worker_pass
from countersign.importers.mapping import load_mapping
from countersign.services.books_import import BooksImport, import_books, read_statements, write_bank_feed
from countersign.services.exports import export_bundle
from tests.engine.workflow_support import approve_open_gates
from tests.shared_schemas import CAMT053_XSD
from tests.support import count, start_default_close

CAMT_XSD = CAMT053_XSD
ENTITY, PERIOD = "ACME-UK", "2026-10"  # the default profile's


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The seed-42 books with every bank format and each ledger format exported beside them."""
    folders: dict[str, Path] = {}
    for ledger in ("xlsx", "csv"):
        out = tmp_path_factory.mktemp(f"synth-{ledger}") / "books"
        result = CliRunner().invoke(
            app,
            ["synth", "--out", str(out), "--seed", "42", "--ledger-format", ledger]
            + [f"--bank-format={kind}" for kind in ("camt053", "mt940", "ofx", "csv")],
        )
        assert result.exit_code == 0, result.output
        folders[ledger] = out / "export"
    return folders


BANK_FILES = {
    "camt053": ("bank.camt053.xml",),
    "mt940": ("bank.mt940",),
    "ofx": ("bank.ofx",),
    "csv": ("bank-1000.csv", "bank-1010.csv"),
}
LEDGER_FILES = {
    "xlsx": ("gl.xlsx", "gl.xlsx", "ap.xlsx", "ar.xlsx"),
    "csv": ("gl.csv", "chart.csv", "ap.csv", "ar.csv"),
}


def _import(export: Path, bank: str, ledger: str, out: Path) -> Path:
    gl, chart, ap, ar = LEDGER_FILES[ledger]
    imported = import_books(
        BooksImport(
            entity=ENTITY,
            period=PERIOD,
            currency="GBP",
            gl=export / gl,
            chart=export / chart,
            bank=[export / name for name in BANK_FILES[bank]],
            out=out,
            mapping=export / "mapping.yaml",  # each account's CSV has its own beside it
            ap=export / ap,
            ar=export / ar,
            # what procurement, consolidation and planning hand over, already in the books format
            grni=export.parent / "grni.csv",
            intercompany=export.parent / "intercompany.csv",
            prior_period=export.parent / "prior_period.csv",
            budget=export.parent / "budget.csv",
            camt_schema=CAMT_XSD,
        )
    )
    assert imported.gl_lines == 2000 and imported.statements == 2
    return imported.folder


def _corrected_feed(export: Path, bank: str, folder: Path) -> Path:
    """The corrected statement, as `close load-bank-feed` reads it: a feed in the books format."""
    corrected = export / "corrected"
    mapping = load_mapping(corrected / "mapping.yaml")
    paths = [corrected / name for name in BANK_FILES[bank]]
    statements, sources = read_statements(paths, mapping, camt_schema=CAMT_XSD)
    return write_bank_feed(statements, mapping, folder, sources)


@dataclass
class _Delivered:
    sent: int = 0
    retried: int = 0
    failed: int = 0


async def _no_chat(connect: Any) -> _Delivered:
    return _Delivered()


def _connect(url: str) -> Any:
    @asynccontextmanager
    async def connect() -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            yield conn

    return connect


async def _close_to_the_end(
    conn: Any, runtime: Any, engine_ctx: Any, api: Any, close_id: str, feed: Path, *, through_worker: bool
) -> dict[str, Any]:
    async def step() -> None:
        if through_worker:
            await run_worker_pass(_connect(runtime.database.engine_url), engine_ctx, _no_chat)
        else:
            await advance(conn, close_id, engine_ctx)

    await step()
    status = await close_status(conn, close_id)
    bank = next(t for t in status["tasks"] if t["task"] == "bank_reconciliation")
    assert bank["status"] == "halted" and bank["reason"].startswith("account 1000:"), bank
    (book_set_id,) = await (
        await conn.execute("SELECT book_set_id FROM close_run WHERE close_id = %s", (close_id,))
    ).fetchone()
    await load_bank_feed(conn, book_set_id, feed, loaded_by="alice.chen", close_id=close_id)
    for _ in range(12):
        status = await close_status(conn, close_id)
        if status["status"] == "closed":
            break
        await approve_open_gates(api, conn, close_id)
        await step()
    return await close_status(conn, close_id)


async def test_camt053_and_an_xlsx_ledger_close_through_the_worker_with_a_trace_verified_offline(
    conn: Any, runtime: Any, engine_ctx: Any, api: Any, exported: dict[str, Path], tmp_path: Path
) -> None:
    export = exported["xlsx"]
    books = _import(export, "camt053", "xlsx", tmp_path / "books")
    close_id = await start_default_close(conn, runtime, books)
    feed = _corrected_feed(export, "camt053", tmp_path / "feed")

    status = await _close_to_the_end(conn, runtime, engine_ctx, api, close_id, feed, through_worker=True)

    assert status["status"] == "closed", [(t["task"], t["status"], t.get("reason")) for t in status["tasks"]]
    assert {t["status"] for t in status["tasks"]} == {"done"}
    assert await count(conn, "SELECT count(*) FROM book_bank_statement") == 4  # two accounts, two feeds
    assert await count(conn, "SELECT count(*) FROM book_bank_statement WHERE format = 'camt053'") == 4
    # The books it ran on say where they came from, in the close's version set and so in its trace.
    versions = await (
        await conn.execute("SELECT version_set FROM trace_context WHERE close_id = %s", (close_id,))
    ).fetchone()
    sources = {source["role"]: (source["name"], source["format"]) for source in versions[0]["books_sources"]}
    assert sources["gl"] == sources["chart"] == ("gl.xlsx", "xlsx")
    assert sources["bank"] == ("bank.camt053.xml", "camt053")
    assert sources["ap"] == ("ap.xlsx", "xlsx") and sources["mapping"] == ("mapping.yaml", "yaml")
    exported_bundle = await export_bundle(
        lambda role: connection(runtime, role),
        close_id=close_id,
        signer=generate_signer("countersign.test/close-trace"),
        origin="countersign.test/close-trace",
        requested_by="countersign-cli",
        platform="cli",
    )
    report = verify_bundle(exported_bundle.data)
    assert report.unchecked_decisions == 0 and report.ed25519_decisions >= 5


@pytest.mark.parametrize(("bank", "ledger"), [("mt940", "csv"), ("ofx", "xlsx"), ("csv", "csv")])
async def test_every_bank_format_and_ledger_style_closes_the_period(
    conn: Any,
    runtime: Any,
    engine_ctx: Any,
    api: Any,
    exported: dict[str, Path],
    tmp_path: Path,
    bank: str,
    ledger: str,
) -> None:
    export = exported[ledger]
    books = _import(export, bank, ledger, tmp_path / "books")
    close_id = await start_default_close(conn, runtime, books)
    feed = _corrected_feed(export, bank, tmp_path / "feed")

    status = await _close_to_the_end(conn, runtime, engine_ctx, api, close_id, feed, through_worker=False)

    assert status["status"] == "closed", status
    assert await count(conn, "SELECT count(*) FROM accounting_period WHERE status = 'closed'") == 1
    assert await count(conn, "SELECT count(DISTINCT format) FROM book_bank_statement") == 1
