"""Payment runs: one run of the `certificates` workflow per submitted certificate, and their status.

A run is a close whose entity is the certificate id and whose period is the certificate's month. Its book set is the
evidence it starts on: a `book_set` row registered for the run (source `construction:<set digest>`, digest = the
certificate's SHA-256, manifest naming the construction set, the certificate and its contract).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from engine.construction import certificate_record, certificates_in_set, construction_set, contract_record
from engine.runs import start_close
from engine.workflows.certificates.stages import RECONSTRUCTION, STAGES, WORKFLOW
from policy import Policy, Workflow

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
    async with conn.transaction(), conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (entity, period, digest) DO NOTHING RETURNING book_set_id",
            (
                record.certificate_id,
                record.period,
                currency,
                f"construction:{loaded.digest}",
                Jsonb(manifest),
                record.sha256,
            ),
        )
        inserted: int | None = await cur.fetchone()
        if inserted is not None:
            return inserted
        await cur.execute(
            "SELECT book_set_id FROM book_set WHERE entity = %s AND period = %s AND digest = %s",
            (record.certificate_id, record.period, record.sha256),
        )
        found: int | None = await cur.fetchone()
    assert found is not None
    return found


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


@dataclass(frozen=True)
class PaymentRunRow:
    close_id: str
    certificate_id: str
    contract_id: str
    number: int
    period: str
    set_id: int
    run_status: str
    stage: str | None
    stage_status: str | None
    amount_to_certify: str | None
    currency: str
    gate_tier: str | None
    gate_status: str | None
    escalation: str | None
    certified_amount: Decimal | None


STATUS_QUERY = """
SELECT r.close_id::text, r.entity AS certificate_id, c.contract_id, c.number, r.period,
       (b.manifest->>'construction_set_id')::bigint AS set_id, r.status AS run_status,
       stage.task AS stage, stage.status AS stage_status,
       recon.result->>'amount_to_certify' AS amount_to_certify, b.currency::text AS currency,
       gate.tier AS gate_tier, gate.status AS gate_status,
       (SELECT t.escalation FROM close_task t WHERE t.close_id = r.close_id AND t.escalation IS NOT NULL
         ORDER BY t.updated_at LIMIT 1) AS escalation,
       p.amount AS certified_amount
  FROM close_run r
  JOIN book_set b ON b.book_set_id = r.book_set_id AND b.manifest->>'kind' = %(kind)s
  JOIN construction_certificate c
    ON c.set_id = (b.manifest->>'construction_set_id')::bigint AND c.certificate_id = r.entity
  LEFT JOIN close_task recon ON recon.close_id = r.close_id AND recon.task = %(reconstruction)s
  LEFT JOIN LATERAL (
      SELECT t.task, t.status FROM close_task t
       WHERE t.close_id = r.close_id AND t.status <> 'done'
       ORDER BY array_position(%(stages)s::text[], t.task) LIMIT 1) stage ON true
  LEFT JOIN LATERAL (
      SELECT s.tier, s.status FROM gate_state s JOIN gate g USING (gate_id)
       WHERE s.close_id = r.close_id ORDER BY g.opened_at DESC, s.gate_id LIMIT 1) gate ON true
  LEFT JOIN payment_certification p ON p.certificate_id = r.entity AND p.close_id = r.close_id
 WHERE r.workflow = %(workflow)s
   AND (%(set_id)s::bigint IS NULL OR (b.manifest->>'construction_set_id')::bigint = %(set_id)s::bigint)
   AND (%(period)s::text IS NULL OR r.period = %(period)s::text)
 ORDER BY c.submitted_on, c.contract_id, c.number, c.certificate_id
"""


async def payment_run_status(
    conn: AsyncConnection[Any], *, set_id: int | None = None, period: str | None = None
) -> list[dict[str, Any]]:
    """Every payment run (of the set and period, when given) in submission order, as the status command shows it."""
    async with conn.cursor(row_factory=class_row(PaymentRunRow)) as cur:
        await cur.execute(
            STATUS_QUERY,
            {
                "kind": MANIFEST_KIND,
                "stages": list(STAGES),
                "reconstruction": RECONSTRUCTION,
                "workflow": WORKFLOW,
                "set_id": set_id,
                "period": period,
            },
        )
        rows = await cur.fetchall()
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
            "currency": row.currency,
            "gate": None if row.gate_tier is None else {"tier": row.gate_tier, "status": row.gate_status},
            "escalation": row.escalation,
            "certified": row.certified_amount is not None,
            "certified_amount": None if row.certified_amount is None else str(row.certified_amount),
        }
        for row in rows
    ]
