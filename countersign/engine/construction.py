"""The construction evidence tables: loading a construction data directory, and reading contracts and certificates.

`load_construction_set` reads `contracts.json` and `certificates.jsonl` (the files `countersign synth --profile
construction` writes) and parses every record with the domain's own parsers before anything is written: a bad
record fails naming the file, the line or record and the field, and nothing is loaded. The same files loaded twice
give the same set. Loaded rows never change (migration 0014).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.audit.trace import append_event, seal_pending
from countersign.certificates import Certificate, CertificateDataError, Contract, parse_certificate, parse_contract
from countersign.engine.actors import ENGINE_ACTOR
from countersign.states import TraceKind

CONTRACTS_FILE = "contracts.json"
CERTIFICATES_FILE = "certificates.jsonl"
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_RECORD_BYTES = 1024 * 1024


class ConstructionDataError(ValueError):
    """A construction file is unreadable or holds a bad record: `source` names file and line or record."""

    def __init__(self, source: str, field: str, reason: str) -> None:
        super().__init__(f"{source}: {field}: {reason}")
        self.source = source
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class ContractRecord:
    contract_id: str
    form: str
    doc: dict[str, Any]
    sha256: str

    def parsed(self) -> Contract:
        return parse_contract(self.doc)


@dataclass(frozen=True)
class CertificateRecord:
    certificate_id: str
    contract_id: str
    number: int
    period: str
    submitted_on: date
    doc: dict[str, Any]
    sha256: str

    def parsed(self) -> Certificate:
        return parse_certificate(self.doc)


@dataclass(frozen=True)
class ConstructionSet:
    set_id: int
    source: str
    digest: str
    loaded_by: str


def record_sha256(doc: Mapping[str, Any]) -> str:
    """SHA-256 of a record's canonical JSON (sorted keys, no whitespace, UTF-8)."""
    canonical = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise ConstructionDataError(path.name, "(file)", "is missing")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConstructionDataError(path.name, "(file)", f"{size} bytes, more than {MAX_FILE_BYTES}")
        return path.read_bytes()
    except OSError as exc:
        raise ConstructionDataError(path.name, "(file)", f"cannot read: {exc.strerror or exc}") from None


def _decode(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConstructionDataError(f"{source} line {line}", "(encoding)", "not valid UTF-8") from None


def read_contracts(raw: bytes) -> list[tuple[ContractRecord, Contract]]:
    """Every contract of contracts.json, parsed; the error names the record index and the field."""
    try:
        document = json.loads(_decode(raw, CONTRACTS_FILE))
    except json.JSONDecodeError as exc:
        raise ConstructionDataError(f"{CONTRACTS_FILE} line {exc.lineno}", "(json)", exc.msg) from None
    items = document.get("contracts") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise ConstructionDataError(CONTRACTS_FILE, "contracts", "expected a list of contracts")
    parsed: list[tuple[ContractRecord, Contract]] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        source = f"{CONTRACTS_FILE} contracts[{index}]"
        try:
            contract = parse_contract(item)
        except CertificateDataError as bad:
            raise ConstructionDataError(source, bad.field, f"{bad.record}: {bad.reason}") from None
        if contract.id in seen:
            raise ConstructionDataError(source, "id", f"contract {contract.id} is listed twice")
        seen.add(contract.id)
        parsed.append((ContractRecord(contract.id, contract.form, item, record_sha256(item)), contract))
    return parsed


def read_certificates(raw: bytes, contracts: Mapping[str, Contract]) -> list[tuple[CertificateRecord, Certificate]]:
    """Every certificate of certificates.jsonl, parsed; the error names the line and the field."""
    parsed: list[tuple[CertificateRecord, Certificate]] = []
    seen: set[str] = set()
    for line_no, line in enumerate(_decode(raw, CERTIFICATES_FILE).splitlines(), start=1):
        if not line.strip():
            continue
        source = f"{CERTIFICATES_FILE} line {line_no}"
        if len(line) > MAX_RECORD_BYTES:
            raise ConstructionDataError(source, "(record)", f"longer than {MAX_RECORD_BYTES} characters")
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConstructionDataError(source, "(json)", exc.msg) from None
        try:
            certificate = parse_certificate(doc)
        except CertificateDataError as bad:
            raise ConstructionDataError(source, bad.field, f"{bad.record}: {bad.reason}") from None
        if certificate.id in seen:
            raise ConstructionDataError(source, "id", f"certificate {certificate.id} is listed twice")
        if certificate.contract not in contracts:
            raise ConstructionDataError(source, "contract", f"{certificate.contract!r} is not in {CONTRACTS_FILE}")
        seen.add(certificate.id)
        record = CertificateRecord(
            certificate_id=certificate.id,
            contract_id=certificate.contract,
            number=certificate.number,
            period=certificate.period,
            submitted_on=certificate.date,
            doc=doc,
            sha256=record_sha256(doc),
        )
        parsed.append((record, certificate))
    return parsed


async def load_construction_set(conn: AsyncConnection[Any], data_dir: Path, *, loaded_by: str) -> int:
    """Load a construction data directory in one transaction; the same files loaded again return the same set id."""
    contracts_raw = _read_bytes(data_dir / CONTRACTS_FILE)
    certificates_raw = _read_bytes(data_dir / CERTIFICATES_FILE)
    return await load_construction_files(
        conn, contracts_raw, certificates_raw, source=data_dir.name, loaded_by=loaded_by
    )


async def load_construction_files(
    conn: AsyncConnection[Any], contracts_raw: bytes, certificates_raw: bytes, *, source: str, loaded_by: str
) -> int:
    """Load the two files' contents (contracts.json, certificates.jsonl) in one transaction, under the same
    constraints as a directory; `source` names the set (a directory's or a pay application's name)."""
    contracts = read_contracts(contracts_raw)
    certificates = read_certificates(certificates_raw, {contract.id: contract for _, contract in contracts})
    digest = hashlib.sha256(
        json.dumps(
            {
                CONTRACTS_FILE: hashlib.sha256(contracts_raw).hexdigest(),
                CERTIFICATES_FILE: hashlib.sha256(certificates_raw).hexdigest(),
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()
    async with conn.transaction():
        existing = await _set_with_digest(conn, digest)
        if existing is not None:
            return existing
        async with conn.cursor(row_factory=scalar_row) as cur:
            await cur.execute(
                "INSERT INTO construction_set (source, digest, loaded_by) VALUES (%s, %s, %s)"
                " ON CONFLICT (digest) DO NOTHING RETURNING set_id",
                (source[:200] or "construction", digest, loaded_by),
            )
            inserted: int | None = await cur.fetchone()
        if inserted is None:  # a concurrent load of the same files won
            raced = await _set_with_digest(conn, digest)
            assert raced is not None
            return raced
        set_id = inserted
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO construction_contract (set_id, contract_id, form, doc, sha256)"
                " VALUES (%s, %s, %s, %s, %s)",
                [(set_id, r.contract_id, r.form, Jsonb(r.doc), r.sha256) for r, _ in contracts],
            )
            await cur.executemany(
                "INSERT INTO construction_certificate (set_id, certificate_id, contract_id, number, period,"
                " submitted_on, doc, sha256) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        set_id,
                        r.certificate_id,
                        r.contract_id,
                        r.number,
                        r.period,
                        r.submitted_on,
                        Jsonb(r.doc),
                        r.sha256,
                    )
                    for r, _ in certificates
                ],
            )
        await append_event(
            conn,
            actor=ENGINE_ACTOR,
            kind=TraceKind.CONSTRUCTION_SET_LOADED,
            payload={
                "loaded_by": loaded_by,
                "set_id": set_id,
                "digest": digest,
                "contracts": len(contracts),
                "certificates": len(certificates),
            },
        )
    await seal_pending(conn)
    return set_id


async def _set_with_digest(conn: AsyncConnection[Any], digest: str) -> int | None:
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT set_id FROM construction_set WHERE digest = %s", (digest,))
        found: int | None = await cur.fetchone()
    return found


async def latest_set_for_period(conn: AsyncConnection[Any], period: str) -> int | None:
    """The most recently loaded construction set with a certificate submitted in `period`, if any."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT max(set_id) FROM construction_certificate WHERE period = %s",
            (period,),
        )
        found: int | None = await cur.fetchone()
    return found


async def construction_set(conn: AsyncConnection[Any], set_id: int) -> ConstructionSet | None:
    async with conn.cursor(row_factory=class_row(ConstructionSet)) as cur:
        await cur.execute("SELECT set_id, source, digest, loaded_by FROM construction_set WHERE set_id = %s", (set_id,))
        return await cur.fetchone()


_CERTIFICATE_COLUMNS = "certificate_id, contract_id, number, period, submitted_on, doc, sha256"
# Submission order: the date on the certificate, then contract, number and id (countersign.certificates.pipeline).
_SUBMISSION_ORDER = "submitted_on, contract_id, number, certificate_id"


async def contract_record(conn: AsyncConnection[Any], set_id: int, contract_id: str) -> ContractRecord | None:
    async with conn.cursor(row_factory=class_row(ContractRecord)) as cur:
        await cur.execute(
            "SELECT contract_id, form, doc, sha256 FROM construction_contract WHERE set_id = %s AND contract_id = %s",
            (set_id, contract_id),
        )
        return await cur.fetchone()


async def contract_records(conn: AsyncConnection[Any], set_id: int) -> list[ContractRecord]:
    async with conn.cursor(row_factory=class_row(ContractRecord)) as cur:
        await cur.execute(
            "SELECT contract_id, form, doc, sha256 FROM construction_contract WHERE set_id = %s ORDER BY contract_id",
            (set_id,),
        )
        return await cur.fetchall()


async def certificate_record(conn: AsyncConnection[Any], set_id: int, certificate_id: str) -> CertificateRecord | None:
    async with conn.cursor(row_factory=class_row(CertificateRecord)) as cur:
        await cur.execute(
            f"SELECT {_CERTIFICATE_COLUMNS} FROM construction_certificate WHERE set_id = %s AND certificate_id = %s",
            (set_id, certificate_id),
        )
        return await cur.fetchone()


async def certificates_in_set(
    conn: AsyncConnection[Any], set_id: int, *, period: str | None = None
) -> list[CertificateRecord]:
    """The set's certificates (of `period` only, when given), in submission order."""
    async with conn.cursor(row_factory=class_row(CertificateRecord)) as cur:
        await cur.execute(
            f"SELECT {_CERTIFICATE_COLUMNS} FROM construction_certificate"
            f" WHERE set_id = %s AND (%s::text IS NULL OR period = %s) ORDER BY {_SUBMISSION_ORDER}",
            (set_id, period, period),
        )
        return await cur.fetchall()


async def prior_certificates(
    conn: AsyncConnection[Any], set_id: int, certificate_id: str, *, contract_id: str | None = None
) -> list[CertificateRecord]:
    """Every certificate submitted before this one in the set (of `contract_id` only, when given), in submission
    order. Raises LookupError when the set has no such certificate."""
    target = await certificate_record(conn, set_id, certificate_id)
    if target is None:
        raise LookupError(f"construction set {set_id} has no certificate {certificate_id!r}")
    async with conn.cursor(row_factory=class_row(CertificateRecord)) as cur:
        await cur.execute(
            f"SELECT {_CERTIFICATE_COLUMNS} FROM construction_certificate"
            f" WHERE set_id = %s AND (%s::text IS NULL OR contract_id = %s)"
            f"   AND ({_SUBMISSION_ORDER}) < (%s, %s, %s, %s) ORDER BY {_SUBMISSION_ORDER}",
            (
                set_id,
                contract_id,
                contract_id,
                target.submitted_on,
                target.contract_id,
                target.number,
                target.certificate_id,
            ),
        )
        return await cur.fetchall()
