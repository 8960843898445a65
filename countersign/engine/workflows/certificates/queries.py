"""The certificates workflow's reads and writes, with the workflow's own words filled in; the SQL is in
countersign/store/certificate_runs.py.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.engine.workflows.certificates.stages import RECONSTRUCTION, STAGES, WORKFLOW
from countersign.store.books import insert_run_book_set
from countersign.store.certificate_runs import (
    PaymentRunRow,
    RunManifest,
    approval_gate_id,
    insert_certification,
    run_manifest,
)
from countersign.store.certificate_runs import payment_run_rows as _payment_run_rows

__all__ = [
    "PaymentRunRow",
    "RunManifest",
    "approval_gate_id",
    "insert_certification",
    "insert_run_book_set",
    "payment_run_rows",
    "run_manifest",
]


async def payment_run_rows(
    conn: AsyncConnection[Any], *, manifest_kind: str, set_id: int | None, period: str | None
) -> list[PaymentRunRow]:
    """Every payment run of the certificates workflow (of the set and period, when given) in submission order."""
    return await _payment_run_rows(
        conn,
        manifest_kind=manifest_kind,
        workflow=WORKFLOW,
        stages=STAGES,
        reconstruction=RECONSTRUCTION,
        set_id=set_id,
        period=period,
    )
