"""What `payments load` and `payments check` read, whichever door asks: a construction data directory in the
documented JSON format, or pay applications as people send them (CSV, XLSX, text PDF), with their contracts.

PATH is one of:
- a directory: its contracts.json, its certificates.jsonl when there is one, and every .csv, .xlsx and .pdf in it
  (other files, like the generator's ground_truth.json, are not read);
- a certificates.jsonl file, or one .csv, .xlsx or .pdf pay application, with the contracts.json beside it.
`contracts_file` replaces the contracts.json found by PATH. Everything is read and parsed before anything is
loaded; the result is the two files a construction set is made of, so a load goes through
`countersign.engine.construction.load_construction_files` under the same constraints as a directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from countersign.applications import ApplicationError, application_format, certificates_jsonl, read_application_files
from countersign.certificates import Certificate, Contract
from countersign.engine.construction import (
    CERTIFICATES_FILE,
    CONTRACTS_FILE,
    MAX_FILE_BYTES,
    ConstructionDataError,
    read_certificates,
    read_contracts,
)

INPUT_ERRORS: tuple[type[Exception], ...] = (ApplicationError, ConstructionDataError)
"""A refusal of the input: one line naming the file, the row (or sheet and row, or page) and the field."""


@dataclass(frozen=True)
class ConstructionInput:
    source: str
    """The set's name: the directory's or the file's."""
    contracts_raw: bytes
    certificates_raw: bytes
    files: tuple[str, ...]
    """The names of the files read, in order."""


@dataclass(frozen=True)
class ParsedConstruction:
    contracts: dict[str, Contract]
    certificates: tuple[Certificate, ...]


def _read(path: Path, hint: str = "") -> bytes:
    if not path.is_file():
        raise ConstructionDataError(path.name, "(file)", f"is missing{hint}")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConstructionDataError(path.name, "(file)", f"{size} bytes, more than {MAX_FILE_BYTES}")
        return path.read_bytes()
    except OSError as exc:
        raise ConstructionDataError(path.name, "(file)", f"cannot read: {exc.strerror or exc}") from None


def read_construction_input(
    path: Path, *, contracts_file: Path | None = None, on_file: Callable[[str], None] | None = None
) -> ConstructionInput:
    """PATH's contracts and certificates as the two files' contents; a bad file raises one of INPUT_ERRORS."""
    if not path.exists():
        raise ConstructionDataError(path.name or str(path), "(path)", "does not exist")
    if path.is_dir():
        contracts_path = contracts_file or path / CONTRACTS_FILE
        jsonl: Path | None = path / CERTIFICATES_FILE if (path / CERTIFICATES_FILE).is_file() else None
        applications = sorted(p for p in path.iterdir() if p.is_file() and application_format(p) is not None)
        if jsonl is None and not applications:
            raise ConstructionDataError(
                path.name, "(directory)", f"holds no {CERTIFICATES_FILE} and no .csv, .xlsx or .pdf pay application"
            )
    else:
        contracts_path = contracts_file or path.parent / CONTRACTS_FILE
        jsonl = path if path.suffix.lower() == ".jsonl" else None
        applications = [] if jsonl is not None else [path]
    hint = "" if contracts_file else f" (beside {path.name}; or pass --contracts FILE)"
    contracts_raw = _read(contracts_path, hint)
    try:
        contracts = {contract.id: contract for _, contract in read_contracts(contracts_raw)}
    except ConstructionDataError as bad:  # the reader names the file by its role; name the one given
        source = bad.source.replace(CONTRACTS_FILE, contracts_path.name, 1)
        raise ConstructionDataError(source, bad.field, bad.reason) from None
    files = [contracts_path.name]
    certificates_raw = b""
    listed: set[str] = set()
    if jsonl is not None:
        certificates_raw = _read(jsonl)
        listed = {record.certificate_id for record, _ in read_certificates(certificates_raw, contracts)}
        files.append(jsonl.name)
        if on_file is not None:
            on_file(jsonl.name)
    if applications:
        reads = read_application_files(applications, contracts, on_file=on_file)
        for read in reads:
            if read.certificate_id in listed:
                where = read.record["sources"].get("id", read.file).removeprefix(f"{read.file}, ")
                raise ApplicationError(
                    read.file, where, "Certificate", f"certificate {read.certificate_id} is also in {CERTIFICATES_FILE}"
                )
        if certificates_raw and not certificates_raw.endswith(b"\n"):
            certificates_raw += b"\n"
        certificates_raw += certificates_jsonl(read.record for read in reads)
        files += [p.name for p in applications]
    return ConstructionInput(
        source=path.name or "construction",
        contracts_raw=contracts_raw,
        certificates_raw=certificates_raw,
        files=tuple(files),
    )


def parse_construction_input(construction: ConstructionInput) -> ParsedConstruction:
    """The contracts and certificates, parsed by the domain's parsers as a load parses them."""
    contracts = {contract.id: contract for _, contract in read_contracts(construction.contracts_raw)}
    certificates = tuple(certificate for _, certificate in read_certificates(construction.certificates_raw, contracts))
    return ParsedConstruction(contracts, certificates)
