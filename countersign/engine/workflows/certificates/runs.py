"""Payment runs: one run of the `certificates` workflow per submitted certificate, and their status.

A run is a close whose entity is the certificate id and whose period is the certificate's month. Its book set is the
evidence it starts on: a `book_set` row registered for the run (source `construction:<set digest>`, digest = the
certificate's SHA-256, manifest naming the construction set, the certificate and its contract).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from countersign.engine.construction import certificate_record, certificates_in_set, construction_set, contract_record
from countersign.engine.runs import start_close
from countersign.engine.workflows.certificates.queries import insert_run_book_set, payment_run_rows
from countersign.engine.workflows.certificates.stages import WORKFLOW
from countersign.policy import Policy, Workflow

MANIFEST_KIND = "payment_certificate"


class UnknownCertificate(LookupError):
    def __init__(self, set_id: int, certificate_id: str) -> None:
        super().__init__(f"construction set {set_id} has no certificate {certificate_id!r}")
        self.set_id = set_id
        self.certificate_id = certificate_id


class UnknownConstructionSet(LookupError):
    def __init__(self, set_id: int) -> None:
        super().__init__(f"no construction set {set_id}")
        self.set_id = set_id


async def register_run_book_set(conn: AsyncConnection[Any], *, set_id: int, certificate_id: str) -> int:
    """The `book_set` row a certificate's run starts on (registered once; the same one on a second call)."""
    loaded = await construction_set(conn, set_id)
    if loaded is None:
        raise UnknownConstructionSet(set_id)
    record = await certificate_record(conn, set_id, certificate_id)
    if record is None:
        raise UnknownCertificate(set_id, certificate_id)
    contract = await contract_record(conn, set_id, record.contract_id)
    assert contract is not None  # the foreign key holds it
    currency = str(contract.doc.get("currency", ""))
    manifest = {
        "kind": MANIFEST_KIND,
        "construction_set_id": set_id,
        "certificate_id": record.certificate_id,
        "contract_id": record.contract_id,
    }
    return await insert_run_book_set(
        conn,
        entity=record.certificate_id,
        period=record.period,
        currency=currency,
        source=f"construction:{loaded.digest}",
        manifest=manifest,
        digest=record.sha256,
    )


async def start_payment_run(
    conn: AsyncConnection[Any],
    *,
    set_id: int,
    certificate_id: str,
    policy: Policy,
    workflow: Workflow,
    started_by: str,
    versions: dict[str, Any] | None = None,
) -> str:
    """Start the certificate's run (a close of the `certificates` workflow); returns its close id."""
    if workflow.name != WORKFLOW:
        raise ValueError(f"a payment run runs the {WORKFLOW!r} workflow, not {workflow.name!r}")
    book_set_id = await register_run_book_set(conn, set_id=set_id, certificate_id=certificate_id)
    record = await certificate_record(conn, set_id, certificate_id)
    assert record is not None  # register_run_book_set checked it
    return await start_close(
        conn,
        entity=record.certificate_id,
        period=record.period,
        book_set_id=book_set_id,
        policy=policy,
        workflow=workflow,
        started_by=started_by,
        versions={"construction_set_id": set_id, "certificate_sha256": record.sha256, **(versions or {})},
    )


async def start_payment_runs(
    conn: AsyncConnection[Any],
    *,
    set_id: int,
    period: str,
    policy: Policy,
    workflow: Workflow,
    started_by: str,
    versions: dict[str, Any] | None = None,
) -> list[str]:
    """One run per certificate submitted in `period`, in submission order; returns their close ids."""
    if await construction_set(conn, set_id) is None:
        raise UnknownConstructionSet(set_id)
    return [
        await start_payment_run(
            conn,
            set_id=set_id,
            certificate_id=record.certificate_id,
            policy=policy,
            workflow=workflow,
            started_by=started_by,
            versions=versions,
        )
        for record in await certificates_in_set(conn, set_id, period=period)
    ]


async def payment_run_status(
    conn: AsyncConnection[Any], *, set_id: int | None = None, period: str | None = None
) -> list[dict[str, Any]]:
    """Every payment run (of the set and period, when given) in submission order, as the status command shows it."""
    rows = await payment_run_rows(conn, manifest_kind=MANIFEST_KIND, set_id=set_id, period=period)
    return [
        {
            "close_id": row.close_id,
            "certificate_id": row.certificate_id,
            "contract_id": row.contract_id,
            "number": row.number,
            "period": row.period,
            "set_id": row.set_id,
            "status": row.run_status,
            "stage": row.stage or "done",
            "stage_status": row.stage_status or "done",
            "amount_to_certify": row.amount_to_certify,
            "claimed_amount": row.claimed_amount,
            "currency": row.currency,
            "gate": None if row.gate_tier is None else {"tier": row.gate_tier, "status": row.gate_status},
            "escalation": row.escalation,
            "certified": row.certified_amount is not None,
            "certified_amount": None if row.certified_amount is None else str(row.certified_amount),
            "final_date": row.final_date,
            "postponed_final_date": None if row.postponed_final_date is None else row.postponed_final_date.isoformat(),
        }
        for row in rows
    ]
