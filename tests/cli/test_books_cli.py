"""`countersign books import` and `close load-bank-feed` in fresh processes against PostgreSQL: books imported and
loaded, a close started on them, a corrected statement loaded in each bank format, and a broken one refused in one
line with nothing loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from countersign.cli.main import app
from tests.cli.test_cli import cli
from tests.shared_schemas import CAMT053_XSD
from tests.support import count

CAMT_XSD = CAMT053_XSD
CORRECTED = {"camt053": "bank.camt053.xml", "mt940": "bank.mt940", "ofx": "bank.ofx", "csv": "bank-1000.csv"}


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "books"
    result = CliRunner().invoke(
        app,
        [
            "synth",
            "--out",
            str(out),
            "--seed",
            "42",
            "--ledger-format",
            "csv",
            "--bank-format",
            "camt053,mt940,ofx,csv",
        ],
    )
    assert result.exit_code == 0, result.output
    return out / "export"


def _import_and_start(database: Any, tmp_path: Path, export: Path) -> None:
    imported = cli(
        database, tmp_path, "books", "import", "--entity", "ACME-UK", "--period", "2026-10",
        "--gl", str(export / "gl.csv"), "--chart", str(export / "chart.csv"),
        "--bank", str(export / "bank.camt053.xml"),
        "--mapping", str(export / "mapping.yaml"), "--ap", str(export / "ap.csv"), "--ar", str(export / "ar.csv"),
        "--camt-xsd", str(CAMT_XSD), "--currency", "GBP", "--out", str(tmp_path / "books"), "--load",
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert "loaded as book set" in imported.stdout
    started = cli(database, tmp_path, "close", "start", "--entity", "ACME-UK", "--period", "2026-10")
    assert started.returncode == 0, started.stderr


async def test_a_corrected_statement_loads_in_every_bank_format(
    database: Any, conn: Any, tmp_path: Path, export: Path
) -> None:
    _import_and_start(database, tmp_path, export)
    corrected = export / "corrected"

    for version, kind in enumerate(("camt053", "mt940", "ofx", "csv"), start=2):
        loaded = cli(
            database, tmp_path, "close", "load-bank-feed", str(corrected / CORRECTED[kind]),
            "--mapping", str(corrected / "mapping.yaml"), "--camt-xsd", str(CAMT_XSD), "--by", "alice.chen",
        )  # fmt: skip

        assert loaded.returncode == 0, (kind, loaded.stderr)
        assert f"bank feed version {version} loaded" in loaded.stdout
        statements = await count(
            conn, "SELECT count(*) FROM book_bank_statement WHERE feed_version = %s AND format = %s", version, kind
        )
        assert statements == (1 if kind == "csv" else 2), kind  # a bank's CSV export is of one account
    assert await count(conn, "SELECT count(*) FROM bank_feed WHERE loaded_by = 'alice.chen'") == 4


async def test_a_broken_statement_is_refused_in_one_line_and_nothing_is_loaded(
    database: Any, conn: Any, tmp_path: Path, export: Path
) -> None:
    _import_and_start(database, tmp_path, export)
    broken = tmp_path / "bank.mt940"
    text = (export / "corrected" / "bank.mt940").read_bytes()
    broken.write_bytes(text.replace(b":62F:", b":62X:", 1))

    refused = cli(
        database,
        tmp_path,
        "close",
        "load-bank-feed",
        str(broken),
        "--mapping",
        str(export / "corrected" / "mapping.yaml"),
    )

    assert refused.returncode == 2
    assert refused.stderr.startswith("error: bank.mt940 line ") and "Traceback" not in refused.stderr
    assert len([line for line in refused.stderr.splitlines() if line.strip()]) <= 3  # one error, wrapped at most
    assert await count(conn, "SELECT count(*) FROM bank_feed") == 1  # the import's own feed only
