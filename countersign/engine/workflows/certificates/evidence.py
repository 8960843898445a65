"""What a payment run reads: its certificate and contract as loaded, the set they came from, earlier stages' results.

A run's book set names its evidence (`countersign/engine/workflows/certificates/runs.py`); every stage reads it from
there, never
from a file, so each stage sees exactly the records the run started on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection

from countersign.certificates import Certificate, Contract
from countersign.engine.construction import CertificateRecord, ContractRecord, certificate_record, contract_record
from countersign.engine.runs import task_rows
from countersign.engine.workflows.base import TaskContext
from countersign.engine.workflows.certificates.queries import run_manifest
from countersign.engine.workflows.certificates.stages import STAGES

CENT = Decimal("0.01")


class RunEvidenceMissing(LookupError):
    """The run's book set does not name loaded construction evidence (not a payment run, or a broken one)."""


@dataclass(frozen=True)
class RunEvidence:
    set_id: int
    certificate_record: CertificateRecord
    contract_record: ContractRecord
    certificate: Certificate
    contract: Contract


async def run_evidence(conn: AsyncConnection[Any], tc: TaskContext) -> RunEvidence:
    """The certificate and contract the run started on, parsed by the domain."""
    manifest = await run_manifest(conn, tc.close.book_set_id)
    set_id, certificate_id = manifest.get("construction_set_id"), manifest.get("certificate_id")
    if not isinstance(set_id, int) or not isinstance(certificate_id, str):
        raise RunEvidenceMissing(f"run {tc.close.close_id}: its book set names no construction certificate")
    certificate = await certificate_record(conn, set_id, certificate_id)
    if certificate is None:
        raise RunEvidenceMissing(f"construction set {set_id} has no certificate {certificate_id!r}")
    contract = await contract_record(conn, set_id, certificate.contract_id)
    if contract is None:
        raise RunEvidenceMissing(f"construction set {set_id} has no contract {certificate.contract_id!r}")
    return RunEvidence(set_id, certificate, contract, certificate.parsed(), contract.parsed())


async def stage_results(conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Mapping[str, Any]]:
    """The recorded result of every earlier stage of this run that has one."""
    rows = await task_rows(conn, tc.close.close_id)
    return {task: row.result for task, row in rows.items() if row.result is not None}


async def run_escalation(conn: AsyncConnection[Any], tc: TaskContext) -> str | None:
    """The first escalation recorded on any stage of the run, in stage order (a person has looked at it)."""
    if tc.escalation is not None:
        return tc.escalation.value
    rows = await task_rows(conn, tc.close.close_id)
    for stage in STAGES:
        row = rows.get(stage)
        if row is not None and row.escalation:
            return row.escalation
    return None


def money(minor: int) -> str:
    """Integer minor units as a decimal string with two places."""
    return f"{Decimal(minor).scaleb(-2):.2f}"


def decimal_text(amount: Decimal) -> str:
    return f"{amount.quantize(CENT):.2f}"
