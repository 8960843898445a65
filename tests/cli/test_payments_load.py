"""`countersign payments load PATH`: the documented JSON directory, and CSV, XLSX and text-PDF pay applications with
their contracts.json, each written as one construction set whose certificates keep where every figure came from; a
bad file is one line naming file, row and field, exit 2, and nothing is loaded."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from countersign.services.loading import load_construction
from tests.cli.test_cli import cli
from tests.support import count

APPLICATIONS = Path(__file__).resolve().parents[1] / "data" / "applications"
SETS = "SELECT count(*) FROM construction_set"


def _applications(tmp_path: Path, *names: str) -> Path:
    """A directory holding contracts.json and the named test files."""
    out = tmp_path / "month"
    out.mkdir(exist_ok=True)
    for name in ("contracts.json", *names):
        shutil.copy(APPLICATIONS / name, out / name)
    return out


async def test_a_csv_an_xlsx_and_a_pdf_each_load_with_the_source_of_every_figure(
    database: Any, conn: Any, tmp_path: Path
) -> None:
    month = _applications(tmp_path, "app.csv", "app.xlsx", "valuation.pdf")
    expected = {
        "app.csv": ("IPC-CT100-001", "app.csv, row 33", "GBP 7,030.00"),
        "app.xlsx": ("IPC-CT100-002", "app.xlsx, sheet Valuation 2, row 37", "GBP 11,922.50"),
        "valuation.pdf": ("IPC-CT100-003", "valuation.pdf, page 2, row 'Amount due'", "GBP 11,970.00"),
    }
    for name, (certificate, source, due) in expected.items():
        done = cli(database, tmp_path, "payments", "load", str(month / name))
        assert done.returncode == 0, done.stderr
        assert f"from {name}: 1 contracts, 1 certificates (contracts.json, {name})" in done.stdout
        row = next(line for line in done.stdout.splitlines() if certificate in line)
        assert due.replace("GBP ", "") in row and "CT-100" in row
        cur = await conn.execute(
            "SELECT s.source, c.doc -> 'sources' ->> 'totals.amount_due' FROM construction_certificate c"
            " JOIN construction_set s USING (set_id) WHERE c.certificate_id = %s",
            (certificate,),
        )
        assert await cur.fetchall() == [(name, source)]
    assert await count(conn, SETS) == 3

    # The directory holding all three is one set; loading it again is the same set.
    first = cli(database, tmp_path, "payments", "load", str(month))
    again = cli(database, tmp_path, "payments", "load", str(month))
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert "3 certificates (contracts.json, app.csv, app.xlsx, valuation.pdf)" in first.stdout
    assert (
        first.stdout.split("construction set ")[1].split()[0] == again.stdout.split("construction set ")[1].split()[0]
    )
    assert await count(conn, SETS) == 4


async def test_the_generators_json_directory_loads_as_the_demo_loads_it(
    database: Any, conn: Any, tmp_path: Path
) -> None:
    data_dir = tmp_path / "construction"
    synth = cli(database, tmp_path, "synth", "--profile", "construction-demo", "--seed", "42", "--out", str(data_dir))
    assert synth.returncode == 0, synth.stderr
    done = cli(database, tmp_path, "payments", "load", str(data_dir))
    assert done.returncode == 0, done.stderr
    set_id = int(done.stdout.split("construction set ")[1].split()[0])
    assert await load_construction(conn, data_dir, loaded_by="t") == set_id  # the same contents, the same set
    assert await count(conn, "SELECT count(*) FROM construction_certificate WHERE set_id = %s", set_id) == sum(
        1 for line in (data_dir / "certificates.jsonl").read_text().splitlines() if line.strip()
    )


async def test_one_bad_file_loads_nothing_and_names_file_row_and_field(
    database: Any, conn: Any, tmp_path: Path
) -> None:
    month = _applications(tmp_path, "app.csv", "app.xlsx")
    text = (APPLICATIONS / "app.csv").read_text().replace('Amount due,"7,030.00"', 'Amount due,"12,5x"')
    (month / "zz-bad.csv").write_text(text.replace("IPC-CT100-001", "IPC-CT100-009"))
    done = cli(database, tmp_path, "payments", "load", str(month))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: zz-bad.csv, row 33: Amount due (Totals): expected a figure with at most 2 decimal places like"
        " 12,345.60, got '12,5x'"
    )
    assert await count(conn, SETS) == 0

    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(APPLICATIONS / "app.csv", lone / "app.csv")
    missing = cli(database, tmp_path, "payments", "load", str(lone / "app.csv"))
    assert missing.returncode == 2
    assert "contracts.json: (file): is missing (beside app.csv; or pass --contracts FILE)" in missing.stderr
    given = cli(
        database, tmp_path, "payments", "load", str(lone / "app.csv"), "--contracts", str(month / "contracts.json")
    )
    assert given.returncode == 0, given.stderr
    assert await count(conn, SETS) == 1


def test_a_wrong_extension_is_refused(database: Any, tmp_path: Path) -> None:
    month = _applications(tmp_path)
    (month / "app.ods").write_text("not read")
    done = cli(database, tmp_path, "payments", "load", str(month / "app.ods"))
    assert done.returncode == 2
    assert done.stderr.strip() == "error: app.ods: (file): expected a .csv, .xlsx, .pdf file, got '.ods'"
