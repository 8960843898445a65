"""`books import` as a controller meets it: a chart without our subtypes, the wrong month, the wrong account, the
same statement twice; every refusal one line naming the file, the place and the field, and nothing written."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from countersign.cli.main import app
from countersign.importers.errors import ImportFileError
from countersign.services.books_import import BooksImport, import_books
from tests.shared_schemas import CAMT053_XSD

CAMT_XSD = CAMT053_XSD


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "books"
    result = CliRunner().invoke(
        app, ["synth", "--out", str(out), "--seed", "42", "--ledger-format", "csv", "--bank-format", "camt053"]
    )
    assert result.exit_code == 0, result.output
    return out / "export"


def _request(export: Path, out: Path, **changes: object) -> BooksImport:
    values: dict[str, object] = {
        "entity": "ACME-UK",
        "period": "2026-10",
        "currency": "GBP",
        "gl": export / "gl.csv",
        "chart": export / "chart.csv",
        "bank": [export / "bank.camt053.xml"],
        "out": out,
        "mapping": export / "mapping.yaml",
        "camt_schema": CAMT_XSD,
    }
    values.update(changes)
    return BooksImport(**values)  # type: ignore[arg-type]


def _nothing_written(out: Path) -> None:
    assert not out.exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")] == []  # no scratch left


def test_a_chart_without_our_subtypes_gets_them_from_the_mapping(export: Path, tmp_path: Path) -> None:
    with (export / "chart.csv").open(encoding="cp1252", newline="") as handle:
        rows = list(csv.reader(handle, delimiter=";"))
    heading = rows[0].index(next(h for h in rows[0] if h.lower().startswith("unter") or h.lower() == "subtype"))
    bare = tmp_path / "chart-bare.csv"
    with bare.open("w", encoding="cp1252", newline="") as handle:
        csv.writer(handle, delimiter=";").writerows([[c for i, c in enumerate(r) if i != heading] for r in rows])
    mapping = yaml.safe_load((export / "mapping.yaml").read_text(encoding="utf-8"))
    del mapping["chart"]["columns"]["subtype"]
    mapping["account_subtypes"] = {"1000": "cash", "1010": "cash", "2000": "payable_control"}
    (tmp_path / "mapping.yaml").write_text(yaml.safe_dump(mapping), encoding="utf-8")

    imported = import_books(_request(export, tmp_path / "out", chart=bare, mapping=tmp_path / "mapping.yaml"))

    with (imported.folder / "accounts.csv").open(encoding="utf-8", newline="") as handle:
        subtypes = {row["account"]: row["subtype"] for row in csv.DictReader(handle)}
    assert subtypes["1000"] == subtypes["1010"] == "cash" and subtypes["2000"] == "payable_control"
    assert subtypes["1100"] == ""  # not named: the close will not reconcile receivables on this chart


def test_account_subtypes_naming_an_account_the_chart_lacks_is_refused(export: Path, tmp_path: Path) -> None:
    mapping = yaml.safe_load((export / "mapping.yaml").read_text(encoding="utf-8"))
    mapping["account_subtypes"] = {"1999": "cash"}
    (tmp_path / "mapping.yaml").write_text(yaml.safe_dump(mapping), encoding="utf-8")
    with pytest.raises(ImportFileError) as refused:
        import_books(_request(export, tmp_path / "out", mapping=tmp_path / "mapping.yaml"))
    assert (
        str(refused.value)
        == "mapping.yaml: account_subtypes.1999: names an account the chart of accounts does not have"
    )
    _nothing_written(tmp_path / "out")


def test_a_statement_for_an_account_the_mapping_does_not_know_is_refused(export: Path, tmp_path: Path) -> None:
    mapping = yaml.safe_load((export / "mapping.yaml").read_text(encoding="utf-8"))
    del mapping["bank_accounts"]["GB94BARC10201530093459"]
    (tmp_path / "mapping.yaml").write_text(yaml.safe_dump(mapping), encoding="utf-8")
    with pytest.raises(ImportFileError) as refused:
        import_books(_request(export, tmp_path / "out", mapping=tmp_path / "mapping.yaml"))
    message = str(refused.value)
    assert message.startswith("bank.camt053.xml statement ACME-UK-2026-10-1010: account: bank account GB94BARC1020")
    assert message.endswith("a statement for another account")
    _nothing_written(tmp_path / "out")


def test_a_statement_for_another_period_is_refused(export: Path, tmp_path: Path) -> None:
    with pytest.raises(ImportFileError) as refused:
        import_books(_request(export, tmp_path / "out", period="2026-11"))
    assert "covers 2026-10-01 to 2026-10-31, not the period 2026-11: a statement for another period" in str(
        refused.value
    )
    _nothing_written(tmp_path / "out")


def test_the_same_statement_given_twice_is_refused(export: Path, tmp_path: Path) -> None:
    with pytest.raises(ImportFileError) as refused:
        import_books(_request(export, tmp_path / "out", bank=[export / "bank.camt053.xml"] * 2))
    assert "was already read from bank.camt053.xml: a duplicate statement" in str(refused.value)
    _nothing_written(tmp_path / "out")


def test_a_ledger_line_outside_the_period_is_refused_after_the_statements_pass(export: Path, tmp_path: Path) -> None:
    """The ledger is read last, as a stream: the scratch folder it was being written into goes too."""
    with (export / "gl.csv").open(encoding="cp1252", newline="") as handle:
        rows = list(csv.reader(handle, delimiter=";"))
    date_column = next(
        i for i, heading in enumerate(rows[0]) if "datum" in heading.lower() or "date" in heading.lower()
    )
    rows[-2][date_column] = "15.11.2026"  # the last line before the totals row, moved into November
    moved = tmp_path / "gl.csv"
    with moved.open("w", encoding="cp1252", newline="") as handle:
        csv.writer(handle, delimiter=";", lineterminator="\r\n").writerows(rows)
    with pytest.raises(ImportFileError) as refused:
        import_books(_request(export, tmp_path / "out", gl=moved))
    assert str(refused.value).startswith("gl.csv line id ") and "is outside the period 2026-10" in str(refused.value)
    _nothing_written(tmp_path / "out")


def test_the_command_prints_one_line_and_exits_2_on_a_bad_file(export: Path, tmp_path: Path) -> None:
    args = ["books", "import", "--entity", "ACME-UK", "--period", "2026-10", "--gl", str(export / "gl.csv"),
            "--chart", str(export / "chart.csv"), "--mapping", str(export / "mapping.yaml"),
            "--camt-xsd", str(CAMT_XSD), "--currency", "GBP"]  # fmt: skip
    broken = tmp_path / "bank.xml"
    broken.write_bytes((export / "bank.camt053.xml").read_bytes().replace(b"<CdtDbtInd>CRDT</CdtDbtInd>", b"", 1))
    failed = CliRunner().invoke(app, [*args, "--bank", str(broken), "--out", str(tmp_path / "bad")])
    assert failed.exit_code == 2
    lines = [line for line in failed.output.splitlines() if line.strip()]
    assert lines[0].startswith("error: bank.xml line ") and "CdtDbtInd" in failed.output
    assert "Traceback" not in failed.output
    _nothing_written(tmp_path / "bad")

    done = CliRunner().invoke(app, [*args, "--bank", str(export / "bank.camt053.xml"), "--out", str(tmp_path / "ok")])
    assert done.exit_code == 0, done.output
    assert "2,000 ledger lines, 2 statements" in " ".join(done.output.split())
    assert (tmp_path / "ok" / "bank_statements.csv").is_file()
