"""The accrual proposals certified payments record for a month's close (migration 0028, ADR 0050).

Reads `certified_accrual` (written by the database alone, when a certification is recorded) with `book_ap_item` (the
close's own books: an invoice whose id is the certificate's means the certified sum is invoiced, so it is no longer
accrued). Called by `countersign.engine.workflows.close.inputs` for the accruals specialist's input. Nothing here
writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row


@dataclass(frozen=True)
class CertifiedAccrual:
    certificate_id: str
    contract_id: str
    contract_title: str
    certificate_no: int
    payee: str
    period: str
    amount: Decimal
    currency: str
    cost_account: str
    accrual_account: str
    recorded_at: datetime
    invoiced: bool
    """The close's books hold an AP invoice whose id is the certificate's: the certified sum is in payables."""


CLOSE_ACCRUALS = """
SELECT a.certificate_id, a.contract_id, a.contract_title, a.certificate_no, a.payee, a.period, a.amount,
       a.currency::text AS currency, a.cost_account, a.accrual_account, a.recorded_at,
       EXISTS (SELECT 1 FROM book_ap_item i WHERE i.book_set_id = %(book_set_id)s
                AND i.invoice_id = a.certificate_id) AS invoiced
  FROM certified_accrual a
 WHERE a.entity = %(entity)s AND a.period = %(period)s
 ORDER BY a.contract_id, a.certificate_no, a.certificate_id
"""


async def certified_accruals(
    conn: AsyncConnection[Any], *, entity: str, period: str, book_set_id: int
) -> list[CertifiedAccrual]:
    """Every accrual proposal certified for `entity`'s `period`, by contract and certificate number, each saying
    whether the close's books (`book_set_id`) already hold its invoice."""
    async with conn.cursor(row_factory=class_row(CertifiedAccrual)) as cur:
        await cur.execute(CLOSE_ACCRUALS, {"entity": entity, "period": period, "book_set_id": book_set_id})
        return await cur.fetchall()
