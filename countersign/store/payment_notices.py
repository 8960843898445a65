"""Recorded payment notices (migration 0018): the engine records one per certificate and kind, the deliverer posts it.

A notice is append-only: recording one a second time returns the first, which stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from countersign.states import NoticeKind


@dataclass(frozen=True)
class PaymentNoticeRecord:
    notice_id: int
    kind: NoticeKind
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


@dataclass(frozen=True)
class NewPaymentNotice:
    """A notice as the engine drafted it; the database takes the document's digest itself."""

    kind: NoticeKind
    set_id: int
    certificate_id: str
    close_id: str
    gate_id: str
    currency: str
    notified_sum: Decimal
    sum_to_pay: Decimal
    basis: list[dict[str, Any]]
    document: str
    due_date: date
    final_date: date
    deadline: date


@dataclass(frozen=True)
class ServedNotice:
    """What recording a notice returns: the row that stands, and whether it was this call that wrote it."""

    notice_id: int
    sha256: str
    deadline: date
    served_in_time: bool
    recorded_now: bool = False


async def record_payment_notice(conn: AsyncConnection[Any], notice: NewPaymentNotice) -> ServedNotice:
    """Record `notice`, or return the one already recorded for its certificate and kind."""
    async with conn.cursor(row_factory=class_row(ServedNotice)) as cur:
        await cur.execute(
            "INSERT INTO payment_notice (kind, set_id, certificate_id, close_id, gate_id, currency, notified_sum,"
            " sum_to_pay, basis, document, sha256, due_date, final_date, deadline, served_in_time)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, encode(sha256(convert_to(%s, 'UTF8')), 'hex'),"
            "         %s, %s, %s, false)"
            " ON CONFLICT (certificate_id, kind) DO NOTHING"
            " RETURNING notice_id, sha256, deadline, served_in_time, true AS recorded_now",
            (
                notice.kind,
                notice.set_id,
                notice.certificate_id,
                notice.close_id,
                notice.gate_id,
                notice.currency,
                notice.notified_sum,
                notice.sum_to_pay,
                Jsonb(notice.basis),
                notice.document,
                notice.document,
                notice.due_date,
                notice.final_date,
                notice.deadline,
            ),
        )
        row = await cur.fetchone()
        if row is not None:
            return row
        await cur.execute(
            "SELECT notice_id, sha256, deadline, served_in_time, false AS recorded_now FROM payment_notice"
            " WHERE certificate_id = %s AND kind = %s",
            (notice.certificate_id, notice.kind),
        )
        existing = await cur.fetchone()
        if existing is None:
            raise LookupError(f"payment notice for certificate {notice.certificate_id} ({notice.kind}) vanished")
        return existing


async def read_payment_notice(conn: AsyncConnection[Any], notice_id: int) -> PaymentNoticeRecord | None:
    async with conn.cursor(row_factory=class_row(PaymentNoticeRecord)) as cur:
        await cur.execute(
            "SELECT notice_id, kind, certificate_id, close_id::text, gate_id::text, currency, notified_sum,"
            " sum_to_pay, document, sha256, deadline, served_at, served_in_time"
            " FROM payment_notice WHERE notice_id = %s",
            (notice_id,),
        )
        return await cur.fetchone()
