"""Pay application files -> the certificates' JSON records, each with where its figures came from.

A CSV file holds one certificate, an XLSX workbook one per sheet titled 'Payment application', a text PDF one.
Any other extension is refused before anything is read. Every certificate names a contract of `contracts` (read by
the caller from contracts.json), and no certificate id may appear twice across the files given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from countersign.applications.errors import ApplicationError
from countersign.applications.pdf import pdf_rows
from countersign.applications.spreadsheets import csv_rows, xlsx_sheets
from countersign.applications.tabular import certificate_record
from countersign.certificates import Contract

MAX_FILE_BYTES = 64 * 1024 * 1024


class ApplicationFormat(StrEnum):
    CSV = ".csv"
    XLSX = ".xlsx"
    PDF = ".pdf"


def application_format(path: Path) -> ApplicationFormat | None:
    try:
        return ApplicationFormat(path.suffix.lower())
    except ValueError:
        return None


@dataclass(frozen=True)
class ReadCertificate:
    file: str
    record: dict[str, Any]
    """The JSON record `certificates.parse_certificate` takes, `sources` included."""

    @property
    def certificate_id(self) -> str:
        return str(self.record["id"])


def _read_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ApplicationError(path.name, "", "(file)", f"{size} bytes, more than {MAX_FILE_BYTES}")
        return path.read_bytes()
    except FileNotFoundError:
        raise ApplicationError(path.name, "", "(file)", "is missing") from None
    except OSError as exc:
        raise ApplicationError(path.name, "", "(file)", f"cannot read: {exc.strerror or exc}") from None


def read_application_file(path: Path, contracts: Mapping[str, Contract]) -> list[ReadCertificate]:
    """Every certificate in one file; ApplicationError names the file, the row (or sheet and row, or page), the
    field."""
    kind = application_format(path)
    if kind is None:
        known = ", ".join(member.value for member in ApplicationFormat)
        raise ApplicationError(
            path.name, "", "(file)", f"expected a {known} file, got {path.suffix or 'no extension'!r}"
        )
    raw = _read_bytes(path)
    if not raw.strip():
        raise ApplicationError(path.name, "", "(file)", "is empty: no pay application in it")
    if kind == ApplicationFormat.CSV:
        rows = csv_rows(path, raw)
        return [ReadCertificate(path.name, certificate_record(rows, file=path.name, extent="", contracts=contracts))]
    if kind == ApplicationFormat.XLSX:
        return [
            ReadCertificate(
                path.name, certificate_record(rows, file=path.name, extent=f"sheet {sheet}", contracts=contracts)
            )
            for sheet, rows in xlsx_sheets(path, raw)
        ]
    rows, extent = pdf_rows(path, raw)
    return [ReadCertificate(path.name, certificate_record(rows, file=path.name, extent=extent, contracts=contracts))]


def read_application_files(
    paths: Iterable[Path], contracts: Mapping[str, Contract], *, on_file: Callable[[str], None] | None = None
) -> list[ReadCertificate]:
    """Every certificate in every file, in the files' order; the same certificate id twice is refused naming both."""
    found: list[ReadCertificate] = []
    first_seen: dict[str, str] = {}
    for path in paths:
        for read in read_application_file(path, contracts):
            where = read.record["sources"].get("id", read.file)
            if read.certificate_id in first_seen:
                raise ApplicationError(
                    read.file,
                    where.removeprefix(f"{read.file}, "),
                    "Certificate",
                    f"certificate {read.certificate_id} is also in {first_seen[read.certificate_id]}",
                )
            first_seen[read.certificate_id] = where
            found.append(read)
        if on_file is not None:
            on_file(path.name)
    return found


def certificates_jsonl(records: Iterable[Mapping[str, Any]]) -> bytes:
    """The records as certificates.jsonl: one canonical JSON object a line (sorted keys, UTF-8)."""
    return b"".join(
        json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        for record in records
    )
