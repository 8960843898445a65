"""The one read of a recorded payment notice (migration 0018): the engine writes it, the deliverer posts it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row


@dataclass(frozen=True)
class PaymentNoticeRecord:
    notice_id: int
    kind: str
    certificate_id: str
    close_id: str
    gate_id: str
    currency: str
    notified_sum: Decimal
    sum_to_pay: Decimal
    document: str
    sha256: str
    deadline: date
    served_at: datetime
    served_in_time: bool


async def read_payment_notice(conn: AsyncConnection[Any], notice_id: int) -> PaymentNoticeRecord | None:
    async with conn.cursor(row_factory=class_row(PaymentNoticeRecord)) as cur:
        await cur.execute(
            "SELECT notice_id, kind, certificate_id, close_id::text, gate_id::text, currency, notified_sum,"
            " sum_to_pay, document, sha256, deadline, served_at, served_in_time"
            " FROM payment_notice WHERE notice_id = %s",
            (notice_id,),
        )
        return await cur.fetchone()
