"""The certificates workflow's own SQL: its runs' book sets, their status, the manifest a stage reads, certification.

Like `countersign/engine/workflows/close/queries.py`: each function returns named rows or plain values, never a
positional row.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row
from psycopg.types.json import Jsonb

from countersign.engine.workflows.certificates.stages import RECONSTRUCTION, STAGES, WORKFLOW


async def insert_run_book_set(
    conn: AsyncConnection[Any],
    *,
    entity: str,
    period: str,
    currency: str,
    source: str,
    manifest: dict[str, Any],
    digest: str,
) -> int:
    """The run's `book_set` id: inserted once, the same row on a second call."""
    async with conn.transaction(), conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "INSERT INTO book_set (entity, period, currency, source, manifest, digest)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (entity, period, digest) DO NOTHING RETURNING book_set_id",
            (entity, period, currency, source, Jsonb(manifest), digest),
        )
        inserted: int | None = await cur.fetchone()
        if inserted is not None:
            return inserted
        await cur.execute(
            "SELECT book_set_id FROM book_set WHERE entity = %s AND period = %s AND digest = %s",
            (entity, period, digest),
        )
        found: int | None = await cur.fetchone()
    assert found is not None
    return found


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
    """What the payment gate proposes to certify (the claim, or the reconstructed sum); the claim before a gate."""
    claimed_amount: str | None
    currency: str
    gate_tier: str | None
    gate_status: str | None
    escalation: str | None
    certified_amount: Decimal | None


STATUS_QUERY = """
SELECT r.close_id::text, r.entity AS certificate_id, c.contract_id, c.number, r.period,
       (b.manifest->>'construction_set_id')::bigint AS set_id, r.status AS run_status,
       stage.task AS stage, stage.status AS stage_status,
       COALESCE(pay.summary #>> '{certificate,amount_to_certify}', recon.result->>'amount_to_certify')
           AS amount_to_certify,
       COALESCE(recon.result->>'claimed_amount', recon.result->>'amount_to_certify') AS claimed_amount,
       b.currency::text AS currency,
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
  LEFT JOIN LATERAL (
      SELECT g.summary FROM gate g
       WHERE g.close_id = r.close_id AND g.task = 'payment' AND g.kind = 'approval'
       ORDER BY g.attempt DESC LIMIT 1) pay ON true
  LEFT JOIN payment_certification p ON p.certificate_id = r.entity AND p.close_id = r.close_id
 WHERE r.workflow = %(workflow)s
   AND (%(set_id)s::bigint IS NULL OR (b.manifest->>'construction_set_id')::bigint = %(set_id)s::bigint)
   AND (%(period)s::text IS NULL OR r.period = %(period)s::text)
 ORDER BY c.submitted_on, c.contract_id, c.number, c.certificate_id
"""


async def payment_run_rows(
    conn: AsyncConnection[Any], *, manifest_kind: str, set_id: int | None, period: str | None
) -> list[PaymentRunRow]:
    async with conn.cursor(row_factory=class_row(PaymentRunRow)) as cur:
        await cur.execute(
            STATUS_QUERY,
            {
                "kind": manifest_kind,
                "stages": list(STAGES),
                "reconstruction": RECONSTRUCTION,
                "workflow": WORKFLOW,
                "set_id": set_id,
                "period": period,
            },
        )
        return await cur.fetchall()


@dataclass(frozen=True)
class RunManifest:
    manifest: dict[str, Any]


async def run_manifest(conn: AsyncConnection[Any], book_set_id: int) -> dict[str, Any]:
    """The manifest of the run's book set ({} when there is none)."""
    async with conn.cursor(row_factory=class_row(RunManifest)) as cur:
        await cur.execute("SELECT manifest FROM book_set WHERE book_set_id = %s", (book_set_id,))
        row = await cur.fetchone()
    return row.manifest if row is not None else {}


async def approval_gate_id(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> str | None:
    """The approval gate opened for this task attempt, if any."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT gate_id::text FROM gate WHERE close_id = %s AND task = %s AND attempt = %s AND kind = 'approval'",
            (close_id, task, attempt),
        )
        gate_id: str | None = await cur.fetchone()
    return gate_id


async def insert_certification(
    conn: AsyncConnection[Any], *, certificate_id: str, close_id: str, gate_id: str, amount: Decimal, currency: str
) -> None:
    """Certify through the gate (the database admits the row only through an approved gate for that amount)."""
    await conn.execute(
        "INSERT INTO payment_certification (certificate_id, set_id, close_id, gate_id, amount, currency)"
        " SELECT %s, (b.manifest->>'construction_set_id')::bigint, r.close_id, %s, %s, %s"
        " FROM close_run r JOIN book_set b USING (book_set_id) WHERE r.close_id = %s",
        (certificate_id, gate_id, amount, currency, close_id),
    )
