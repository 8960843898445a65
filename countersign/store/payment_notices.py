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


@dataclass(frozen=True)
class PayeeDefaultNoticeRecord:
    """The payee's default notice (s. 110B) as the database recorded it, with the dates it computed."""

    notice_id: int
    kind: NoticeKind
    certificate_id: str
    payment_notice_id: int | None
    currency: str
    claimed_sum: Decimal | None
    stated_sum: Decimal
    basis: str
    given_on: date
    given_by: str
    due_date: date
    final_date: date
    payment_notice_deadline: date
    days_late: int
    postponed_final_date: date
    recorded_at: datetime


async def record_payee_default_notice(
    conn: AsyncConnection[Any], *, certificate_id: str, stated_sum: Decimal, basis: str, given_on: date, given_by: str
) -> int:
    """Record the payee's default notice through `record_payee_default_notice` (the payee default notice migration),
    which refuses one while a payment notice was given in time; the new row's id."""
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT public.record_payee_default_notice(%s, %s, %s, %s, %s)",
            (certificate_id, stated_sum, basis, given_on, given_by),
        )
        row = await cur.fetchone()
    if row is None:
        raise LookupError(f"the default notice for certificate {certificate_id} was not recorded")
    return int(row[0])


async def read_payee_default_notice(conn: AsyncConnection[Any], notice_id: int) -> PayeeDefaultNoticeRecord | None:
    async with conn.cursor(row_factory=class_row(PayeeDefaultNoticeRecord)) as cur:
        await cur.execute(
            "SELECT notice_id, kind, certificate_id, payment_notice_id, currency, claimed_sum, stated_sum, basis,"
            " given_on, given_by, due_date, final_date, payment_notice_deadline, days_late, postponed_final_date,"
            " recorded_at FROM payee_default_notice WHERE notice_id = %s",
            (notice_id,),
        )
        return await cur.fetchone()


async def certificate_close_id(conn: AsyncConnection[Any], certificate_id: str) -> str | None:
    """The newest payment run of a certificate (its close run), if one was started."""
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT close_id::text FROM close_run WHERE workflow = 'certificates' AND entity = %s"
            " ORDER BY created_at DESC LIMIT 1",
            (certificate_id,),
        )
        row = await cur.fetchone()
    return None if row is None else str(row[0])
