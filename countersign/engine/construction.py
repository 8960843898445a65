"""The construction evidence tables: loading a construction data directory, and reading contracts and certificates.

`load_construction_set` reads `contracts.json` and `certificates.jsonl` (the files `countersign synth --profile
construction` writes) and parses every record with the domain's own parsers before anything is written: a bad
record fails naming the file, the line or record and the field, and nothing is loaded. The same files loaded twice
give the same set. Loaded rows never change (migration 0014). The statements are `countersign.store.construction`'s,
run in this module's transaction; the rows and reads are re-exported here for the workflow, the board and the
services.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection

from countersign.audit.trace import append_event, seal_pending
from countersign.certificates import Certificate, CertificateDataError, Contract, parse_certificate, parse_contract
from countersign.engine.actors import ENGINE_ACTOR
from countersign.money.units import DEFAULT_MINOR_UNITS, minor_units
from countersign.store import construction as store
from countersign.store.construction import (
    CertificateRecord,
    ConstructionSet,
    ContractRecord,
    certificate_record,
    certificates_in_set,
    construction_set,
    contract_record,
    contract_records,
    latest_set_for_period,
)

__all__ = [  # the store's rows and reads, as the workflow, the board and the services read them
    "CertificateRecord",
    "ConstructionSet",
    "ContractRecord",
    "certificate_record",
    "certificates_in_set",
    "construction_set",
    "contract_record",
    "contract_records",
    "latest_set_for_period",
]
from countersign.states import TraceKind

CONTRACTS_FILE = "contracts.json"
CERTIFICATES_FILE = "certificates.jsonl"
MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_RECORD_BYTES = 1024 * 1024

ENGINE_PLACES = DEFAULT_MINOR_UNITS
"""The decimal places the payment workflow's stored evidence, reconstruction summary and books are written to; a
contract in a currency with other minor units is refused when a set is loaded (`read_contracts`)."""


class ConstructionDataError(ValueError):
    """A construction file is unreadable or holds a bad record: `source` names file and line or record."""

    def __init__(self, source: str, field: str, reason: str) -> None:
        super().__init__(f"{source}: {field}: {reason}")
        self.source = source
        self.field = field
        self.reason = reason


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
        places = minor_units(contract.currency)
        if places != ENGINE_PLACES:
            raise ConstructionDataError(
                source,
                "currency",
                f"contract {contract.id}: {contract.currency} is written to {places} decimal places; the certificate"
                f" domain values it, but the payment workflow's evidence and books still write {ENGINE_PLACES} places,"
                " so its certificates are not loaded",
            )
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
            own = contracts.get(str(doc.get("contract"))) if isinstance(doc, dict) else None
            certificate = parse_certificate(doc, currency=None if own is None else own.currency)
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
        existing = await store.set_with_digest(conn, digest)
        if existing is not None:
            return existing
        inserted = await store.insert_set(
            conn, source=source[:200] or "construction", digest=digest, loaded_by=loaded_by
        )
        if inserted is None:  # a concurrent load of the same files won
            raced = await store.set_with_digest(conn, digest)
            assert raced is not None
            return raced
        set_id = inserted
        await store.insert_records(conn, set_id, [r for r, _ in contracts], [r for r, _ in certificates])
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


async def prior_certificates(
    conn: AsyncConnection[Any], set_id: int, certificate_id: str, *, contract_id: str | None = None
) -> list[CertificateRecord]:
    """Every certificate submitted before this one in the set (of `contract_id` only, when given), in submission
    order. Raises LookupError when the set has no such certificate."""
    target = await certificate_record(conn, set_id, certificate_id)
    if target is None:
        raise LookupError(f"construction set {set_id} has no certificate {certificate_id!r}")
    return await store.certificates_before(conn, set_id, target, contract_id=contract_id)
