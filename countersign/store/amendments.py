"""An approval with edits as the engine reads it back: the sum a quantity surveyor certified on a payment gate instead
of the one proposed, their reason and each line's adjustment (`gate_decision`'s amendment columns, migration
approve_with_edits). Read-only; the decision writer writes them (countersign/store/decisions.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row

from countersign.certificates.amendment import Amendment, amendment_from_row


@dataclass(frozen=True)
class AmendmentRow:
    principal_id: str
    display_name: str
    reason: str
    amend_currency: str
    proposed_minor: int
    certified_minor: int
    adjustments: Any


@dataclass(frozen=True)
class GateAmendment:
    """Who amended the gate's sum, why, and the amendment."""

    principal_id: str
    display_name: str
    reason: str
    amendment: Amendment


async def read_gate_amendment(conn: AsyncConnection[Any], gate_id: str) -> GateAmendment | None:
    """The first amended approval of the gate (every approval of a gate certifies one sum: the database refuses
    another), or None when its approvals certify the proposed sum."""
    async with conn.cursor(row_factory=class_row(AmendmentRow)) as cur:
        await cur.execute(
            "SELECT d.principal_id, coalesce(p.display_name, d.principal_id) AS display_name, d.reason,"
            " d.amend_currency, d.proposed_minor, d.certified_minor, d.adjustments"
            " FROM gate_decision d LEFT JOIN principal p ON p.principal_id = d.principal_id"
            " WHERE d.gate_id = %s AND d.decision = 'approve' AND d.certified_minor IS NOT NULL"
            " ORDER BY d.decision_id LIMIT 1",
            (gate_id,),
        )
        row = await cur.fetchone()
    if row is None:
        return None
    amendment = amendment_from_row(row.amend_currency, row.proposed_minor, row.certified_minor, row.adjustments)
    assert amendment is not None  # the columns are all set or all NULL (gate_decision_amendment_whole)
    return GateAmendment(row.principal_id, row.display_name, row.reason, amendment)
