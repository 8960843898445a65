"""Benchmark: stream an ERP general-ledger export of 1,000,000 lines into the books format, against a csv.reader pass.

Run: .venv/bin/python bench/bench_books_import.py [--lines 1000000] [--seed 42]
Writes, in a temporary folder, an SAP-style GL export (cp1252, ";" delimited, comma decimals, "1.234,56" thousands,
Soll/Haben debit and credit columns, dd.mm.yyyy dates, a report title above the header and a Total row at the end;
balanced journals of 2 to 4 lines), its chart of accounts and the mapping file that describes both. Then measures,
each in a fresh child process so each peak RSS is its own:
  (a) baseline: csv.reader over the same file (same encoding and delimiter), counting rows;
  (b) import: countersign.importers.ledger.read_gl streaming every line (amounts, dates, accounts against the chart,
  journals
      balanced) and writing our gl_lines.csv with csv.writer.
Prints wall time, CPU time and peak RSS (VmHWM) of each, lines/s, and the ratios import / baseline. Fails when the
import does not read back every line, or when its peak RSS grows with the file (more than MAX_IMPORT_RSS_MB).
Bounded: aborts itself after ABORT_AFTER_SECONDS.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

ABORT_AFTER_SECONDS = 900
MAX_IMPORT_RSS_MB = 150
GL_FILE = "hauptbuch_export.csv"
CHART_FILE = "sachkonten.csv"
MAPPING_FILE = "mapping.yaml"
OUT_FILE = "gl_lines.csv"
ENCODING = "cp1252"
PERIOD_START = date(2026, 11, 1)

CHART = (
    ("113100", "Deutsche Bank Girokonto", "Aktiva", "bank"),
    ("113200", "Commerzbank Girokonto", "Aktiva", "bank"),
    ("140000", "Forderungen aus Lieferungen und Leistungen", "Aktiva", "receivable_control"),
    ("154000", "Vorsteuer", "Aktiva", ""),
    ("160000", "Verbindlichkeiten aus Lieferungen und Leistungen", "Passiva", "payable_control"),
    ("175000", "Umsatzsteuer", "Passiva", ""),
    ("300000", "Gezeichnetes Kapital", "Eigenkapital", ""),
    ("400000", "Aufwendungen für Rohstoffe", "Aufwand", ""),
    ("417000", "Fremdleistungen", "Aufwand", ""),
    ("620000", "Büromaterial", "Aufwand", ""),
    ("630000", "Mieten", "Aufwand", ""),
    ("640000", "Löhne und Gehälter", "Aufwand", ""),
    ("800000", "Umsatzerlöse", "Ertrag", ""),
    ("810000", "Erlöse aus Dienstleistungen", "Ertrag", ""),
)
PARTIES = (
    "Müller GmbH",
    "Schäfer & Söhne KG",
    "Straßenbau AG",
    "Weiß Logistik GmbH",
    "Bäckerei Köhler",
    "Nordlicht SE",
)
TEXTS = ("Rechnung", "Gutschrift", "Zahlung", "Ausgleich", "Umbuchung", "Abgrenzung")

MAPPING = f"""\
version: 1
gl:
  encoding: {ENCODING}
  delimiter: ";"
  header_row: 2
  date_format: "%d.%m.%Y"
  decimal_separator: ","
  thousands_separator: "."
  columns:
    journal_id: Belegnummer
    date: Buchungsdatum
    account: Sachkonto
    debit: Soll
    credit: Haben
    reference: Referenz
    description: Buchungstext
chart:
  encoding: {ENCODING}
  delimiter: ";"
  columns: {{account: Sachkonto, name: Bezeichnung, type: Kontoart, subtype: Unterart}}
  type_values: {{Aktiva: asset, Passiva: liability, Eigenkapital: equity, Ertrag: revenue, Aufwand: expense}}
"""


def _german(cents: int) -> str:
    """1234567 -> "12.345,67" (an SAP export's amount)."""
    whole, fraction = divmod(cents, 100)
    return f"{whole:,}".replace(",", ".") + f",{fraction:02d}"


def write_inputs(folder: Path, lines: int, seed: int) -> int:
    """The GL export (exactly `lines` lines), the chart and the mapping; returns the GL file's size in bytes."""
    rng = random.Random(seed)
    accounts = [row[0] for row in CHART]
    with (folder / CHART_FILE).open("w", encoding=ENCODING, newline="") as handle:
        writer = csv.writer(handle, delimiter=";", lineterminator="\r\n")
        writer.writerow(("Sachkonto", "Bezeichnung", "Kontoart", "Unterart"))
        writer.writerows(CHART)
    (folder / MAPPING_FILE).write_text(MAPPING, encoding="utf-8")
    days = [(PERIOD_START + timedelta(days=n)).strftime("%d.%m.%Y") for n in range(30)]
    total = 0
    with (folder / GL_FILE).open("w", encoding=ENCODING, newline="") as handle:
        writer = csv.writer(handle, delimiter=";", lineterminator="\r\n")
        writer.writerow(("Hauptbuch-Export Buchungskreis 1000, Periode 11/2026", "", "", "", "", "", "", ""))
        writer.writerow(
            ("Belegnummer", "Position", "Buchungsdatum", "Sachkonto", "Soll", "Haben", "Referenz", "Buchungstext")
        )
        written, journal = 0, 0
        while written < lines:
            journal += 1
            size = min(2 + int(rng.random() * 3), lines - written)
            if lines - written - size == 1:  # never leave a single line for the last journal
                size += 1 if size < 4 else -1
            amounts = [int(rng.random() * 5_000_000) + 1 for _ in range(size - 1)]
            amounts = [a if rng.random() < 0.5 else -a for a in amounts]
            amounts.append(-sum(amounts))
            day = days[int(rng.random() * len(days))]
            party = PARTIES[int(rng.random() * len(PARTIES))]
            text = f"{party} {TEXTS[int(rng.random() * len(TEXTS))]}"
            reference = f"RE-{journal:07d}"
            journal_id = f"19{journal:08d}"
            for position, cents in enumerate(amounts, start=1):
                debit, credit = (_german(cents), "") if cents >= 0 else ("", _german(-cents))
                account = accounts[int(rng.random() * len(accounts))]
                writer.writerow((journal_id, position, day, account, debit, credit, reference, text))
                total += cents
            written += size
        assert total == 0
        writer.writerow(("", "", "", "Total", "", "", "", ""))
    return (folder / GL_FILE).stat().st_size


# --- the measured children ----------------------------------------------------------------------------------------


def _peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def _baseline(folder: Path) -> int:
    rows = 0
    with (folder / GL_FILE).open(encoding=ENCODING, newline="") as handle:
        for _ in csv.reader(handle, delimiter=";"):
            rows += 1
    return rows


def _import(folder: Path) -> int:
    from countersign.importers.ledger import read_chart, read_gl
    from countersign.importers.mapping import load_mapping

    mapping = load_mapping(folder / MAPPING_FILE)
    chart = read_chart(folder / CHART_FILE, mapping.chart)
    count = 0
    with (folder / OUT_FILE).open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("line_id", "journal_id", "date", "account", "amount", "reference", "description"))
        for line in read_gl(folder / GL_FILE, mapping.gl, chart):
            writer.writerow(
                (
                    line.line_id,
                    line.journal_id,
                    line.line_date.isoformat(),
                    line.account,
                    line.amount,
                    line.reference,
                    line.description,
                )
            )
            count += 1
    return count


def child(phase: str, folder: Path) -> int:
    if phase == "import":
        import countersign.importers.ledger  # noqa: F401 - loaded before the clock starts, as csv is for the baseline
    wall, cpu = time.perf_counter(), time.process_time()
    rows = _baseline(folder) if phase == "baseline" else _import(folder)
    result = {
        "phase": phase,
        "rows": rows,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "peak_rss_mb": _peak_rss_mb(),
    }
    print(json.dumps(result))
    return 0


def _run_child(phase: str, folder: Path) -> dict[str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", phase, "--dir", str(folder)],
        capture_output=True,
        text=True,
        check=False,
        timeout=ABORT_AFTER_SECONDS,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{phase} child failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_wall_s"] = time.perf_counter() - started
    return result


# --- main ---------------------------------------------------------------------------------------------------------


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=1_000_000, help="GL lines in the export (at least 2)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the generated export")
    parser.add_argument("--child", choices=("baseline", "import"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.lines < 2:
        parser.error("--lines must be at least 2 (a journal has two sides)")
    if args.child is not None and args.dir is None:
        parser.error("--child needs --dir")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        return child(args.child, args.dir)
    if hasattr(signal, "alarm"):
        signal.alarm(ABORT_AFTER_SECONDS)
    print(f"python {platform.python_version()} on {platform.machine()}, cpus={_cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="countersign-bench-import-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        size = write_inputs(folder, args.lines, args.seed)
        print(
            f"input: {args.lines:,} GL lines, {size / 1e6:,.1f} MB ({ENCODING}, ';', '1.234,56', Soll/Haben,"
            f" dd.mm.yyyy), written in {time.perf_counter() - started:.1f} s"
        )
        baseline = _run_child("baseline", folder)
        imported = _run_child("import", folder)
        out_size = (folder / OUT_FILE).stat().st_size
    problems: list[str] = []
    if baseline["rows"] != args.lines + 3:  # the title, the header and the Total row
        problems.append(f"baseline counted {baseline['rows']:,} rows, expected {args.lines + 3:,}")
    if imported["rows"] != args.lines:
        problems.append(f"import read {imported['rows']:,} lines, expected {args.lines:,}")
    print(f"{'':10} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} {'lines/s':>12} {'process wall s':>15}")
    for name, result in (("baseline", baseline), ("import", imported)):
        print(
            f"{name:10} {result['wall_s']:8.2f} {result['cpu_s']:8.2f} {result['peak_rss_mb']:12.1f}"
            f" {args.lines / result['wall_s']:12,.0f} {result['process_wall_s']:15.2f}"
        )
    print(f"output: {OUT_FILE} {out_size / 1e6:,.1f} MB")
    print(
        f"ratio import / baseline: wall {imported['wall_s'] / baseline['wall_s']:.1f}x,"
        f" CPU {imported['cpu_s'] / baseline['cpu_s']:.1f}x,"
        f" peak RSS {imported['peak_rss_mb'] / baseline['peak_rss_mb']:.2f}x"
    )
    if imported["peak_rss_mb"] > MAX_IMPORT_RSS_MB:
        problems.append(f"import peak RSS {imported['peak_rss_mb']:.0f} MB > {MAX_IMPORT_RSS_MB} MB: not streaming")
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
