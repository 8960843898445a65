"""The construction evidence tables (migration 0014): `construction_set`, `construction_contract` and
`construction_certificate`, written once per set and read back in submission order.

Writes a set and its records (the rows never change once loaded: the database refuses an update); reads a set, its
contracts and its certificates. Called by countersign/engine/construction.py, which reads and parses the files,
checks every record before anything is written, and owns the transaction a load runs in (one set per digest: a
concurrent load of the same files inserts nothing here and reads the winner's set); the certificates workflow
(countersign/engine/workflows/certificates/), the board's reads and the services read these rows through it. Every
function runs on the caller's connection, in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.certificates import Certificate, Contract, parse_certificate, parse_contract


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


# --- loading a set -------------------------------------------------------------------------------------------------


async def set_with_digest(conn: AsyncConnection[Any], digest: str) -> int | None:
    """The set loaded from the files with this digest, or None."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT set_id FROM construction_set WHERE digest = %s", (digest,))
        found: int | None = await cur.fetchone()
    return found


async def insert_set(conn: AsyncConnection[Any], *, source: str, digest: str, loaded_by: str) -> int | None:
    """Insert the set; returns its id, or None when a set with this digest exists already (another load won)."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO construction_set (source, digest, loaded_by) VALUES (%s, %s, %s)"
            " ON CONFLICT (digest) DO NOTHING RETURNING set_id",
            (source, digest, loaded_by),
        )
        inserted: int | None = await cur.fetchone()
    return inserted


async def insert_records(
    conn: AsyncConnection[Any],
    set_id: int,
    contracts: Sequence[ContractRecord],
    certificates: Sequence[CertificateRecord],
) -> None:
    """Insert the set's contracts, then its certificates, each in one batch."""
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO construction_contract (set_id, contract_id, form, doc, sha256) VALUES (%s, %s, %s, %s, %s)",
            [(set_id, r.contract_id, r.form, Jsonb(r.doc), r.sha256) for r in contracts],
        )
        await cur.executemany(
            "INSERT INTO construction_certificate (set_id, certificate_id, contract_id, number, period,"
            " submitted_on, doc, sha256) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (set_id, r.certificate_id, r.contract_id, r.number, r.period, r.submitted_on, Jsonb(r.doc), r.sha256)
                for r in certificates
            ],
        )


# --- reading a set -------------------------------------------------------------------------------------------------


async def latest_set_for_period(conn: AsyncConnection[Any], period: str) -> int | None:
    """The most recently loaded construction set with a certificate submitted in `period`, if any."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute("SELECT max(set_id) FROM construction_certificate WHERE period = %s", (period,))
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
    """The set's contracts, by contract id."""
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


async def certificates_before(
    conn: AsyncConnection[Any], set_id: int, target: CertificateRecord, *, contract_id: str | None = None
) -> list[CertificateRecord]:
    """Every certificate of the set submitted before `target` (of `contract_id` only, when given), in submission
    order."""
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
