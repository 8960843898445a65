"""The certificates workflow's rows: its runs' status, the manifest a stage reads, the approval gate
a stage certifies through, the certification itself, and what became of earlier certificates.

Writes `payment_certification` (admitted by the database only through an approved gate
for that amount); reads `close_run`, `close_task`, `gate`, `gate_state`, `construction_certificate` and
`construction_set`. Called by countersign/engine/workflows/certificates/ (queries.py, certified_history.py,
duplicate_check.py), which pass the workflow's own words (its name, stages, reconstruction and payment tasks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row, scalar_row

from countersign.states import GateStatus, RunState, TaskState


@dataclass(frozen=True)
class PaymentRunRow:
    close_id: str
    certificate_id: str
    contract_id: str
    number: int
    period: str
    set_id: int
    run_status: RunState
    stage: str | None
    stage_status: TaskState | None
    amount_to_certify: str | None
    """What the payment gate proposes to certify (the claim, or the reconstructed sum); the claim before a gate."""
    claimed_amount: str | None
    currency: str
    gate_tier: str | None
    gate_status: GateStatus | None
    escalation: str | None
    certified_amount: Decimal | None
    final_date: str | None
    """The final date for payment the reconstruction computed from the contract's terms, as it wrote it (None before
    it ran); as `amount_to_certify`, read strictly by the card (a stored text that is no date is refused there, naming
    its row, instead of failing this query for every run)."""
    postponed_final_date: date | None
    """The final date as the payee's default notice postponed it (s. 110B), when one was recorded."""

    def __post_init__(self) -> None:  # the stored words become their Enums at the store's edge
        object.__setattr__(self, "run_status", RunState(self.run_status))
        if self.stage_status is not None:
            object.__setattr__(self, "stage_status", TaskState(self.stage_status))
        if self.gate_status is not None:
            object.__setattr__(self, "gate_status", GateStatus(self.gate_status))


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
       p.amount AS certified_amount,
       COALESCE(pay.summary #>> '{certificate,payment_dates,final_date}',
                recon.result #>> '{payment_dates,final_date}') AS final_date,
       n.postponed_final_date
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
  LEFT JOIN payee_default_notice n ON n.set_id = c.set_id AND n.certificate_id = c.certificate_id
 WHERE r.workflow = %(workflow)s
   AND (%(set_id)s::bigint IS NULL OR (b.manifest->>'construction_set_id')::bigint = %(set_id)s::bigint)
   AND (%(period)s::text IS NULL OR r.period = %(period)s::text)
 ORDER BY c.submitted_on, c.contract_id, c.number, c.certificate_id
"""


async def payment_run_rows(
    conn: AsyncConnection[Any],
    *,
    manifest_kind: str,
    workflow: str,
    stages: Sequence[str],
    reconstruction: str,
    set_id: int | None,
    period: str | None,
) -> list[PaymentRunRow]:
    """Returns every payment run of `workflow` (of the set and period, when given) in submission order."""
    async with conn.cursor(row_factory=class_row(PaymentRunRow)) as cur:
        await cur.execute(
            STATUS_QUERY,
            {
                "kind": manifest_kind,
                "stages": list(stages),
                "reconstruction": reconstruction,
                "workflow": workflow,
                "set_id": set_id,
                "period": period,
            },
        )
        return await cur.fetchall()


@dataclass(frozen=True)
class RunManifest:
    manifest: dict[str, Any]


async def run_manifest(conn: AsyncConnection[Any], book_set_id: int) -> dict[str, Any]:
    """Returns the manifest of the run's book set ({} when there is none)."""
    async with conn.cursor(row_factory=class_row(RunManifest)) as cur:
        await cur.execute("SELECT manifest FROM book_set WHERE book_set_id = %s", (book_set_id,))
        row = await cur.fetchone()
    return row.manifest if row is not None else {}


async def approval_gate_id(conn: AsyncConnection[Any], close_id: str, task: str, attempt: int) -> str | None:
    """Returns the approval gate opened for this task attempt, if any."""
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


@dataclass(frozen=True)
class EarlierOutcome:
    certificate_id: str
    has_run: bool
    certified_amount: Decimal | None


_OUTCOMES = """
SELECT c.certificate_id,
       EXISTS (SELECT 1 FROM close_run r JOIN book_set b ON b.book_set_id = r.book_set_id
                WHERE r.workflow = 'certificates' AND r.entity = c.certificate_id
                  AND b.manifest->>'certificate_id' = c.certificate_id) AS has_run,
       p.amount AS certified_amount
  FROM construction_certificate c
  LEFT JOIN payment_certification p ON p.certificate_id = c.certificate_id
 WHERE c.set_id = %s AND c.certificate_id = ANY(%s)
"""


async def earlier_outcomes(
    conn: AsyncConnection[Any], set_id: int, certificate_ids: Sequence[str]
) -> dict[str, EarlierOutcome]:
    """Returns, for each certificate: whether any payment run was started for it, and the amount certified, if any (a
    certification under any set counts: a certificate id is certified once, migration 0015)."""
    async with conn.cursor(row_factory=class_row(EarlierOutcome)) as cur:
        await cur.execute(_OUTCOMES, (set_id, list(certificate_ids)))
        return {row.certificate_id: row for row in await cur.fetchall()}


async def received_on(conn: AsyncConnection[Any], set_id: int) -> date:
    """Returns the day (UTC) the set's applications were received: when they were loaded. LookupError for no set."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(
            "SELECT (loaded_at AT TIME ZONE 'UTC')::date FROM construction_set WHERE set_id = %s", (set_id,)
        )
        found: date | None = await cur.fetchone()
    if found is None:
        raise LookupError(f"no construction set {set_id}")
    return found


NEVER_PAID_QUERY = """
SELECT DISTINCT b.manifest->>'certificate_id'
  FROM close_run r
  JOIN book_set b ON b.book_set_id = r.book_set_id
  JOIN LATERAL (
      SELECT s.status FROM gate_state s JOIN gate g USING (gate_id)
       WHERE s.close_id = r.close_id AND s.task = %(payment)s AND s.kind = 'approval'
       ORDER BY g.opened_at DESC, s.gate_id LIMIT 1) latest ON true
 WHERE r.workflow = %(workflow)s
   AND (b.manifest->>'construction_set_id')::bigint = %(set_id)s
   AND latest.status = 'rejected'
   AND NOT EXISTS (SELECT 1 FROM payment_certification p WHERE p.certificate_id = b.manifest->>'certificate_id')
"""
"""Certificates of the set whose payment run's latest payment gate was rejected and which nothing certified."""


async def never_paid(conn: AsyncConnection[Any], set_id: int, *, payment: str, workflow: str) -> frozenset[str]:
    """Returns the certificates of the set whose payment run's latest `payment` gate was rejected and which nothing
    certified."""
    async with conn.cursor(row_factory=scalar_row) as cur:
        await cur.execute(NEVER_PAID_QUERY, {"payment": payment, "workflow": workflow, "set_id": set_id})
        return frozenset(await cur.fetchall())
